#!/usr/bin/env python3
"""An OpenAI-compatible server for many users (issue 37): ein.serve_llm vs llama.cpp's llama-server, 1.1B Llama.

The random-weight 1.1B Llama of bench/llm_many_sequences.py (the TinyLlama shape) is compiled with
einc (examples/models/llama_decoder.ein, a 1024-row cache, up to 512 tokens a step) at int8 and bf16,
and written as GGUF q8_0 and f16 for llama.cpp. Both servers take the same token ids: ein.serve_llm
a tokenizer.json made here (HF tokenizers: a word per id, the GGUF's dummy vocabulary), llama-server
the GGUF's own vocabulary. For C concurrent clients (default 1, 8, 32), each streams one
POST /v1/completions (its own prompt of 64 to 512 random ids, 128 tokens out, greedy, never stopping
early: no end-of-text token for ein, ignore_eos for llama-server), all sent at once:
  output tok/s: every completion token (the usage counts) over the wall time from the first request
                to the last token;
  TTFT p50/p99: from a request to its first streamed token;
  ITL p50/p99:  between a stream's consecutive chunks (a chunk a token).
The servers, each alone on the machine, 2 threads:
  ein:       python -m ein.serve_llm ART --tokenizer DIR --max-sequences C --threads 2
  llama.cpp: llama-server -m GGUF -np C -c C*1024 -t 2 -tb 2 -b 512 -ub 512 (continuous batching)

Needs: the ein build and its Python package (.venv-python: scripts/python-env.sh), and a venv with
numpy, safetensors, gguf, tokenizers and httpx:
  python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy safetensors gguf tokenizers httpx
and llama-server, which llama-cpp-python's wheel does not ship: build it from llama.cpp's source (the
copy vendored in the llama-cpp-python sdist will do):
  cmake -S llama.cpp -B llama.cpp/build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF && \\
  cmake --build llama.cpp/build --target llama-server -j 2
Run:   .venv-bench/bin/python bench/llm_server.py --llama-server PATH [--clients 1,8,32]
       [--precisions int8,bf16] [--new-tokens 128] [--workdir DIR]
       (the weights, artifacts and GGUF files are made once in --workdir, default ein-many-bench in
       $TMPDIR or /tmp, shared with llm_many_sequences.py)

Results: docs/benchmarks.md "Serving a decoder", and issue 37's closing note.
"""
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llm_decode  # noqa: E402  (the GGUF writer, the tools' and model's paths)
import llm_many_sequences as many  # noqa: E402  (the 1.1B configuration and weights)
from llm_decode import EINC, MODEL_EIN  # noqa: E402

CACHE = 1024  # rows per sequence: a 512-token prompt and 128 new tokens, with room
STEP = 512
THREADS = 2
VOCAB = many.CONFIG["vocab_size"]


def compile_ein(work, weights, precision):
    out = os.path.join(work, f"llama1b_{precision}_cache{CACHE}.einb")
    if os.path.exists(out):
        return out
    cmd = [EINC, MODEL_EIN, "-o", out, "--weights", weights, "--precision", precision]
    for k, v in dict(many.DIMS, cache=CACHE).items():
        cmd += ["--dim", f"{k}={v}"]
    cmd += ["--dim", f"t=1..{STEP}", "--dim", f"past=0..{CACHE}"]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return out


def make_tokenizer(work):
    """A word per id, as the GGUF's dummy vocabulary: <unk> <s> </s>, 256 byte pieces, then ▁t0, ▁t1, ..."""
    folder = os.path.join(work, "tokenizer")
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        return folder
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    pieces += [f"\u2581t{i}" for i in range(VOCAB - len(pieces))]
    tokenizer = Tokenizer(models.WordLevel({piece: i for i, piece in enumerate(pieces)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    os.makedirs(folder, exist_ok=True)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>"}, f)  # no eos_token: a generation runs its max_tokens
    return folder


def prompts(clients):
    r = random.Random(37)
    return [[r.randrange(259, VOCAB) for _ in range(r.randrange(64, 513))] for _ in range(clients)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, port, log):
    import httpx
    print("+", " ".join(cmd), flush=True)
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {process.returncode}; see {log.name}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"{cmd[0]} did not come up; see {log.name}")


def stream(base, body):
    """One streamed completion: when it was sent, each text chunk's time, the usage."""
    import httpx
    sent, stamps, usage = time.perf_counter(), [], None
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=3600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            if any(choice.get("text") for choice in chunk.get("choices") or []):
                stamps.append(time.perf_counter())
    return sent, stamps, usage


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100 * len(values) + 0.5)) - 1))]


def load(base, clients, new_tokens, extra):
    bodies = [dict(prompt=p, max_tokens=new_tokens, temperature=0, stream=True,
                   stream_options={"include_usage": True}, **extra) for p in prompts(clients)]
    stream(base, dict(bodies[0], prompt=bodies[0]["prompt"][:16], max_tokens=4))  # warm
    results = [None] * clients

    def client(i):
        results[i] = stream(base, bodies[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    begin = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tokens = sum(usage["completion_tokens"] for _, _, usage in results if usage)
    last = max(stamps[-1] for _, stamps, _ in results if stamps)
    ttft = [stamps[0] - sent for sent, stamps, _ in results if stamps]
    itl = [b - a for _, stamps, _ in results for a, b in zip(stamps, stamps[1:])]
    return {"output_tps": tokens / (last - begin), "tokens": tokens,
            "ttft_p50_s": statistics.median(ttft), "ttft_p99_s": percentile(ttft, 99),
            "itl_p50_ms": 1e3 * statistics.median(itl), "itl_p99_ms": 1e3 * percentile(itl, 99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary (else llama.cpp is skipped)")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--precisions", default="int8,bf16")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--ein-step-tokens", type=int, default=0,
                    help="ein.serve_llm's --step-tokens (0: its default)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ein-many-bench"))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    weights = many.make_weights(a.workdir)
    tokenizer = make_tokenizer(a.workdir)
    gguf_kind = {"int8": "q8_0", "bf16": "f16"}
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; {THREADS} threads", flush=True)
    rows = []
    for precision in a.precisions.split(","):
        engines = [(f"ein {precision}", compile_ein(a.workdir, weights, precision))]
        if a.llama_server:
            engines.append((f"llama.cpp {gguf_kind[precision]}",
                            llm_decode.write_gguf(a.workdir, weights, gguf_kind[precision], many.CONFIG)))
        for clients in (int(c) for c in a.clients.split(",")):
            for name, path in engines:
                port = free_port()
                if name.startswith("ein"):
                    cmd = [many.EIN_PYTHON, "-m", "ein.serve_llm", path, "--tokenizer", tokenizer, "--port", str(port),
                           "--max-sequences", str(clients), "--threads", str(THREADS), "--model-name", "bench",
                           "--step-tokens", str(a.ein_step_tokens)]
                    extra = {"model": "bench"}
                else:
                    cmd = [a.llama_server, "-m", path, "--port", str(port), "-np", str(clients),
                           "-c", str(clients * CACHE), "-t", str(THREADS), "-tb", str(THREADS),
                           "-b", str(STEP), "-ub", str(STEP), "--no-webui"]
                    extra = {"ignore_eos": True}
                with open(os.path.join(a.workdir, f"server-{name.replace(' ', '_')}-{clients}.log"), "w") as log:
                    process = start(cmd, port, log)
                    try:
                        result = load(f"http://127.0.0.1:{port}", clients, a.new_tokens, extra)
                    finally:
                        process.terminate()
                        process.wait(timeout=120)
                print(name, clients, result, flush=True)
                rows.append((name, clients, result))
    print(f"\n{'engine':16} {'clients':>7} {'output tok/s':>13} {'TTFT p50 s':>11} {'TTFT p99 s':>11} "
          f"{'ITL p50 ms':>11} {'ITL p99 ms':>11}")
    for name, clients, r in rows:
        print(f"{name:16} {clients:>7} {r['output_tps']:>13.1f} {r['ttft_p50_s']:>11.2f} {r['ttft_p99_s']:>11.2f} "
              f"{r['itl_p50_ms']:>11.1f} {r['itl_p99_ms']:>11.1f}")


if __name__ == "__main__":
    main()
