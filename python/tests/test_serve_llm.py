"""ein.serve_llm on loopback with the official openai client and raw HTTP: the Llama-style
example decoder (random weights, vocabulary 512) with examples/llm-server's tokenizer.
Completions and chat completions give the text of Model.generate on the same ids; streamed
text joined is the non-streamed text; 32 streaming clients at once each get their own; usage
counts; bad requests get their status and an OpenAI error body while good ones go on; a client
that disconnects frees its sequence. Every wait has a deadline."""
import json
import os
import socket
import threading
import time

import pytest

import ein
from conftest import EXAMPLES, REPO

if not os.environ.get("CI"):  # scripts/python-env.sh installs them; under CI their absence fails
    for needed in ("fastapi", "uvicorn", "sse_starlette", "tokenizers", "jinja2", "prometheus_client", "openai",
                   "httpx"):
        pytest.importorskip(needed, reason="the serving requirements are not installed")
import httpx  # noqa: E402
import openai  # noqa: E402
import uvicorn  # noqa: E402

from ein._llm_text import Detokenizer, Tokenizer  # noqa: E402
from ein.serve_llm import LlmServer, create_app  # noqa: E402

TOKENIZER = REPO / "examples" / "llm-server"
DEADLINE = 60


def start(server):
    """Serves `server` on a free loopback port; (base URL, stop)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(create_app(server), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + DEADLINE
    while not web.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)

    def stop():
        web.should_exit = True
        thread.join(DEADLINE)

    return f"http://127.0.0.1:{port}", stop


def serve_in_a_process(*arguments):
    """python -m ein.serve_llm ARGUMENTS on a free loopback port, once healthy: (process, base URL)."""
    import subprocess
    import sys
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "ein.serve_llm", *arguments, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + DEADLINE
    while True:
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)


@pytest.fixture(scope="module")
def served():
    model = ein.compile(EXAMPLES / "llama_decoder.ein", random_weights=3, dims={"vocab": 512}, threads=2)
    tokenizer = Tokenizer(TOKENIZER)
    server = LlmServer(model, tokenizer, model_name="tiny-llama", max_sequences=8, threads=2, max_waiting=40)
    base, stop = start(server)
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", timeout=DEADLINE, max_retries=0)
    yield model, tokenizer, server, client, base
    stop()


def expected_text(model, tokenizer, ids, max_tokens, stop=()):
    """What Model.generate gives on the ids, as text, and why it ended."""
    tokens = model.generate(ids, max_new_tokens=max_tokens, stop_tokens=[tokenizer.eos_token_id])
    detokenizer = Detokenizer(tokenizer, stop)
    text = "".join(detokenizer.add(t) for t in tokens) + detokenizer.finish()
    ended_early = detokenizer.stopped or (tokens and tokens[-1] == tokenizer.eos_token_id)
    return text, "stop" if ended_early else "length", len(tokens)


def test_completions_are_generate_on_the_same_ids(served):
    model, tokenizer, server, client, _ = served
    prompt = "The compiler fuses attention"
    answer = client.completions.create(model="tiny-llama", prompt=prompt, max_tokens=20, temperature=0)
    ids = tokenizer.encode(prompt)
    text, reason, produced = expected_text(model, tokenizer, ids, 20)
    assert answer.choices[0].text == text and answer.choices[0].finish_reason == reason
    assert answer.usage.prompt_tokens == len(ids) and answer.usage.completion_tokens == produced
    assert answer.usage.total_tokens == len(ids) + produced
    streamed = client.completions.create(model="tiny-llama", prompt=prompt, max_tokens=20, temperature=0,
                                         stream=True)
    pieces = list(streamed)
    assert "".join(p.choices[0].text for p in pieces) == text
    assert pieces[-1].choices[0].finish_reason == reason


def test_chat_completions_render_the_template(served):
    model, tokenizer, server, client, _ = served
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a fused op."}]
    answer = client.chat.completions.create(model="tiny-llama", messages=messages, max_tokens=24, temperature=0)
    ids = tokenizer.encode(tokenizer.apply_chat_template(messages), special_tokens=False)
    assert ids[:3] == tokenizer.encode("<|im_start|>system\n", special_tokens=False)[:3]
    text, reason, produced = expected_text(model, tokenizer, ids, 24)
    assert answer.choices[0].message.content == text and answer.choices[0].finish_reason == reason
    assert answer.choices[0].message.role == "assistant" and answer.usage.completion_tokens == produced
    stream = client.chat.completions.create(model="tiny-llama", messages=messages, max_tokens=24, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].usage.completion_tokens == produced and chunks[-1].usage.prompt_tokens == len(ids)


def test_stop_strings_end_the_text_before_them(served):
    model, tokenizer, server, client, _ = served
    full = client.completions.create(model="tiny-llama", prompt="ein", max_tokens=30, temperature=0).choices[0]
    if len(full.text) < 6:
        pytest.skip("the random model's text is too short to stop inside")
    stop = full.text[3:5]
    cut = client.completions.create(model="tiny-llama", prompt="ein", max_tokens=30, temperature=0, stop=[stop])
    assert cut.choices[0].text == full.text[:full.text.index(stop)] and cut.choices[0].finish_reason == "stop"
    streamed = client.completions.create(model="tiny-llama", prompt="ein", max_tokens=30, temperature=0,
                                         stop=stop, stream=True)
    assert "".join(p.choices[0].text for p in streamed) == cut.choices[0].text


def test_many_streaming_clients_each_get_their_own(served):
    model, tokenizer, server, client, _ = served
    prompts = [f"Request {i}: the runtime maps the artifact" for i in range(32)]
    results = [None] * len(prompts)

    def ask(i):
        stream = client.completions.create(model="tiny-llama", prompt=prompts[i], max_tokens=12, temperature=0,
                                           stream=True)
        results[i] = "".join(p.choices[0].text for p in stream)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    for i, prompt in enumerate(prompts):
        assert results[i] == expected_text(model, tokenizer, tokenizer.encode(prompt), 12)[0], f"client {i}"
    assert server.scheduler.running == 0


def test_n_choices_sampled_with_a_seed(served):
    model, tokenizer, server, client, _ = served
    answer = client.completions.create(model="tiny-llama", prompt="Sampling", max_tokens=10, temperature=0.9,
                                       seed=5, n=3)
    again = client.completions.create(model="tiny-llama", prompt="Sampling", max_tokens=10, temperature=0.9,
                                      seed=5, n=3)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert [c.text for c in answer.choices] == [c.text for c in again.choices]


def post(base, path, body, raw=False):
    content = body if raw else json.dumps(body).encode()
    return httpx.post(base + path, content=content, headers={"content-type": "application/json"}, timeout=DEADLINE)


def test_bad_requests_get_their_status_and_an_error_body(served):
    model, tokenizer, server, client, base = served
    good = []
    going = threading.Thread(target=lambda: good.append(client.completions.create(
        model="tiny-llama", prompt="A good request", max_tokens=40, temperature=0)))
    going.start()
    cases = [
        (b"{not json", True, 400, None),
        (b'{"prompt": "\xff\xfe"}', True, 400, None),
        ({"model": "gpt-9", "prompt": "x"}, False, 404, "model_not_found"),
        ({"prompt": "x " * 400}, False, 400, "context_length_exceeded"),
        ({"prompt": "x", "max_tokens": 0}, False, 400, None),
        ({"prompt": "x", "max_tokens": 5000}, False, 400, "context_length_exceeded"),
        ({"prompt": "x", "max_tokens": "ten"}, False, 400, None),
        ({"prompt": "x", "temperature": "hot"}, False, 400, None),
        ({"prompt": [1, 2, 99999]}, False, 400, None),
        ({"prompt": 7}, False, 400, None),
        ({"prompt": "x", "stop": [1.5]}, False, 400, None),
    ]
    for body, raw, status, code in cases:
        answer = post(base, "/v1/completions", body, raw)
        assert answer.status_code == status, (body, answer.text)
        error = answer.json()["error"]
        assert error["message"] and error["type"] and error["code"] == code, (body, error)
    chat = post(base, "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert chat.status_code == 400 and "messages" in chat.json()["error"]["message"]
    going.join(DEADLINE)
    assert good and good[0].choices[0].text == expected_text(model, tokenizer, tokenizer.encode("A good request"),
                                                             40)[0]
    assert httpx.get(base + "/v1/models").json()["data"][0]["id"] == "tiny-llama"
    assert httpx.get(base + "/health").json() == {"status": "ok"}
    metrics = httpx.get(base + "/metrics").text
    assert 'ein_requests_total{endpoint="/v1/completions",status="404"}' in metrics
    assert "ein_time_to_first_token_seconds_bucket" in metrics and "ein_live_sequences" in metrics
    assert "ein_preemptions_total 0.0" in metrics  # the whole cache per sequence: never preempted


@pytest.fixture(scope="module")
def slow_served():
    """A wider decoder than the others' (a few ms a token, one thread), two
    sequences at once and two waiting: generations last long enough to be
    caught going."""
    model = ein.compile(EXAMPLES / "llama_decoder.ein", random_weights=4, threads=1,
                        dims={"vocab": 512, "hidden": 384, "inter": 1024, "layers": 4, "heads": 6, "head_dim": 64})
    server = LlmServer(model, Tokenizer(TOKENIZER), model_name="wider", max_sequences=2, threads=1, max_waiting=2,
                       step_tokens=16)
    base, stop = start(server)
    yield server, base
    stop()


def test_a_full_queue_is_429(slow_served):
    server, base = slow_served
    assert server.scheduler.step_tokens == 16
    long_ones = []
    try:
        with pytest.raises(ein.Error, match="wait for a sequence already"):
            for _ in range(10):  # 2 generating, 2 waiting, then refused
                long_ones.append(server.scheduler.submit([5, 6, 7], max_new_tokens=250))
        answer = post(base, "/v1/completions", {"prompt": "one more", "max_tokens": 4})
        assert answer.status_code == 429 and answer.json()["error"]["type"] == "rate_limit_error"
    finally:
        for request in long_ones:
            request.cancel()
        deadline = time.monotonic() + DEADLINE
        while server.scheduler.running or server.scheduler.waiting:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_a_client_that_disconnects_frees_its_sequence(slow_served):
    server, base = slow_served
    before = server.generated_tokens._value.get()
    body = {"prompt": "Disconnect", "max_tokens": 250, "stream": True, "temperature": 0}
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=DEADLINE) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                break
    deadline = time.monotonic() + DEADLINE
    while server.scheduler.running or server.scheduler.cache_blocks_used:
        assert time.monotonic() < deadline, "the sequence was not freed"
        time.sleep(0.01)
    assert server.generated_tokens._value.get() - before < 250  # it stopped where the client left
    metrics = httpx.get(base + "/metrics").text
    assert "ein_cache_blocks_used 0.0" in metrics and "ein_cache_blocks " in metrics


def test_sigterm_lets_the_streams_in_flight_finish_and_exits_0(served, tmp_path):
    import signal
    model, tokenizer, server, client, _ = served
    artifact = tmp_path / "tiny.einb"
    model.save(artifact)
    process, base = serve_in_a_process(str(artifact), "--tokenizer", str(TOKENIZER), "--threads", "1",
                                       "--shutdown-timeout", "20")
    try:
        text = []
        body = {"prompt": "Until the end", "max_tokens": 60, "temperature": 0, "stream": True}
        with httpx.stream("POST", base + "/v1/completions", json=body, timeout=DEADLINE) as response:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                if process.poll() is None and not text:
                    os.kill(process.pid, signal.SIGTERM)  # after the first chunk
                if line == "data: [DONE]":
                    break
                text.append(json.loads(line[5:])["choices"][0]["text"])
        expected = expected_text(model, tokenizer, tokenizer.encode("Until the end"), 60)[0]
        assert "".join(text) == expected
        assert process.wait(DEADLINE) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def byte_ids(tokenizer, text):
    """The ids of `text`'s UTF-8 bytes one by one (the byte-level alphabet's tokens)."""
    from tokenizers.pre_tokenizers import ByteLevel
    alphabet = sorted(ByteLevel.alphabet())
    # GPT-2's byte-to-character table: printable bytes stand for themselves.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    assert set(table.values()) == set(alphabet)
    return [tokenizer._tokenizer.token_to_id(table[b]) for b in text.encode()]


def test_the_detokenizer_never_splits_a_character_or_shows_a_stop_strings_start():
    tokenizer = Tokenizer(TOKENIZER)
    ids = byte_ids(tokenizer, "aü€b")
    detokenizer = Detokenizer(tokenizer)
    pieces = [detokenizer.add(t) for t in ids]
    assert pieces == ["a", "", "ü", "", "", "€", "b"] and detokenizer.finish() == ""
    held = Detokenizer(tokenizer, stop=["bc"])
    assert [held.add(t) for t in byte_ids(tokenizer, "abx")] == ["a", "", "bx"]
    stopped = Detokenizer(tokenizer, stop=["bc", "zz"])
    assert [stopped.add(t) for t in byte_ids(tokenizer, "abcd")] == ["a", "", "", ""]
    assert stopped.stopped and stopped.text == "a" and stopped.finish() == ""
    tail = Detokenizer(tokenizer, stop=["bc"])
    assert [tail.add(t) for t in byte_ids(tokenizer, "ab")] == ["a", ""] and tail.finish() == "b"


def test_a_checkpoint_folder_is_served_with_its_own_tokenizer(tmp_path):
    """python -m ein.serve_llm FOLDER: ein.from_pretrained's model and the folder's tokenizer.json."""
    import shutil
    import signal
    cases = REPO / "tests" / "conformance" / "cases"
    folder = tmp_path / "tiny-llama3"
    shutil.copytree(cases / "hf_llama3_tiny" / "checkpoint", folder)  # with a tokenizer.json of words w0, w1, ...
    greedy = json.loads((cases / "hf_llama3_tiny" / "generation.json").read_text())
    process, base = serve_in_a_process(str(folder), "--threads", "1")
    try:
        assert httpx.get(base + "/v1/models").json()["data"][0]["id"] == "tiny-llama3"
        prompt = " ".join(f"w{i}" for i in greedy["prompt"])
        body = {"prompt": prompt, "max_tokens": 6, "temperature": 0}
        text = httpx.post(base + "/v1/completions", json=body, timeout=DEADLINE).json()["choices"][0]["text"]
        assert text.split() == [f"w{i}" for i in greedy["greedy"][:6]]
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(DEADLINE) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
