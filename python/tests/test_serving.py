"""ein.serve end to end: tritonserver on loopback serving the BERT-style
encoder, queried over HTTP and gRPC with tritonclient, compared with the
runtime called directly. Every wait is bounded: client calls have timeouts,
threads are joined with deadlines, the server is killed if it outlives its
stop.

Needs python/requirements-serving.txt (scripts/python-env.sh installs it);
without it the module skips, except under CI (CI=true), where it fails.
"""
import concurrent.futures
import os
import queue
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import ein

from conftest import EXAMPLES, REPO
from test_batching import bert_request

if not os.environ.get("CI"):
    pytest.importorskip("tritonclient.grpc", reason="the serving requirements are not installed")
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException, np_to_triton_dtype  # noqa: E402

from ein.serve import Server, ServerError, _children, free_port, triton_dist  # noqa: E402

try:
    triton_dist()
except RuntimeError as missing:
    if os.environ.get("CI"):
        raise
    pytest.skip(str(missing), allow_module_level=True)

CLIENT_TIMEOUT_S = 60
MODEL = "encoder"
# Long enough that requests sent together meet in one batch, short enough for the tests' time.
QUEUE_DELAY_US = 100_000


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("serving") / "encoder.einb"
    ein.compile(EXAMPLES / "bert_encoder.ein", random_weights=1).save(path)
    return path


@pytest.fixture(scope="module")
def direct(artifact):
    return ein.load(artifact)


# ein.serve's routes: the native backend (libtriton_ein.so) and Triton's Python backend.
BACKENDS = ["native", "python"]


@pytest.fixture(scope="module", params=BACKENDS)
def server(artifact, request):
    # Any padding allowed, so that requests of different lengths merge.
    with Server(artifact, name=MODEL, pad_dims=["t"], max_padding=100, instances=2,
                max_queue_delay_us=QUEUE_DELAY_US, exit_timeout_s=5, backend=request.param) as running:
        yield running


def http_infer(url, request, datatypes=None, binary=True):
    """The request's outputs over HTTP; InferenceServerException on an error response."""
    datatypes = datatypes or {}
    with httpclient.InferenceServerClient(url, connection_timeout=CLIENT_TIMEOUT_S,
                                          network_timeout=CLIENT_TIMEOUT_S) as client:
        inputs = []
        for name, array in request.items():
            tensor = httpclient.InferInput(name, list(array.shape), datatypes.get(name, "INT32"))
            tensor.set_data_from_numpy(array, binary_data=binary)
            inputs.append(tensor)
        return client.infer(MODEL, inputs).as_numpy("sentence")


def grpc_infer(url, request):
    with grpcclient.InferenceServerClient(url) as client:
        inputs = []
        for name, array in request.items():
            tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        return client.infer(MODEL, inputs, client_timeout=CLIENT_TIMEOUT_S).as_numpy("sentence")


def executions(server):
    with httpclient.InferenceServerClient(server.http_url, network_timeout=CLIENT_TIMEOUT_S) as client:
        stats = client.get_inference_statistics(MODEL)["model_stats"][0]
        return int(stats["execution_count"]), int(stats["inference_count"])


def expect(direct, request, got):
    want = direct.run(request)["sentence"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_config_says_batch_ranges_batching_and_instances(server):
    assert "max_batch_size: 16" in server.config
    assert '{ name: "ids" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true }' in server.config
    assert '{ name: "sentence" data_type: TYPE_FP32 dims: [ 64 ] }' in server.config
    assert f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}" in server.config
    assert "instance_group [ { count: 2 kind: KIND_CPU } ]" in server.config
    assert f'backend: "{ {"native": "ein", "python": "python"}[server.backend] }"' in server.config


@pytest.mark.parametrize("protocol", ["http", "http-json", "grpc"])
def test_one_request_equals_the_runtime(server, direct, protocol):
    for seed, (b, t) in enumerate([(1, 8), (3, 41), (2, 256)]):
        request = bert_request(b, t, seed)
        if protocol == "grpc":
            got = grpc_infer(server.grpc_url, request)
        else:
            got = http_infer(server.http_url, request, binary=protocol == "http")
        expect(direct, request, got)


def test_concurrent_requests_of_mixed_sizes_are_batched_and_get_their_own_rows(server, direct):
    shapes = [(1 + i % 3, [8, 200, 17, 64, 1, 129][i % 6]) for i in range(18)]
    requests = [bert_request(b, t, seed) for seed, (b, t) in enumerate(shapes)]
    before, _ = executions(server)
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        infer = [grpc_infer if i % 2 else http_infer for i in range(len(requests))]
        urls = [server.grpc_url if i % 2 else server.http_url for i in range(len(requests))]
        results = list(pool.map(lambda args: args[0](args[1], args[2]), zip(infer, urls, requests),
                                timeout=CLIENT_TIMEOUT_S * 2))
    for request, got in zip(requests, results):
        expect(direct, request, got)
    after, _ = executions(server)
    # Batching happened: fewer model executions than requests.
    assert after - before < len(requests), (before, after)


# Malformed requests: each must fail with a message naming the input and
# what was expected, and the requests sent with it must succeed.
MALFORMED = [
    # Triton's own checks against config.pbtxt, before the batcher:
    ("unknown input", lambda r: {**r, "tokens": r["ids"]}, {},
     r"expected 2 inputs but got 3 inputs for model 'encoder'. Got input\(s\) \['tokens','mask','ids'\]"),
    ("wrong dtype", lambda r: {**r, "mask": r["mask"].astype(np.float32)}, {"mask": "FP32"},
     r"inference input 'mask' data-type is 'FP32', but model 'encoder' expects 'INT32'"),
    ("wrong rank", lambda r: {**r, "ids": r["ids"][:, :, None]}, {},
     r"unexpected shape for input 'ids' for model 'encoder'. Expected \[-1,-1\], got \[2,6,1\]"),
    # ein.serve's, in the batch (ein._batching.check_request):
    ("length above the range", lambda r: bert_request(1, 300, 5), {}, r'input "ids" axis 1 is 300, but t ranges over 1\.\.256'),
    ("inputs that disagree", lambda r: {**r, "mask": r["mask"][:, :3]}, {},
     r'input "mask" axis 1 is 3, but t = 6 \(from input "ids" axis 1\)'),
    ("id outside the table", lambda r: {**r, "ids": np.full_like(r["ids"], 5000)}, {},
     r'input "ids" holds id 5000, outside \[0, 1000\)'),
    # 64 MB an input (128 MB the request): refused by its length, the server unshaken.
    ("64 MB input", lambda r: {"ids": np.zeros((1, 1 << 24), np.int32), "mask": np.ones((1, 1 << 24), np.int32)}, {},
     r'input "ids" axis 1 is 16777216, but t ranges over 1\.\.256'),
]


@pytest.mark.parametrize("case, change, datatypes, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_request_fails_alone_and_the_server_keeps_serving(server, direct, case, change, datatypes, message):
    good = [bert_request(b, t, seed) for seed, (b, t) in enumerate([(2, 6), (1, 30), (3, 6)])]
    bad = change(bert_request(2, 6, 7))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        good_futures = [pool.submit(http_infer, server.http_url, request) for request in good]
        bad_future = pool.submit(http_infer, server.http_url, bad, datatypes)
        with pytest.raises(InferenceServerException, match=message) as refused:
            bad_future.result(timeout=CLIENT_TIMEOUT_S)
        assert refused.value.status() == "400"  # the client's fault, not the server's
        for request, future in zip(good, good_futures):
            expect(direct, request, future.result(timeout=CLIENT_TIMEOUT_S))
    assert server.process.poll() is None
    expect(direct, good[0], grpc_infer(server.grpc_url, good[0]))


def hostile_request(rng):
    """A request that is sometimes right and mostly wrong in one way: shapes
    past the ranges or disagreeing, ids outside the table, empty axes,
    another dtype or rank."""
    b, t = int(rng.integers(0, 20)), int(rng.integers(0, 300))
    request = bert_request(max(b, 1), max(t, 1), int(rng.integers(1 << 30)))
    request = {name: array[:b, :t] for name, array in request.items()}
    kind = rng.integers(0, 6)
    if kind == 1:
        request["ids"] = rng.integers(-(1 << 31), (1 << 31) - 1, request["ids"].shape, dtype=np.int64).astype(np.int32)
    elif kind == 2:
        request["mask"] = request["mask"][:, : max(0, t - int(rng.integers(1, 4)))]
    elif kind == 3:
        request["ids"] = request["ids"].reshape(-1)[:, None] if request["ids"].size else request["ids"][:, :, None]
    datatypes = {"mask": "FP32"} if kind == 4 else {}
    if kind == 4:
        request["mask"] = request["mask"].astype(np.float32)
    return request, datatypes


@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_requests_never_take_the_server_down(artifact, direct, backend):
    """300 requests from 8 clients, most malformed: each is answered right or
    refused as the client's fault (400), and the server serves on."""
    server = Server(artifact, name=MODEL, pad_dims=["t"], instances=2, max_queue_delay_us=2000, exit_timeout_s=5,
                    backend=backend)
    with server:
        def send(seed):
            request, datatypes = hostile_request(np.random.default_rng(seed))
            try:
                return request, http_infer(server.http_url, request, datatypes)
            except InferenceServerException as refused:
                return request, refused

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(send, range(300), timeout=CLIENT_TIMEOUT_S * 4))
        answered = 0
        for request, result in outcomes:
            if isinstance(result, InferenceServerException):
                assert result.status() == "400", result
            else:
                expect(direct, request, result)
                answered += 1
        assert 0 < answered < len(outcomes)
        assert server.process.poll() is None and server.restarts == 0
        good = bert_request(2, 9, 1)
        expect(direct, good, grpc_infer(server.grpc_url, good))


@pytest.mark.parametrize("backend", BACKENDS)
def test_shutdown_under_load_finishes_or_fails_every_request(artifact, direct, backend):
    """Clients keep sending while the server stops: every request either
    returns the right rows or raises an error, none hangs, the server exits,
    and a request sent after it exited fails."""
    server = Server(artifact, name=MODEL, pad_dims=["t"], instances=2, max_queue_delay_us=2000, exit_timeout_s=5,
                    backend=backend)
    server.start()
    outcomes = {seed: [] for seed in range(8)}  # per client: (request, outputs or the exception)
    exited = threading.Event()

    def client(seed):
        rng = np.random.default_rng(seed)
        while True:
            after_exit = exited.is_set()
            request = bert_request(int(rng.integers(1, 4)), int(rng.integers(1, 257)), int(rng.integers(1 << 30)))
            try:
                result = (grpc_infer(server.grpc_url, request) if seed % 2
                          else http_infer(server.http_url, request))
            except Exception as error:  # refused, reset or shutting down: a clean failure
                result = error
            outcomes[seed].append((request, result))
            if after_exit:
                return

    threads = [threading.Thread(target=client, args=(seed,), daemon=True) for seed in outcomes]
    for thread in threads:
        thread.start()
    time.sleep(2)
    served_before_stop = sum(map(len, outcomes.values()))
    started = time.monotonic()
    status = server.stop(timeout_s=40)
    stop_seconds = time.monotonic() - started
    exited.set()
    deadline = time.monotonic() + CLIENT_TIMEOUT_S + 10
    for thread in threads:
        thread.join(max(0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a client hung"
    assert served_before_stop > 0
    assert status is not None and stop_seconds < 40, (status, stop_seconds)
    for seed, client_outcomes in outcomes.items():
        assert isinstance(client_outcomes[-1][1], Exception), f"client {seed} was answered by a stopped server"
        for request, result in client_outcomes:
            if not isinstance(result, Exception):
                expect(direct, request, result)
    answered = sum(not isinstance(r, Exception) for o in outcomes.values() for _, r in o)
    print(f"shutdown under load: {sum(map(len, outcomes.values()))} requests, {answered} answered, "
          f"stopped in {stop_seconds:.1f} s with status {status}")


def test_metrics_count_the_models_requests(server, direct):
    """Triton's own Prometheus metrics, on for ein models."""
    def successes():
        loopback = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with loopback.open(server.metrics_url, timeout=CLIENT_TIMEOUT_S) as response:
            text = response.read().decode()
        found = re.search(r'^nv_inference_request_success\{model="encoder",version="1"\} (\d+)', text, re.M)
        assert found and "nv_inference_queue_duration_us" in text and "nv_inference_compute_infer_duration_us" in text
        return int(found.group(1))

    # Earlier tests' requests may still be being counted: start from a count that has settled.
    before, settled_since = successes(), time.monotonic()
    deadline = settled_since + 10
    while time.monotonic() - settled_since < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = successes()
        if now != before:
            before, settled_since = now, time.monotonic()
    request = bert_request(2, 9, 4)
    expect(direct, request, http_infer(server.http_url, request))
    # Triton counts a request after its response is sent.
    deadline = time.monotonic() + 10
    while successes() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert successes() == before + 1


def _alive(pids):
    """Those of ``pids`` that are processes still (not zombies)."""
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            pass
    return alive


def run_clients(server, fault, clients=8, before_s=2, after_s=15):
    """``clients`` threads sending requests of mixed sizes (gRPC and HTTP by
    turns) for ``before_s``, then fault(), then ``after_s`` more seconds;
    every outcome as (seconds after the fault it was sent, request, outputs
    or the exception)."""
    outcomes = {seed: [] for seed in range(clients)}
    done = threading.Event()

    def client(seed):
        rng = np.random.default_rng(seed)
        while not done.is_set():
            request = bert_request(int(rng.integers(1, 4)), int(rng.integers(1, 129)), int(rng.integers(1 << 30)))
            sent = time.monotonic()
            try:
                result = grpc_infer(server.grpc_url, request) if seed % 2 else http_infer(server.http_url, request)
            except Exception as error:
                result = error
            outcomes[seed].append((sent, request, result))

    threads = [threading.Thread(target=client, args=(seed,), daemon=True) for seed in outcomes]
    for thread in threads:
        thread.start()
    time.sleep(before_s)
    fault()
    faulted = time.monotonic()
    time.sleep(after_s)
    done.set()
    deadline = time.monotonic() + CLIENT_TIMEOUT_S + 10
    for thread in threads:
        thread.join(max(0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a client hung"
    return [(sent - faulted, request, result) for client_outcomes in outcomes.values()
            for sent, request, result in client_outcomes]


def expect_recovery(direct, outcomes, within_s):
    """Requests fail only when sent within ``within_s`` of the fault, enough
    are answered after it, and every answer is right."""
    failures = [after for after, _, result in outcomes if isinstance(result, Exception)]
    assert all(after < within_s for after in failures), failures
    assert sum(after > within_s for after, _, _ in outcomes) >= 8, "few requests after the recovery"
    for _, request, result in outcomes:
        if not isinstance(result, Exception):
            expect(direct, request, result)
    print(f"{len(outcomes)} requests, {len(failures)} failed, the last {max(failures, default=0):.1f} s after the fault")


def shm_regions(server):
    return list(pathlib.Path("/dev/shm").glob(f"ein{os.getpid()}_{server.http_port}_*"))


def test_a_killed_instance_is_replaced_and_the_failures_stop(artifact, direct):
    """kill -9 of one instance process under 8 clients: requests fail only in
    the seconds it takes to notice and recover (a reload of the model, or a
    relaunch of tritonserver where the instance took it down), all answers
    are right, and the server listens on every interface (host 0.0.0.0)
    while its URLs reach it over loopback."""
    server = Server(artifact, name=MODEL, pad_dims=["t"], instances=2, max_queue_delay_us=2000, exit_timeout_s=5,
                    host="0.0.0.0", backend="python")
    with server:
        assert server.http_url.startswith("127.0.0.1:") and server.grpc_url.startswith("127.0.0.1:")
        victim = min(server.instance_processes())
        outcomes = run_clients(server, lambda: os.kill(victim, signal.SIGKILL))
        assert server.restarts >= 1, server.restarts
        # The old generation's survivor is gone after the exit timeout (5 s).
        assert victim not in server.instance_processes() and len(server.instance_processes()) == 2
    expect_recovery(direct, outcomes, within_s=10)
    assert not shm_regions(server)
    assert not live_group_members(server.process.pid)


def live_group_members(group: int, wait_s: float = 5.0) -> set:
    """The processes of process group ``group`` that are not zombies, once
    none is left or after ``wait_s`` (a killed process takes a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        members = set()
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
                if int(fields[2]) == group and fields[0] != b"Z":
                    members.add(int(entry))
            except (OSError, ValueError, IndexError):  # not a process, or gone meanwhile
                continue
        if not members or time.monotonic() > deadline:
            return members
        time.sleep(0.1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_tritonserver_is_started_again(artifact, direct, backend):
    """kill -9 of tritonserver under 8 clients: it is started again on the
    same ports, requests fail only until it serves, and (Python route) the
    dead server's shared memory is removed."""
    server = Server(artifact, name=MODEL, pad_dims=["t"], instances=2, max_queue_delay_us=2000, exit_timeout_s=5,
                    backend=backend)
    with server:
        first, regions = server.process.pid, shm_regions(server)
        assert bool(regions) == (backend == "python")
        outcomes = run_clients(server, lambda: os.kill(first, signal.SIGKILL))
        assert server.restarts == 1 and server.process.pid != first and server.process.poll() is None
        assert len(server.instance_processes()) == (2 if backend == "python" else 0)
        assert not any(region.exists() for region in regions)
        assert not live_group_members(first), "the killed server's instances are ended with it"
        assert server.stop() == 0
    expect_recovery(direct, outcomes, within_s=10)
    assert not shm_regions(server)
    assert not live_group_members(server.process.pid)


def start_command_line(arguments):
    """python -m ein.serve ARGUMENTS, and the line it prints once it serves
    (empty if none within 120 s); the caller stops the process."""
    process = subprocess.Popen([sys.executable, "-m", "ein.serve", *arguments], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    banner = []
    reader = threading.Thread(target=lambda: banner.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    return process, banner[0] if banner else ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_launcher_leaves_no_process(artifact, backend):
    """kill -9 of python -m ein.serve: tritonserver (its parent-death signal)
    and the instance processes (which watch their server) are gone within 5 s."""
    process, banner = start_command_line([str(artifact), "--name", MODEL, "--pad", "t", "--instances", "2",
                                          "--backend", backend,
                                          "--http-port", str(free_port()), "--grpc-port", str(free_port()),
                                          "--metrics-port", str(free_port())])
    try:
        assert banner.startswith(f"serving '{MODEL}'"), banner
        triton = _children(process.pid, "tritonserver")
        stubs = set().union(*(_children(pid, "triton_python_backend_stub") for pid in triton))
        assert len(triton) == 1 and len(stubs) == (2 if backend == "python" else 0), (triton, stubs)
    finally:
        process.kill()
        process.wait(10)
    deadline = time.monotonic() + 5
    while _alive(triton | stubs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(triton | stubs)


def test_a_stopped_server_starts_again(artifact, direct):
    server = Server(artifact, name=MODEL, pad_dims=["t"], exit_timeout_s=5)
    request = bert_request(1, 7, 2)
    for _ in range(2):
        with server:
            expect(direct, request, http_infer(server.http_url, request))
        assert server.process.returncode == 0 and not server.supervised


def test_a_port_in_use_is_a_clear_error(artifact):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = Server(artifact, name=MODEL, http_port=port, grpc_port=free_port())
        with pytest.raises(ServerError, match=f"failed to start HTTP service: .*'127.0.0.1:{port}' already in use"):
            server.start(timeout_s=60)
    assert server.process.poll() is not None


def test_the_command_line_serves_until_interrupted(direct):
    """python -m ein.serve on the example's source, as examples/serving/serve.sh runs it."""
    http_port, grpc_port = free_port(), free_port()
    process, banner = start_command_line([str(EXAMPLES / "bert_encoder.ein"), "--random-weights", "1", "--name", MODEL,
                                          "--pad", "t", "--http-port", str(http_port), "--grpc-port", str(grpc_port),
                                          "--metrics-port", str(free_port()), "--exit-timeout", "5"])
    try:
        assert banner.startswith(f"serving '{MODEL}' on HTTP 127.0.0.1:{http_port}"), banner
        request = bert_request(2, 11, 3)
        expect(direct, request, http_infer(f"127.0.0.1:{http_port}", request))
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
        assert process.returncode == 0 and "stopped (tritonserver status 0)" in rest, rest
    finally:
        if process.poll() is None:  # a failed assertion: stop the server through its launcher, then the launcher
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def test_the_command_line_names_what_it_cannot_serve(capsys):
    from ein.serve import main
    assert main([str(EXAMPLES / "mhsa.ein"), "--random-weights", "1"]) == 1
    assert "error: a served model needs a batch dim" in capsys.readouterr().err
    assert main([str(EXAMPLES / "bert_encoder.ein"), "--random-weights", "1", "--pad", "c"]) == 1
    assert 'error: cannot pad dim "c"' in capsys.readouterr().err
    # A .ein model with parameters and no weights: ein.compile's message, naming them.
    assert main([str(EXAMPLES / "bert_encoder.ein")]) == 1
    assert "declares" in capsys.readouterr().err


# A decoder through the native backend: decoupled, a response per token.
DECODER = "llama"
LLAMA_CASE = REPO / "tests" / "conformance" / "cases" / "llama_hf_tiny"


@pytest.fixture(scope="module")
def decoder_artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("decoder") / "llama.einb"
    ein.compile(EXAMPLES / "llama_decoder.ein", weights=LLAMA_CASE / "weights.safetensors").save(path)
    return path


def stream_tokens(url, prompt, model=DECODER, encoder_inputs=None, **options):
    """One generation over a gRPC stream: the tokens streamed, and the error
    that ended it (None when it ended with the final flag). ``encoder_inputs``
    (an encoder-decoder's, name to array) go with the request as they are."""
    datatypes = {"max_tokens": ("INT32", np.int32), "temperature": ("FP32", np.float32), "top_k": ("INT32", np.int32),
                 "top_p": ("FP32", np.float32), "seed": ("INT64", np.int64), "stop": ("INT32", np.int32)}
    tokens, outcome = [], queue.Queue()

    def on_response(result, error):
        if error is not None:
            outcome.put(error)
            return
        response = result.get_response()
        if response.outputs:
            tokens.append(int(result.as_numpy("token")[0]))
        if response.parameters["triton_final_response"].bool_param:
            outcome.put(None)

    inputs = []
    for name, value in [("prompt", prompt), *options.items()]:
        datatype, dtype = datatypes.get(name, ("INT32", np.int32))
        array = np.array(value if name in ("prompt", "stop") else [value], dtype)
        tensor = grpcclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    for name, array in (encoder_inputs or {}).items():
        tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    with grpcclient.InferenceServerClient(url) as client:
        client.start_stream(callback=on_response)
        try:
            client.async_stream_infer(model, inputs, enable_empty_final_response=True)
            error = outcome.get(timeout=CLIENT_TIMEOUT_S)
        finally:
            client.stop_stream()
    return tokens, error


def test_a_decoder_streams_each_prompts_own_tokens(decoder_artifact):
    """Prompts from 6 clients at once through the native backend's
    scheduler (3 sequences at a time): each streams the tokens it gives
    alone, with its own options; a bad prompt fails alone."""
    model = ein.load(decoder_artifact)
    prompts = [[3, 1, 4], [1] * 60, [5, 9], [2, 6, 5, 3, 5], [7] * 40, [8]]
    options = [dict(max_tokens=5 + i, temperature=0.8 * (i % 2), top_k=16, seed=i) for i in range(len(prompts))]
    with Server(decoder_artifact, name=DECODER, max_sequences=3, threads=1, exit_timeout_s=5) as server:
        assert server.decoder and "model_transaction_policy { decoupled: true }" in server.config
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            outcomes = list(pool.map(lambda i: stream_tokens(server.grpc_url, prompts[i], **options[i]),
                                     range(len(prompts)), timeout=CLIENT_TIMEOUT_S * 2))
        for prompt, option, (tokens, error) in zip(prompts, options, outcomes):
            assert error is None, error
            assert tokens == model.generate(prompt, max_new_tokens=option["max_tokens"], temperature=option["temperature"],
                                            top_k=option["top_k"], seed=option["seed"])
        alone = model.generate([3, 1, 4], max_new_tokens=8)
        tokens, error = stream_tokens(server.grpc_url, [3, 1, 4], max_tokens=8, stop=[alone[2]])
        assert error is None and tokens == alone[:3]
        tokens, error = stream_tokens(server.grpc_url, [1, 10 ** 6])
        assert tokens == [] and "prompt token 1 is 1000000, outside the vocabulary" in str(error), error
        tokens, error = stream_tokens(server.grpc_url, [])
        assert tokens == [] and "the prompt is empty" in str(error), error
        assert server.process.poll() is None
        assert stream_tokens(server.grpc_url, [5, 9], max_tokens=6)[0] == outcomes[2][0][:6]


def test_an_encoder_decoder_streams_the_tokens_of_each_requests_encoder_inputs(tmp_path):
    """The toy translation model of test_encoder_decoder.py through the
    native backend: each request's encoder input (another source, another
    length) goes with its prompt, and its stream is Model.generate's with
    those inputs. A request without them, or with a source beyond the
    model's dims, fails alone."""
    from test_encoder_decoder import MODEL as TRANSLATION
    path = tmp_path / "translate.einb"
    ein.compile(TRANSLATION, random_weights=3).save(path)
    model = ein.load(path)
    rng = np.random.default_rng(7)
    sources = [rng.standard_normal((1, s, 8)).astype(np.float32) * scale for s, scale in [(5, 1), (5, 4), (2, 1), (6, 2)]]
    with Server(path, name="translate", max_sequences=2, threads=1, exit_timeout_s=5) as server:
        assert 'name: "src" data_type: TYPE_FP32 dims: [ 1, -1, 8 ] }' in server.config
        with concurrent.futures.ThreadPoolExecutor(len(sources)) as pool:
            outcomes = list(pool.map(lambda src: stream_tokens(server.grpc_url, [1, 2], "translate", {"src": src},
                                                               max_tokens=6),
                                     sources, timeout=CLIENT_TIMEOUT_S * 2))
        for src, (tokens, error) in zip(sources, outcomes):
            assert error is None, error
            assert tokens == model.generate([1, 2], max_new_tokens=6, encoder_inputs={"src": src})
        assert outcomes[0][0] != outcomes[1][0]  # the encoder input decides the tokens
        tokens, error = stream_tokens(server.grpc_url, [1, 2], "translate", max_tokens=6)
        assert tokens == [] and "src" in str(error), error
        too_long = np.zeros((1, 7, 8), np.float32)
        tokens, error = stream_tokens(server.grpc_url, [1, 2], "translate", {"src": too_long}, max_tokens=6)
        assert tokens == [] and "src" in str(error), error
        assert stream_tokens(server.grpc_url, [1, 2], "translate", {"src": sources[2]}, max_tokens=6) == outcomes[2]
        assert server.process.poll() is None
    with pytest.raises(ValueError, match="the model's encoder input 'prompt' has the name of a request's"):
        clashing = tmp_path / "clashing.einb"
        ein.compile(TRANSLATION.replace("src", "prompt"), random_weights=3).save(clashing)
        Server(clashing, name="clashing")
