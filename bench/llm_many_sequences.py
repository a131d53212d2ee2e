#!/usr/bin/env python3
"""Many sequences at once (issue 36): ein.Scheduler vs llama.cpp's batched decoding, 1.1B Llama shape.

A random-weight Llama (hidden 2048, 22 layers, 32 query / 4 key-value heads of 64, SwiGLU 5632, vocab
32000, untied lm_head: 1.1B parameters, the TinyLlama shape) is written as safetensors with NumPy,
compiled with einc (examples/models/llama_decoder.ein; cache 512 rows per sequence, up to 512 tokens a
step) at int8 and bf16, and written as GGUF q8_0 and f16 (bench/llm_decode.py's writer).

For S concurrent sequences (default 1, 4, 16, 64), each a different 128-token prompt generating 128 new
tokens greedily, all submitted at once:
  ein:       ein.Scheduler(max_sequences=S, threads=2): every step runs the next token of each
             generating sequence and prompt chunks within 512 tokens.
  llama.cpp: llama-cpp-python's low-level batch API (llama_batch with one sequence id per sequence,
             n_seq_max=S, S cache streams of 512 cells, n_batch 512, 2 threads), scheduled the
             same way: each llama_decode takes every sequence's next token, then prompt chunks up to
             512 tokens; greedy argmax of the logits of each sequence's last token.
Reported per engine and S, medians over --rounds alternated rounds, each engine in its own process:
  decode tok/s: tokens produced while every sequence was decoding (from the last sequence's first
                token to the first sequence's end), per second: the steady state of S at once;
  total tok/s:  all new tokens over the wall time from submission to the last token (prefill included);
  TTFT:         time from submission to each sequence's first token, median and max over sequences;
  cache MiB:    ein's key/value cache the sequences held at most: the paged cache's blocks in use
                (--ein-block-rows, default 16; 0: unpaged, a whole 512-row cache per sequence).
With --shared-prefix N every prompt begins with the same N tokens (a system prompt): the scheduler
starts later sequences from a sequence's cached prefix, whose blocks they share until they write.
DRAM read bandwidth: bench/llm_decode.py's, ein_kernel_bench's BM_StreamRead of 1 GiB on 2 threads.

Needs: the ein build (build/bin/einc), the Python package in .venv-python (scripts/python-env.sh), and
a venv with numpy, safetensors, gguf and llama-cpp-python for llama.cpp and the weights:
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install numpy safetensors gguf
  CMAKE_ARGS="-DGGML_NATIVE=ON" .venv-bench/bin/pip install llama-cpp-python
Run:   .venv-bench/bin/python bench/llm_many_sequences.py [--sequences 1,4,16,64] [--new-tokens 128]
       [--rounds 1] [--precisions int8,bf16] [--skip-llamacpp] [--ein-block-rows 16,0]
       [--shared-prefix 96] [--workdir DIR]
       (the weights, artifacts and GGUF files, ~9 GB, are made once in --workdir, default
       ein-many-bench in $TMPDIR or /tmp)

Results: see the end of this docstring's history in git log, and issue 36's closing note.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import llm_decode  # noqa: E402  (the GGUF writer, the tools' and model's paths, the 125M config)
from llm_decode import EINC, MODEL_EIN  # noqa: E402

EIN_PYTHON = os.path.join(ROOT, ".venv-python", "bin", "python")
CONFIG = dict(llm_decode.CONFIG, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
              num_attention_heads=32)  # the 1.1B TinyLlama shape
CACHE = 512  # rows per sequence: prompt 128 + 128 new tokens, with room
STEP = 512   # tokens one step takes, all sequences together
DIMS = dict(vocab=32000, hidden=2048, heads=32, kv_heads=4, head_dim=64, inter=5632, layers=22, cache=CACHE)
THREADS = 2
PROMPT = 128


def prompt(index, shared=0):
    """Sequence `index`'s prompt: its first `shared` tokens the same for every sequence (a system prompt)."""
    import random
    common, own = random.Random(999), random.Random(1000 + index)
    return [common.randrange(3, CONFIG["vocab_size"]) for _ in range(shared)] + \
        [own.randrange(3, CONFIG["vocab_size"]) for _ in range(PROMPT - shared)]


# A cache row of every layer's keys and values (bf16 in int8 and bf16 artifacts).
CACHE_ROW_BYTES = CONFIG["num_hidden_layers"] * 2 * CONFIG["num_key_value_heads"] * CONFIG["head_dim"] * 2


# ---------------------------------------------------------------- preparation
def make_weights(work):
    """HF LlamaForCausalLM names, unit-variance activations (as llm_decode.py), with NumPy."""
    import numpy as np
    from safetensors.numpy import save_file
    path = os.path.join(work, "weights.safetensors")
    if os.path.exists(path):
        return path
    c = CONFIG
    h, i, kv = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * c["head_dim"]
    r = np.random.default_rng(0)
    matrix = lambda rows, cols: (r.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float32)
    norm = lambda: (1 + 0.2 * r.standard_normal(h, dtype=np.float32)).astype(np.float32)
    state = {"model.embed_tokens.weight": r.standard_normal((c["vocab_size"], h), dtype=np.float32),
             "model.norm.weight": norm(), "lm_head.weight": matrix(c["vocab_size"], h)}
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        state[p + "input_layernorm.weight"] = norm()
        state[p + "post_attention_layernorm.weight"] = norm()
        state[p + "self_attn.q_proj.weight"] = matrix(h, h)
        state[p + "self_attn.k_proj.weight"] = matrix(kv, h)
        state[p + "self_attn.v_proj.weight"] = matrix(kv, h)
        state[p + "self_attn.o_proj.weight"] = matrix(h, h)
        state[p + "mlp.gate_proj.weight"] = matrix(i, h)
        state[p + "mlp.up_proj.weight"] = matrix(i, h)
        state[p + "mlp.down_proj.weight"] = matrix(h, i)
    save_file(state, path, metadata={"format": "pt"})
    return path


def compile_ein(work, weights, precision):
    out = os.path.join(work, f"llama_{precision}.einb")
    if os.path.exists(out):
        return out
    cmd = [EINC, MODEL_EIN, "-o", out, "--weights", weights, "--precision", precision]
    for k, v in DIMS.items():
        cmd += ["--dim", f"{k}={v}"]
    cmd += ["--dim", f"t=1..{STEP}", "--dim", f"past=0..{CACHE}"]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return out


# ---------------------------------------------------------------- workers (one process each)
def summarise(submitted, firsts, ends, stamps, tokens):
    """The figures of one run from each sequence's token times."""
    start, stop = max(firsts), min(ends)
    steady = sum(1 for times in stamps for t in times if start < t <= stop)
    ttft = sorted(f - submitted for f in firsts)
    return {"decode_tps": steady / (stop - start) if stop > start and steady else None,
            "total_tps": tokens / (max(ends) - submitted),
            "ttft_median_s": statistics.median(ttft), "ttft_max_s": ttft[-1]}


def worker_ein(einb, sequences, new_tokens, block_rows, shared):
    import ein
    model = ein.load(einb, threads=THREADS)
    with ein.Scheduler(model, max_sequences=sequences, threads=THREADS, step_tokens=STEP,
                       cache_block_rows=block_rows) as scheduler:
        scheduler.submit(prompt(0)[:16], max_new_tokens=2).wait()  # warm: pages touched, kernels chosen
        stamps = [[] for _ in range(sequences)]
        peak = [0]

        def read(index, request):
            for _ in request:
                stamps[index].append(time.perf_counter())
                peak[0] = max(peak[0], scheduler.cache_blocks_used)

        submitted = time.perf_counter()
        requests = [scheduler.submit(prompt(s, shared), max_new_tokens=new_tokens) for s in range(sequences)]
        readers = [threading.Thread(target=read, args=(s, r)) for s, r in enumerate(requests)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    result = summarise(submitted, [t[0] for t in stamps], [t[-1] for t in stamps], stamps, sequences * new_tokens)
    # The cache the sequences held at most: their blocks, or unpaged, a whole cache each.
    rows = peak[0] * block_rows if block_rows else sequences * CACHE
    result["cache_MiB"] = rows * CACHE_ROW_BYTES / 2**20
    return result


def worker_llamacpp(gguf_path, sequences, new_tokens):
    import ctypes
    import numpy as np
    import llama_cpp as api
    llm_decode.llamacpp_without_amx_buffers()
    api.llama_backend_init()
    model_params = api.llama_model_default_params()
    model = api.llama_model_load_from_file(gguf_path.encode(), model_params)
    params = api.llama_context_default_params()
    params.n_ctx = sequences * CACHE
    params.n_batch = params.n_ubatch = STEP
    params.n_seq_max = sequences
    params.n_threads = params.n_threads_batch = THREADS
    if hasattr(params, "kv_unified"):  # a cache stream per sequence: attention reads its own 512 cells
        params.kv_unified = False
    ctx = api.llama_init_from_model(model, params)
    vocab = api.llama_model_get_vocab(model)
    n_vocab = api.llama_vocab_n_tokens(vocab)
    batch = api.llama_batch_init(STEP, 0, sequences)

    def decode(entries):
        """entries: (sequence, tokens, first position); the logits of each entry's last token."""
        batch.n_tokens = 0
        rows = []
        for seq, tokens, pos in entries:
            for k, token in enumerate(tokens):
                i = batch.n_tokens
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos + k, 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = k == len(tokens) - 1
                batch.n_tokens += 1
            rows.append(batch.n_tokens - 1)
        if api.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        return [int(np.argmax(np.ctypeslib.as_array(api.llama_get_logits_ith(ctx, row), shape=(n_vocab,))))
                for row in rows]

    def clear():
        memory = api.llama_get_memory(ctx) if hasattr(api, "llama_get_memory") else None
        if memory is not None:
            api.llama_memory_clear(memory, True)
        else:
            api.llama_kv_self_clear(ctx)

    decode([(0, prompt(0)[:16], 0)])  # warm
    clear()
    prompts = [prompt(s) for s in range(sequences)]
    prefilled = [0] * sequences
    last = [0] * sequences
    stamps = [[] for _ in range(sequences)]
    submitted = time.perf_counter()
    while True:
        entries, owners, room = [], [], STEP
        for s in range(sequences):  # every decoding sequence's next token first
            if prefilled[s] == PROMPT and len(stamps[s]) < new_tokens:
                entries.append((s, [last[s]], PROMPT + len(stamps[s]) - 1))
                owners.append(s)
                room -= 1
        for s in range(sequences):  # then prompt chunks, first come first served
            if prefilled[s] < PROMPT and room > 0:
                take = min(room, PROMPT - prefilled[s])
                entries.append((s, prompts[s][prefilled[s]:prefilled[s] + take], prefilled[s]))
                owners.append(s)
                prefilled[s] += take
                room -= take
        if not entries:
            break
        chosen = decode(entries)
        now = time.perf_counter()
        for (s, tokens, pos), token in zip(entries, chosen):
            if pos + len(tokens) >= PROMPT:  # the prompt's end or a decode step: a new token
                last[s] = token
                stamps[s].append(now)
    api.llama_batch_free(batch)
    api.llama_free(ctx)
    api.llama_model_free(model)
    return summarise(submitted, [t[0] for t in stamps], [t[-1] for t in stamps], stamps, sequences * new_tokens)


def sub(python, job):
    p = subprocess.run([python, os.path.abspath(__file__), "--worker", json.dumps(job)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-1500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--sequences", default="1,4,16,64")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--precisions", default="int8,bf16")
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--ein-block-rows", default="16",
                    help="the paged cache's rows a block, a run of ein each (0: a whole cache per sequence)")
    ap.add_argument("--shared-prefix", type=int, default=0,
                    help="the prompts' first tokens the same for every sequence (a system prompt)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ein-many-bench"))
    a = ap.parse_args()
    if a.worker:
        job = json.loads(a.worker)
        if job["engine"] == "ein":
            result = worker_ein(job["path"], job["sequences"], job["new_tokens"], job["block_rows"], job["shared"])
        elif job["engine"] == "llamacpp":
            result = worker_llamacpp(job["path"], job["sequences"], job["new_tokens"])
        else:
            result = {"read_GBps": llm_decode.dram_read_gbps(THREADS)}
        print(json.dumps(result))
        return
    os.makedirs(a.workdir, exist_ok=True)
    weights = make_weights(a.workdir)
    engines = []
    gguf_kind = {"int8": "q8_0", "bf16": "f16"}
    for precision in a.precisions.split(","):
        for rows in (int(r) for r in a.ein_block_rows.split(",")):
            engines.append((f"ein {precision} b{rows}", EIN_PYTHON, compile_ein(a.workdir, weights, precision)))
        if not a.skip_llamacpp:
            path = llm_decode.write_gguf(a.workdir, weights, gguf_kind[precision], CONFIG)
            engines.append((f"llama.cpp {gguf_kind[precision]}", sys.executable, path))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    bandwidth = sub(sys.executable, {"engine": "bandwidth"})
    print(f"CPU: {cpu}; {THREADS} threads; DRAM read {bandwidth.get('read_GBps', 0):.1f} GB/s (2 threads)", flush=True)
    counts = [int(s) for s in a.sequences.split(",")]
    results = {}
    for _ in range(a.rounds):
        for sequences in counts:
            for name, python, path in engines:
                engine = "ein" if name.startswith("ein") else "llamacpp"
                job = {"engine": engine, "path": path, "sequences": sequences, "new_tokens": a.new_tokens}
                if engine == "ein":
                    job.update(block_rows=int(name.rsplit(" b", 1)[1]), shared=a.shared_prefix)
                r = sub(python, job)
                print(name, sequences, r, flush=True)
                results.setdefault((name, sequences), []).append(r)
    print(f"\n{'engine':16} {'seqs':>5} {'decode tok/s':>13} {'x one':>6} {'total tok/s':>12} {'TTFT med s':>11} "
          f"{'TTFT max s':>11} {'cache MiB':>10}")
    for name, _, _ in engines:
        one = None
        for sequences in counts:
            runs = [r for r in results[(name, sequences)] if "error" not in r]
            if not runs:
                print(f"{name:16} {sequences:>5} error: {results[(name, sequences)][0]['error'][-300:]}")
                continue
            median = lambda key: statistics.median(r[key] for r in runs if r[key] is not None) \
                if any(r[key] is not None for r in runs) else float("nan")
            decode = median("decode_tps")
            one = decode if sequences == 1 else one
            cache = median("cache_MiB") if "cache_MiB" in runs[0] else float("nan")
            print(f"{name:16} {sequences:>5} {decode:>13.1f} {decode / one if one else float('nan'):>6.1f} "
                  f"{median('total_tps'):>12.1f} {median('ttft_median_s'):>11.2f} {median('ttft_max_s'):>11.2f} "
                  f"{cache:>10.0f}")


if __name__ == "__main__":
    main()
