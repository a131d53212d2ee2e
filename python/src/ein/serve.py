"""Serves an ein model with Triton Inference Server, with dynamic batching.

    python -m ein.serve model.einb --pad t            # or model.ein --random-weights 1
    python -m ein.serve model.einb --instances 2 --no-dynamic-batching --http-port 8000

The server binary comes from PyPI's nvidia-pytriton wheel. ein.serve writes a
Triton model repository (config.pbtxt: max_batch_size, -1 for ranged dims,
dynamic_batching, instance_group) and starts tritonserver (on loopback unless
--host says otherwise). The model runs in the server's process through ein's
own backend, libtriton_ein.so (--backend native, the default: instances are
threads over one loaded model), or in Triton's Python backend, a process per
instance (--backend python: its model.py runs the artifact with ein's
runtime). Requests are checked one by one, merged (padded to the longest in
--pad dims) and each gets its own rows back (ein/batching.hpp natively,
ein._batching in Python, the same rules). A decoder (a model with state) is
served decoupled by the native backend: a request is a prompt, its tokens
stream back one response each from a scheduler that batches every sequence
generating. A tritonserver that dies is started
again, an instance process that dies is replaced (the model reloaded), and
tritonserver dies with the process that started it.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Optional, Sequence

from ._batching import Signature, signature
from ._errors import Error

# Where scripts/python-env.sh installs the nvidia-pytriton wheel (with
# --target, apart from the venv's packages: it pins numpy<2, and only its
# server files are used).
_VENV_TRITON = pathlib.Path(sys.prefix) / "opt" / "nvidia-pytriton"

# ein.serve's routes and Triton's names for them: the native backend runs the
# model in the server's process (instances are threads), the Python backend
# in a process per instance.
_TRITON_BACKENDS = {"native": "ein", "python": "python"}

_TRITON_DTYPES = {"f32": "TYPE_FP32", "f16": "TYPE_FP16", "i32": "TYPE_INT32", "i64": "TYPE_INT64",
                  "bool": "TYPE_BOOL"}

# The model.py of a served model. The backend's stub embeds the system
# libpython and ignores PYTHONPATH, so the folders where this interpreter
# finds ein and NumPy come first on its path.
_MODEL_PY = """# Written by ein.serve: Triton's Python backend runs an ein model.
import sys
sys.path[:0] = {python_path!r}
from ein._triton_model import TritonPythonModel  # noqa: E402,F401
"""


class ServerError(RuntimeError):
    """The server could not be found or did not start; the message ends with its error lines."""


def triton_dist(explicit: Optional[os.PathLike] = None) -> pathlib.Path:
    """The folder of Triton's files in the nvidia-pytriton wheel
    (bin/tritonserver, backends/, python_backend_stubs/): ``explicit``, else
    $EIN_TRITON_DIR, else an importable pytriton, else the venv's copy."""
    candidates = [explicit, os.environ.get("EIN_TRITON_DIR")]
    spec = importlib.util.find_spec("pytriton")
    if spec and spec.submodule_search_locations:
        candidates.append(pathlib.Path(list(spec.submodule_search_locations)[0]) / "tritonserver")
    candidates.append(_VENV_TRITON / "pytriton" / "tritonserver")
    for candidate in candidates:
        if candidate and (pathlib.Path(candidate) / "bin" / "tritonserver").is_file():
            return pathlib.Path(candidate)
    raise ServerError("Triton Inference Server not found: install the nvidia-pytriton wheel (scripts/python-env.sh "
                      "does, see python/requirements-triton-server.txt) or point EIN_TRITON_DIR at its tritonserver "
                      "folder")


def _dims_text(axes) -> str:
    return ", ".join(str(axis if isinstance(axis, int) else -1) for axis in axes)


def model_config(name: str, sig: Signature, *, max_batch_size: int, dynamic_batching: bool,
                 max_queue_delay_us: int, instances: int, threads: int, artifact: str,
                 loader: str = "ein:load", max_padding: float = 1.25, backend: str = "native") -> str:
    """config.pbtxt for a model of this signature: the batch dim is Triton's
    batch axis, ranged dims are -1, the rest constants; ``backend`` "native"
    (libtriton_ein.so, Triton's backend "ein") or "python"."""
    def tensors(kind, tensors):
        # Triton's batcher merges only requests of equal shapes unless an
        # input allows ragged batches; ein._batching merges the others itself.
        ragged = " allow_ragged_batch: true" if kind == "input" else ""
        return ",\n".join(f'  {{ name: "{t.name}" data_type: {_TRITON_DTYPES[t.dtype]} dims: [ {_dims_text(t.axes)} ]'
                           f'{ragged if any(isinstance(a, str) for a in t.axes) else ""} }}'
                           for t in tensors).join([f"{kind} [\n", "\n]\n"])

    parameters = {"artifact": artifact, "loader": loader, "threads": str(threads), "pad_dims": ",".join(sig.pad_dims),
                  "max_padding": repr(float(max_padding))}
    text = [f'name: "{name}"\nbackend: "{_TRITON_BACKENDS[backend]}"\nmax_batch_size: {max_batch_size}\n',
            tensors("input", sig.inputs), tensors("output", sig.outputs),
            f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"]
    if dynamic_batching:
        text.append(f"dynamic_batching {{ max_queue_delay_microseconds: {max_queue_delay_us} }}\n")
    text += [f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n' for key, value in parameters.items()]
    return "".join(text)


# A decoder's inputs (the prompt's token ids, then optional generation
# options: those a request leaves out take ein.Scheduler.submit's defaults)
# and its output, one token per streamed response.
_DECODER_INPUTS = [("prompt", "TYPE_INT32", "-1", False), ("max_tokens", "TYPE_INT32", "1", True),
                   ("temperature", "TYPE_FP32", "1", True), ("top_k", "TYPE_INT32", "1", True),
                   ("top_p", "TYPE_FP32", "1", True), ("seed", "TYPE_INT64", "1", True),
                   ("stop", "TYPE_INT32", "-1", True)]


def decoder_config(name: str, *, threads: int, artifact: str, max_sequences: int, step_tokens: int,
                   encoder_inputs: Sequence = ()) -> str:
    """config.pbtxt for a decoder on the native backend: decoupled (each
    request streams a response per token, then the final flag), no Triton
    batching (the backend's scheduler batches every sequence generating),
    one instance. ``encoder_inputs`` (an encoder-decoder's inputs read at a
    sequence's first run: ein.TensorInfo) are required inputs of each request
    as the model declares them, ranged dims -1."""
    declared = [*_DECODER_INPUTS, *((info.name, _TRITON_DTYPES[info.dtype], _dims_text(info.shape), False)
                                    for info in encoder_inputs)]
    inputs = ",\n".join(f'  {{ name: "{n}" data_type: {t} dims: [ {d} ]{" optional: true" if o else ""} }}'
                         for n, t, d, o in declared)
    parameters = {"artifact": artifact, "threads": str(threads), "max_sequences": str(max_sequences),
                  "step_tokens": str(step_tokens)}
    return "".join([f'name: "{name}"\nbackend: "ein"\nmax_batch_size: 0\n',
                    "model_transaction_policy { decoupled: true }\n",
                    f"input [\n{inputs}\n]\n",
                    'output [\n  { name: "token" data_type: TYPE_INT32 dims: [ 1 ] }\n]\n',
                    "instance_group [ { count: 1 kind: KIND_CPU } ]\n",
                    *[f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
                      for key, value in parameters.items()]])


def free_port() -> int:
    """A loopback port free now (the kernel picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# PR_SET_PDEATHSIG (linux/prctl.h), resolved before any fork: the child
# calls it between fork and exec, where nothing may be imported.
_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no parent-death signal
    _prctl = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the thread that forked it ends
    (Server keeps that thread alive exactly as long as the server)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _reachable(host: str) -> str:
    """The address a client on this machine reaches a server bound to ``host`` at."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _children(pid: int, marker: str) -> set:
    """The processes whose parent is ``pid`` and whose command line holds ``marker``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            if parent == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.add(int(entry))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return found


def _kill_group(leader: int) -> None:
    """SIGKILL to what is left of the process group a launch of tritonserver
    leads (start_new_session): its instance processes, which outlive it when
    it exits first (an old generation's survivor waiting to be killed, a stub
    of a server that was killed). Their parent gone, nothing else ends them."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # nothing left of it
        pass


def native_backend() -> pathlib.Path:
    """libtriton_ein.so: beside ein's native module (a wheel installs it there)."""
    path = pathlib.Path(__file__).parent / "libtriton_ein.so"
    if not path.is_file():
        raise ServerError(f"ein's Triton backend is missing ({path}): this ein was built without "
                          "EIN_BUILD_TRITON_BACKEND; serve with backend='python' (--backend python)")
    return path


def _stub_python_path(extra: Sequence[str]) -> list:
    """Where the backend's stub processes look for modules first: where this
    interpreter finds ein and NumPy, then ``extra``."""
    folders = [str(pathlib.Path(importlib.util.find_spec(name).origin).parent.parent) for name in ("ein", "numpy")]
    return list(dict.fromkeys([*folders, *map(str, extra)]))


class Server:
    """tritonserver serving one model (on loopback by default); a context manager.

    ``artifact``: the model file (an .einb). ``backend``: "native" runs it
    in the server's process with libtriton_ein.so (Triton's backend "ein";
    instances are threads sharing one loaded model), "python" in a process
    per instance through Triton's Python backend, loaded by ``loader``: the
    "module:function" that loads it as loader(path, threads=N), returning
    an object with an ein.Model's inputs, outputs, dims and run (a benchmark
    serves ONNX Runtime this way); ``files``: more files for the model's
    folder; ``python_path``: folders the loader needs. Ports 0 are chosen
    free at start. ``host``: the address HTTP, gRPC and metrics listen on
    ("0.0.0.0": every interface). A watchdog keeps it serving: tritonserver
    that dies is started again, and (Python route) an instance process that
    dies is noticed within a second and the model reloaded (requests in
    flight on it fail; Triton's explicit model control). The server is
    killed when the thread that starts it would end: a thread of the
    Server's own, which lives until stop() or until this process dies.
    """

    def __init__(self, artifact: os.PathLike, *, name: str = "model", pad_dims: Sequence[str] = (),
                 max_padding: float = 1.25, max_batch_size: Optional[int] = None, dynamic_batching: bool = True,
                 max_queue_delay_us: int = 1000,
                 instances: int = 1, threads: Optional[int] = None, http_port: int = 0, grpc_port: int = 0,
                 metrics_port: int = 0, host: str = "127.0.0.1",
                 loader: str = "ein:load", files: Sequence[os.PathLike] = (), python_path: Sequence[str] = (),
                 exit_timeout_s: int = 30, triton_dir: Optional[os.PathLike] = None, backend: str = "native",
                 max_sequences: int = 16, step_tokens: int = 0):
        if backend not in _TRITON_BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_TRITON_BACKENDS)}, got {backend!r}")
        if backend == "native" and loader != "ein:load":
            raise ValueError(f"the native backend runs ein artifacts only; loader {loader!r} needs backend='python'")
        self.backend = backend
        self.artifact = pathlib.Path(artifact)
        sys.path[:0] = [folder for folder in python_path if folder not in sys.path]
        model = load_model(loader, self.artifact, threads=1)  # for its signature
        # A decoder is one instance whose scheduler runs every step on all the CPUs; a batched
        # model's instances each run a call at a time, on one kernel thread by default.
        self.decoder = loader == "ein:load" and bool(model.inspect().get("states"))
        threads = threads if threads is not None else (len(os.sched_getaffinity(0)) if self.decoder else 1)
        if instances < 1 or threads < 1:
            raise ValueError(f"instances and threads must be at least 1, got {instances} and {threads}")
        self.name = name
        self.http_port, self.grpc_port, self.metrics_port = http_port, grpc_port, metrics_port
        self.host = host
        if self.decoder:  # it streams its tokens: one instance, the scheduler batches
            if backend != "native":
                raise ValueError("a decoder is served by the native backend only (backend='native')")
            if max_sequences < 1 or step_tokens < 0:
                raise ValueError(f"max_sequences must be at least 1 and step_tokens at least 0, got {max_sequences} "
                                 f"and {step_tokens}")
            instances = 1
            self.signature = None
            encoder_inputs = [info for info in model.inputs if info.first_run]
            clashing = [info.name for info in encoder_inputs if info.name in {n for n, *_ in _DECODER_INPUTS}]
            if clashing:
                raise ValueError(f"the model's encoder input {clashing[0]!r} has the name of a request's generation "
                                 f"input ({', '.join(n for n, *_ in _DECODER_INPUTS)}): rename it in the model")
            self.config = decoder_config(name, threads=threads, artifact=self.artifact.name,
                                         max_sequences=max_sequences, step_tokens=step_tokens,
                                         encoder_inputs=encoder_inputs)
        else:
            self.signature = signature(model, pad_dims)
            if max_batch_size is None:
                max_batch_size = self.signature.max_batch
            if not 1 <= max_batch_size <= self.signature.max_batch:
                raise ValueError(f"max_batch_size must be within 1..{self.signature.max_batch} (the range of the "
                                 f"batch dim {self.signature.batch_dim!r}), got {max_batch_size}")
            if max_padding < 1:
                raise ValueError(f"max_padding is padded over real elements, at least 1, got {max_padding}")
            self.config = model_config(name, self.signature, max_batch_size=max_batch_size,
                                       dynamic_batching=dynamic_batching, max_queue_delay_us=max_queue_delay_us,
                                       instances=instances, threads=threads, artifact=self.artifact.name,
                                       loader=loader, max_padding=max_padding, backend=backend)
        self.instances = instances
        self.restarts = 0  # recoveries: reloads of the model after an instance died, relaunches of tritonserver
        self._generation = 0  # tritonserver launches
        self._command: list = []
        self._env: dict = {}
        self._files = [pathlib.Path(f) for f in files]
        self._python_path = list(python_path)
        self._exit_timeout_s = exit_timeout_s
        self._triton = triton_dist(triton_dir)
        self._workdir: Optional[pathlib.Path] = None
        self.process: Optional[subprocess.Popen] = None
        self._stopping = threading.Event()
        self._watchdog: Optional[threading.Thread] = None

    @property
    def http_url(self) -> str:
        return f"{_reachable(self.host)}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{_reachable(self.host)}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """Triton's Prometheus metrics (inference counts, queue and compute durations per model)."""
        return f"http://{_reachable(self.host)}:{self.metrics_port}/metrics"

    @property
    def log_path(self) -> pathlib.Path:
        assert self._workdir is not None, "the server has not started"
        return self._workdir / "tritonserver.log"

    def log(self, tail: int = 4000) -> str:
        """The server's log, its last ``tail`` characters."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except (OSError, AssertionError):
            return ""

    def _failure(self, what: str) -> ServerError:
        """What went wrong: the log's error lines (Triton starts them with E),
        which its closing table would push out of a plain tail."""
        errors = [line for line in self.log(1 << 20).splitlines()
                  if line.startswith("E") and "CudaDriverHelper" not in line]  # no GPU: harmless
        return ServerError(f"{what}; tritonserver's errors:\n" + "\n".join(errors[-10:] or [self.log()]))

    def _write_repository(self) -> pathlib.Path:
        repository = self._workdir / "models"
        version = repository / self.name / "1"
        version.mkdir(parents=True)
        (repository / self.name / "config.pbtxt").write_text(self.config)
        if self.backend == "python":
            (version / "model.py").write_text(_MODEL_PY.format(python_path=_stub_python_path(self._python_path)))
        for path in [self.artifact, *self._files]:
            shutil.copy(path, version / path.name)
        return repository

    def _backends(self) -> pathlib.Path:
        """A copy of the wheel's backends/ with the stub for this Python (as
        PyTriton prepares it: the Python backend looks for the stub beside
        itself), and ein's own backend in backends/ein/."""
        backends = self._workdir / "backends"
        shutil.copytree(self._triton / "backends", backends)
        if self.backend == "native":
            (backends / "ein").mkdir()
            shutil.copy(native_backend(), backends / "ein" / "libtriton_ein.so")
            return backends
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        stub = self._triton / "python_backend_stubs" / version / "triton_python_backend_stub"
        if not stub.is_file():
            raise ServerError(f"nvidia-pytriton has no Python backend stub for Python {version}")
        shutil.copy(stub, backends / "python" / stub.name)
        return backends

    def start(self, timeout_s: float = 120) -> "Server":
        """Starts tritonserver and waits until the model is ready. Ports left
        0 are chosen free; should another process take one first, the start
        is tried again with new ones."""
        chosen = {"http_port": self.http_port, "grpc_port": self.grpc_port, "metrics_port": self.metrics_port}
        attempts = 1 if all(chosen.values()) else 3
        for attempt in range(1, attempts + 1):
            for port, given in chosen.items():
                setattr(self, port, given or free_port())
            try:
                return self._start_once(timeout_s)
            except ServerError as failure:
                if attempt == attempts or "already in use" not in str(failure):
                    raise
        return self

    def _start_once(self, timeout_s: float) -> "Server":
        self._stopping.clear()  # a Server stopped before may start again
        self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="ein-serve-"))
        libs = self._triton.parent.parent / "nvidia_pytriton.libs"
        self._env = dict(os.environ,
                         LD_LIBRARY_PATH=os.pathsep.join(filter(None, [os.environ.get("LD_LIBRARY_PATH"), str(libs)])))
        self._command = [
            str(self._triton / "bin" / "tritonserver"),
            f"--model-repository={self._write_repository()}", f"--backend-directory={self._backends()}",
            f"--http-address={self.host}", f"--http-port={self.http_port}",
            f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}",
            "--allow-metrics=true", f"--metrics-address={self.host}", f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false", "--disable-auto-complete-config",
            # Explicit model control: the watchdog reloads the model when an instance dies.
            "--model-control-mode=explicit", f"--load-model={self.name}",
            f"--exit-timeout-secs={self._exit_timeout_s}",
        ]
        try:
            self._launch_generation(timeout_s)
        except ServerError:
            self._cleanup()
            raise
        self._watchdog = threading.Thread(target=self._supervise, daemon=True, name=f"ein.serve watchdog {self.name}")
        self._watchdog.start()
        return self

    def _shm_prefix(self) -> str:
        """The Python backend's shared-memory regions of this server
        (/dev/shm/PREFIX*): named per server and per launch, so servers side
        by side never meet and a relaunch never opens a dead one's regions."""
        return f"ein{os.getpid()}_{self.http_port}_{self._generation}_"

    def _launch_generation(self, timeout_s: float) -> None:
        """Starts tritonserver (again, after it died) and waits until the
        model is ready; raises ServerError, the server stopped, if not."""
        self._generation += 1
        command = [*self._command, f"--backend-config=python,shm-region-prefix-name={self._shm_prefix()}"]
        self.process = self._launch(command, self._env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._remove_shm()
                raise self._failure(f"tritonserver exited with status {self.process.returncode}")
            if self._ready():
                return
            if self._stopping.wait(0.2):
                break
        failure = self._failure(f"the model was not ready within {timeout_s:.0f} s")
        self._kill_server()
        self._remove_shm()
        raise failure

    def _launch(self, command, env) -> subprocess.Popen:
        """tritonserver, started from a thread that lives until stop() or
        this process's end: the child's parent-death signal fires when the
        thread that forked it ends, so the server never outlives its owner."""
        launched, outcome = threading.Event(), {}

        def own():
            try:
                with open(self.log_path, "ab") as log:  # a relaunch goes on with the same log
                    outcome["process"] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                          start_new_session=True, preexec_fn=_die_with_parent)
            except BaseException as error:  # noqa: B036 (handed to the caller)
                outcome["error"] = error
            launched.set()
            if "process" in outcome:
                outcome["process"].wait()

        threading.Thread(target=own, daemon=True, name=f"ein.serve tritonserver {self.name}").start()
        launched.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["process"]

    def _request(self, method: str, path: str, timeout_s: float) -> int:
        """The HTTP status of ``method`` on the server's ``path`` (0: no answer)."""
        loopback = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        body = b"{}" if method == "POST" else None
        try:
            with loopback.open(urllib.request.Request(f"http://{self.http_url}{path}", data=body, method=method),
                               timeout=timeout_s) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except (urllib.error.URLError, OSError):
            return 0

    def _ready(self) -> bool:
        return self._request("GET", f"/v2/models/{self.name}/ready", 2) == 200

    @property
    def supervised(self) -> bool:
        """Whether the watchdog runs: from start() to stop()."""
        return self._watchdog is not None and self._watchdog.is_alive()

    def instance_processes(self) -> set:
        """The process ids of the model's instances (Triton's Python backend
        stubs; none on the native route, where instances are threads)."""
        if self.process is None or self.backend != "python":
            return set()
        return _children(self.process.pid, "triton_python_backend_stub")

    def _supervise(self) -> None:
        """Keeps the model serving. When one of its instance processes dies
        the model is reloaded: Triton would go on routing requests to the
        dead one. The reload starts new instances and routes every new
        request to them; the old ones that survive finish what they hold,
        and are then killed: Triton's unload of the old generation waits on
        the dead process for ever (and so its shutdown takes the exit
        timeout, and exits with status 1). When tritonserver itself dies
        (a killed instance can take it down: its Python backend aborts on
        the shared-memory lock the instance held) it is started again, on
        the same ports."""
        known = self._new_instances(set())
        while not self._stopping.wait(0.5):
            if self.process.poll() is not None:
                known = self._relaunch()
                continue
            alive = self.instance_processes()
            if known <= alive:
                continue
            dead = sorted(known - alive)
            print(f"ein.serve: instance process {', '.join(map(str, dead))} of model {self.name!r} died; "
                  f"reloading the model", file=sys.stderr, flush=True)
            started = time.monotonic()
            status = self._request("POST", f"/v2/repository/models/{self.name}/load", 300)
            if self._stopping.is_set():
                return
            survivors = known & alive
            new = self._new_instances(known) if status == 200 else set()
            if not new:  # the survivors go on serving, and are watched
                print(f"ein.serve: reloading model {self.name!r} failed (status {status}); see the server's log",
                      file=sys.stderr, flush=True)
                known = survivors
                continue
            self.restarts += 1
            print(f"ein.serve: model {self.name!r} reloaded in {time.monotonic() - started:.1f} s",
                  file=sys.stderr, flush=True)
            known = new
            if survivors:  # a daemon: a process ending meanwhile does not wait for it
                killer = threading.Timer(self._exit_timeout_s, self._kill, args=(survivors,))
                killer.daemon = True
                killer.start()

    def _relaunch(self) -> set:
        """tritonserver died: starts it again until the model serves (waiting
        1, 2, 4 ... 30 s between tries); its new instance processes."""
        print(f"ein.serve: tritonserver exited with status {self.process.returncode}; starting it again",
              file=sys.stderr, flush=True)
        _kill_group(self.process.pid)  # its instances, which may outlive it
        self._remove_shm()
        pause = 1.0
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._launch_generation(timeout_s=300)
            except ServerError as failure:
                print(f"ein.serve: {failure}\nein.serve: trying again in {pause:.0f} s", file=sys.stderr, flush=True)
                self._stopping.wait(pause)
                pause = min(2 * pause, 30)
                continue
            self.restarts += 1
            print(f"ein.serve: tritonserver serves model {self.name!r} again after {time.monotonic() - started:.1f} s",
                  file=sys.stderr, flush=True)
            return self._new_instances(set())
        return set()

    def _new_instances(self, old: set, timeout_s: float = 60) -> set:
        """The model's instance processes not in ``old``, once there are as
        many as the model has (or after ``timeout_s``); none on the native route."""
        if self.backend != "python":
            return set()
        deadline = time.monotonic() + timeout_s
        new = self.instance_processes() - old
        while len(new) < self.instances and time.monotonic() < deadline and not self._stopping.is_set():
            time.sleep(0.2)
            new = self.instance_processes() - old
        return new

    def _kill(self, pids: set) -> None:
        for pid in pids & self.instance_processes():  # still the server's: not a reused pid
            os.kill(pid, signal.SIGKILL)

    def stop(self, timeout_s: Optional[float] = None) -> Optional[int]:
        """Stops the server as Triton does on SIGTERM (new requests are
        refused, those in flight finish, for up to exit_timeout_s), killing
        it if it outlives ``timeout_s`` (default: that and 30 s); returns
        its exit status."""
        if self.process is None:
            return None
        self._stopping.set()
        if self._watchdog is not None:
            self._watchdog.join(10)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s if timeout_s is not None else self._exit_timeout_s + 30)
            except subprocess.TimeoutExpired:
                self._kill_server()
        _kill_group(self.process.pid)
        self._remove_shm()
        self._cleanup()
        return self.process.returncode

    def _kill_server(self) -> None:
        """tritonserver and its instance processes (its process group), now."""
        _kill_group(self.process.pid)
        self.process.wait(10)

    def _remove_shm(self) -> None:
        """The shared-memory regions of the server's last launch: a server
        or instance that was killed leaves its regions behind."""
        prefix = self._shm_prefix()
        for region in pathlib.Path("/dev/shm").glob(f"{prefix}*"):
            region.unlink(missing_ok=True)

    def _cleanup(self):
        # EIN_SERVE_KEEP=1 keeps the repository and the log, for a look after the fact.
        if self._workdir is not None and not os.environ.get("EIN_SERVE_KEEP"):
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self if self.supervised else self.start()  # started already, or (again) now

    def __exit__(self, *exc) -> None:
        self.stop()


def load_model(loader: str, path: os.PathLike, threads: int):
    """loader(path, threads=threads) for a "module:function" loader (ein:load,
    or a benchmark's stand-in with the same signature)."""
    module, _, function = loader.partition(":")
    return getattr(importlib.import_module(module), function)(path, threads=threads)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ein.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="an artifact (.einb), or a model (.ein), with --weights or --random-weights "
                                      "where it has parameters")
    parser.add_argument("--weights",
                        help="weights for a .ein model: a .safetensors or .gguf file, or a checkpoint folder")
    parser.add_argument("--random-weights", type=int, metavar="SEED", help="random weights for a .ein model")
    parser.add_argument("--name", help="the model's name on the server (default: the file's stem)")
    parser.add_argument("--pad", action="append", default=[], metavar="DIM",
                        help="a ranged dim in which requests of different sizes are zero-padded to the longest and "
                             "batched together (the model must mask zeros, as a BERT attention mask does); "
                             "without it they batch only with requests of the same size")
    parser.add_argument("--max-padding", type=float, default=1.25, metavar="RATIO",
                        help="requests merge while the padded batch has at most RATIO times their elements "
                             "(default 1.25; 1 merges only equal sizes)")
    parser.add_argument("--max-batch-size", type=int, help="Triton's max_batch_size (default: the batch dim's maximum)")
    parser.add_argument("--no-dynamic-batching", action="store_true", help="run each request alone")
    parser.add_argument("--max-queue-delay-us", type=int, default=1000,
                        help="how long the dynamic batcher waits for more requests (default 1000)")
    parser.add_argument("--backend", choices=sorted(_TRITON_BACKENDS), default="native",
                        help="native: the model runs in the server's process (libtriton_ein.so), instances are "
                             "threads; python: Triton's Python backend, a process per instance (default native)")
    parser.add_argument("--max-sequences", type=int, default=16,
                        help="a decoder: sequences generating at once (default 16)")
    parser.add_argument("--step-tokens", type=int, default=0,
                        help="a decoder: the most tokens one step runs (default 0: 256)")
    parser.add_argument("--instances", type=int, default=1,
                        help="model instances (threads, or processes on the Python route) (default 1)")
    parser.add_argument("--threads", type=int,
                        help="kernel threads per instance (default 1; a decoder's: every CPU this process may use)")
    parser.add_argument("--exit-timeout", type=int, default=30, metavar="SECONDS",
                        help="on Ctrl-C or SIGTERM, how long requests in flight may take to finish (default 30)")
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                        help="the address HTTP, gRPC and metrics listen on (default 127.0.0.1, this machine only; "
                             "0.0.0.0: every interface, for a container or a cluster)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002, help="Prometheus metrics (default 8002)")
    args = parser.parse_args(argv)

    try:
        return _serve(parser, args)
    except (Error, ServerError, ValueError, OSError) as error:  # a bad model or option: its message, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    artifact = pathlib.Path(args.model)
    with tempfile.TemporaryDirectory(prefix="ein-serve-model-") as compiled:
        if artifact.suffix == ".ein":
            from ._compile import compile as compile_model
            # A model without parameters needs neither; one with parameters and
            # neither gets ein.compile's message, which names them.
            if args.weights is not None and args.random_weights is not None:
                parser.error("give --weights FILE or --random-weights SEED, not both")
            target = pathlib.Path(compiled) / (artifact.stem + ".einb")
            compile_model(artifact, weights=args.weights, random_weights=args.random_weights).save(target)
            artifact = target
        server = Server(artifact, name=args.name or pathlib.Path(args.model).stem, pad_dims=args.pad,
                        max_padding=args.max_padding,
                        max_batch_size=args.max_batch_size, dynamic_batching=not args.no_dynamic_batching,
                        max_queue_delay_us=args.max_queue_delay_us, instances=args.instances, threads=args.threads,
                        http_port=args.http_port, grpc_port=args.grpc_port, metrics_port=args.metrics_port,
                        host=args.host, exit_timeout_s=args.exit_timeout, backend=args.backend,
                        max_sequences=args.max_sequences, step_tokens=args.step_tokens)
        stop = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.append(True))
        server.start()
        print(f"serving {server.name!r} on HTTP {server.http_url} and gRPC {server.grpc_url}, metrics at "
              f"{server.metrics_url} (log: {server.log_path}); Ctrl-C stops", flush=True)
        while not stop and server.supervised:  # it relaunches tritonserver should that die
            time.sleep(0.2)
        status = server.stop()
        print(f"stopped (tritonserver status {status})", flush=True)
        return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
