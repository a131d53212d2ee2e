#!/usr/bin/env python3
"""LLM prefill/decode benchmark (issue 22): ein vs transformers vs llama.cpp, batch 1, 2 threads.

A random-weight Llama-style decoder (hidden 768, 12 layers, 12 query / 4 key-value heads of 64,
SwiGLU 2048, vocab 32000, untied lm_head: ~125M parameters) is made with transformers'
LlamaForCausalLM, saved as safetensors, compiled with einc (examples/models/llama_decoder.ein,
cache capacity 2304) at fp32 / bf16 / int8, and written as GGUF (f32, f16, bf16, q8_0) directly
with the `gguf` package (q/k rows permuted as llama.cpp's convert_hf_to_gguf.py does, a dummy
32000-token SPM vocabulary with byte tokens).

Measured (each engine/precision in its own subprocess, alternated over --rounds rounds, medians):
  prefill tokens/s at 128 and 1024 prompt tokens;
  decode tokens/s at context 128 and 2048 (prefill that many tokens, then time --steps steps).
  ein:          `ein-run m.einb --generate N --prompt-ids ... --threads 2`, its printed
                "prefill: ... tokens/s" and "decode: ... tokens/s" (no --stop-token, so it decodes N).
  transformers: torch.set_num_threads(2), no_grad; prefill = one forward over the prompt (use_cache);
                decode = manual greedy step loop passing the cache (transformers 5: `cache=`, formerly
                past_key_values), timed per step; prefill keeps only the last logits (logits_to_keep=1).
  llama.cpp:    llama_cpp.Llama(n_threads=2, n_threads_batch=2, n_ctx=2304, n_batch=2048);
                prefill = llama.eval(prompt); decode = llama.eval([token]) per step.
DRAM read bandwidth: ein_kernel_bench's BM_StreamRead, a 1 GiB buffer flushed from the caches and read with vector
loads by 2 threads (and by 1), the best of 5 (the NumPy and torch sums used before read 2/3 of what the gemvs do);
achieved bandwidth = bytes of weights read per token (all gemm weights + lm_head; not the embedding
table) x decode tokens/s; "%read@n": that over the mean of two short reads (the best of 2) taken just before
and just after the run, the median over rounds. Engines of equal bytes a weight run side by side in each round
(ein int4 next to llama.cpp q4_0), and "paired by round" gives the median of each round's ratio of such a pair
(and ein int4 / ein int8): two runs a minute apart see the same bandwidth, which moves more between rounds
than the engines differ. ein int4 and int8 also decode a token each in turn in one process
(build/bin/ein_decode_in_turn, --steps pairs at each decode context): steps milliseconds apart see the same
bandwidth, and the median of the pairs' ratios is the tightest figure for int4 against int8. Correctness: ein fp32 greedy tokens vs transformers' greedy generate, 16 tokens.

Needs: the ein build (build/bin/einc, build/bin/ein-run) and a venv with torch, transformers,
safetensors, numpy, gguf and llama-cpp-python, e.g.:
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install torch transformers safetensors numpy gguf
  CMAKE_ARGS="-DGGML_NATIVE=ON" .venv-bench/bin/pip install llama-cpp-python
Run:   .venv-bench/bin/python bench/llm_decode.py [--rounds 2] [--steps 32] [--workdir DIR]
       (--workdir: the weights, artifacts and GGUF files, a few GB; the weights are made once and
       reused; default ein-llm-bench in the system's temporary folder, $TMPDIR or /tmp)
       (--skip-llamacpp, --skip-hf leave engines out; --einc/--ein-run use other builds' tools;
       --baseline-ein-run PATH adds an "ein-base" engine: the same artifacts run by another build's ein-run,
       e.g. main's, alternated with the others (with --baseline-einc PATH, artifacts that build's einc
       compiled instead, for when the artifact format differs between the two); --ein-isas T1,T2 adds an
       "ein@T" engine per CPU kernel table T (EIN_CPU_ISA=T: amx, avx512bf16, avx512vnni, avx512,
       avx2vnni, avx2, portable; a table this CPU lacks is reported and left out) beside "ein", CPUID's
       pick; --profile prints ein's EIN_PROFILE time per op kind of one decode step at contexts 128 and
       2048: a 200-step run minus a prefill-only run, per step).

Results (AMD EPYC Zen 5, 2 cores shared with other jobs, 2026-11-25, 3 rounds, 64 steps;
tokens/s, medians; DRAM read ~47-52 GB/s by a 2-thread torch sum):
                prefill128 prefill1024 decode128 decode2048
  ein fp32         1722       1769        104        86
  ein bf16         2760       2673        198       113
  ein int8         3430       3290        305       134
  transformers     869        1056         42        36
  llama.cpp f32    1307       1192        134       107
  llama.cpp f16    1741       1393        223       152
  llama.cpp bf16   2018       1671        224       151
  llama.cpp q8_0   1453       1209        288       176
All precisions compile. ein fp32 and llama.cpp f32 greedy tokens equal transformers' (16 tokens).
ein's decode gemms ran at ~43-48 GB/s (near DRAM bandwidth); at context 2048 its attention over the
f32 cache cost 2.7 ms/step in fp32 and 4.2-4.3 ms/step in bf16/int8 (44-56% of the step), which is
why ein trailed llama.cpp (f16 cache) at long context then.

Since the bf16 cache and the gemv path, on the 2-core "Intel(R) Xeon(R) Processor" (model 207, AMX,
nothing else running, 2026-11-26, 3 rounds, 32 steps; DRAM read 21.7 GB/s by the torch sum):
                prefill128 prefill1024 decode128 decode2048
  ein fp32          588        795        47.2       41.9
  ein bf16         1808       1764        83.9       70.5
  ein int8         2440       2156       198.4      130.0
  transformers      689        830        31.9       22.4
  llama.cpp f32     641        538        40.0       35.7
  llama.cpp f16     563        490        65.3       48.1
  llama.cpp bf16    562        427        64.0       45.3
  llama.cpp q8_0    452        402        96.5       60.8
(ein's prefill computes logits at every prompt position, transformers' and llama.cpp's at the last.)
"""
import argparse
import json
import re
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EINC = os.path.join(ROOT, "build", "bin", "einc")
EIN_RUN = os.path.join(ROOT, "build", "bin", "ein-run")
KERNEL_BENCH = os.path.join(ROOT, "build", "bin", "ein_kernel_bench")
DECODE_IN_TURN = os.path.join(ROOT, "build", "bin", "ein_decode_in_turn")
MODEL_EIN = os.path.join(ROOT, "examples", "models", "llama_decoder.ein")
CONFIG = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
              num_key_value_heads=4, head_dim=64, max_position_embeddings=4096, rms_norm_eps=1e-6,
              rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
CACHE = 2304
DIMS = dict(vocab=32000, hidden=768, heads=12, kv_heads=4, head_dim=64, inter=2048, layers=12, cache=CACHE)
# --shape: the 125M model above, or the 1.1B TinyLlama shape (hidden 2048, 22 layers, 32 query / 4
# key-value heads of 64, SwiGLU 5632: 4.4 GB of f32 weights, far beyond any cache).
SHAPES = {"125m": {}, "1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32)}
PREFILL_LENGTHS = (128, 1024)
DECODE_CONTEXTS = (128, 2048)
THREADS = 2
SHAPE = "125m"


def use_shape(name):
    """Makes CONFIG and DIMS the named shape's (in place: the workers and importers share them)."""
    global SHAPE
    SHAPE = name
    CONFIG.update(SHAPES[name])
    DIMS.update(hidden=CONFIG["hidden_size"], heads=CONFIG["num_attention_heads"], inter=CONFIG["intermediate_size"],
                layers=CONFIG["num_hidden_layers"])


def prompt(n, seed=1):
    import random
    r = random.Random(seed + n)
    return [r.randrange(3, CONFIG["vocab_size"]) for _ in range(n)]


# ---------------------------------------------------------------- preparation
def make_model(work):
    path = os.path.join(work, "weights.safetensors")
    if os.path.exists(path):
        return path
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    g = torch.Generator().manual_seed(0)
    state = {}
    for name, value in llama.state_dict().items():  # unit-variance activations, so greedy tokens are well separated
        noise = torch.randn(value.shape, generator=g)
        if value.dim() == 1:
            value = 1 + 0.2 * noise
        elif name.endswith("embed_tokens.weight"):
            value = noise
        else:
            value = noise / np.sqrt(value.shape[1])
        state[name] = value.float().contiguous()
    save_file(state, path, metadata={"format": "pt"})
    return path


# The bench's precision names that are more than einc's --precision.
EINC_PRECISION_ARGS = {"int8-g32": ["--precision", "int8", "--group-size", "32"]}


def compile_ein(work, weights, precision, einc=EINC, suffix=""):
    out = os.path.join(work, f"llama_{precision}{suffix}.einb")
    if os.path.exists(out):
        return out, None
    cmd = [einc, MODEL_EIN, "-o", out, "--weights", weights] + EINC_PRECISION_ARGS.get(precision, ["--precision", precision])
    for k, v in DIMS.items():
        cmd += ["--dim", f"{k}={v}"]
    cmd += ["--dim", f"t=1..{CACHE}", "--dim", f"past=0..{CACHE}"]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip()[-2000:]
    return out, None


def write_gguf(work, weights, kind, config=None):
    """GGUF of the same weights: kind in f32, f16, bf16, q8_0, q4_0 (every matrix, the output too, as
    ein's int4 quantizes every gemm weight); config: the model's (CONFIG by default)."""
    import numpy as np
    import gguf
    from safetensors.numpy import load_file
    out = os.path.join(work, f"llama_{kind}.gguf")
    if os.path.exists(out):
        return out
    st = load_file(weights)
    c = config or CONFIG
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("ein-bench-llama")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_dimension_count(c["head_dim"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_vocab_size(c["vocab_size"])
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[kind]
    w.add_file_type(ftype)
    # dummy SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then plain pieces
    toks, types = [b"<unk>", b"<s>", b"</s>"], [2, 3, 3]
    toks += [f"<0x{i:02X}>".encode() for i in range(256)]
    types += [6] * 256
    toks += [f"\u2581t{i}".encode() for i in range(c["vocab_size"] - len(toks))]
    types += [1] * (c["vocab_size"] - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * len(toks))
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)

    def permute(x, n_head):  # HF rotate-half layout -> llama.cpp's interleaved rope pairs
        return x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    def add(name, x, quantizable=True):
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim == 1 or not quantizable or kind == "f32":
            w.add_tensor(name, x)
        elif kind == "f16":
            w.add_tensor(name, x.astype(np.float16))
        else:
            q = {"bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
                 "q4_0": gguf.GGMLQuantizationType.Q4_0}[kind]
            w.add_tensor(name, gguf.quants.quantize(x, q), raw_dtype=q)

    add("token_embd.weight", st["model.embed_tokens.weight"])
    add("output_norm.weight", st["model.norm.weight"])
    add("output.weight", st["lm_head.weight"])
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        add(f"blk.{i}.attn_norm.weight", st[p + "input_layernorm.weight"])
        add(f"blk.{i}.ffn_norm.weight", st[p + "post_attention_layernorm.weight"])
        add(f"blk.{i}.attn_q.weight", permute(st[p + "self_attn.q_proj.weight"], c["num_attention_heads"]))
        add(f"blk.{i}.attn_k.weight", permute(st[p + "self_attn.k_proj.weight"], c["num_key_value_heads"]))
        add(f"blk.{i}.attn_v.weight", st[p + "self_attn.v_proj.weight"])
        add(f"blk.{i}.attn_output.weight", st[p + "self_attn.o_proj.weight"])
        add(f"blk.{i}.ffn_gate.weight", st[p + "mlp.gate_proj.weight"])
        add(f"blk.{i}.ffn_up.weight", st[p + "mlp.up_proj.weight"])
        add(f"blk.{i}.ffn_down.weight", st[p + "mlp.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def weight_bytes_per_token(precision):
    """Bytes of weights a decode step reads: every gemm weight and the lm_head (one embedding row is negligible)."""
    c = CONFIG
    h, i, kv = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * c["head_dim"]
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * i
    n = per_layer * c["num_hidden_layers"] + c["vocab_size"] * h
    per = {"fp32": 4, "f32": 4, "bf16": 2, "f16": 2, "int8": 1 + 4 / h, "int8-g32": 34 / 32, "q8_0": 34 / 32, "int4": 18 / 32,
           "q4_0": 18 / 32}[precision]
    return n * per


# ---------------------------------------------------------------- workers (one process each)
def worker_ein(einb, mode, n, steps, profile=False, ein_run=None, ids=None, isa=None):
    """tokens/s of mode "prefill" or "decode"; mode "tokens": the greedy tokens (`ids`: the prompt);
    `isa`: the CPU kernel table to force (EIN_CPU_ISA)."""
    ids = ",".join(map(str, ids or prompt(n)))
    gen = 1 if mode == "prefill" else steps
    cmd = [ein_run or EIN_RUN, einb, "--generate", str(gen), "--prompt-ids", ids, "--threads", str(THREADS)]
    env = dict(os.environ)
    if profile:
        env["EIN_PROFILE"] = "1"
    if isa:
        env["EIN_CPU_ISA"] = isa
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    text = p.stdout + "\n" + p.stderr
    if mode == "tokens":
        return [int(x) for x in re.search(r"^tokens: ([0-9,]+)", p.stdout, re.M).group(1).split(",")]
    res = {}
    for key, value in re.findall(r"^(prefill|decode):.*\(([0-9.]+) tokens/s\)", text, re.M):
        res[key] = float(value)
    if profile:
        res["profile"] = p.stderr
    res["stdout"] = p.stdout[-3000:]
    return res[mode] if not profile else res


# llama.cpp's format of the same bytes a weight as each ein precision: the pairs the goals compare.
SAME_BYTES = {"fp32": ["f32"], "bf16": ["f16", "bf16"], "int8": ["q8_0"], "int8-g32": ["q8_0"], "int4": ["q4_0"]}


def paired_ratios(engines, cells, by_round):
    """Per decode cell, the ratio of two runs of one round: each ein engine against llama.cpp at the same
    bytes a weight, and ein int4 against ein int8 (the goal int4 >= 1.7x int8)."""
    pairs = []
    for eng, prec, _ in engines:
        if not eng.startswith("ein"):
            continue
        pairs += [((eng, prec), ("llamacpp", kind)) for kind in SAME_BYTES.get(prec, [])
                  if any(e == "llamacpp" and p == kind for e, p, _ in engines)]
        if prec == "int4" and any(e == eng and p == "int8" for e, p, _ in engines):
            pairs.append(((eng, prec), (eng, "int8")))
    out = {}
    for (e1, p1), (e2, p2) in pairs:
        for mode, n in cells:
            if mode != "decode":
                continue
            first, second = by_round.get(f"{e1}/{p1}/{mode}{n}", {}), by_round.get(f"{e2}/{p2}/{mode}{n}", {})
            ratios = [first[r] / second[r] for r in sorted(first) if r in second and second[r] > 0]
            if ratios:
                out.setdefault(f"{e1} {p1} / {e2} {p2}", {})[f"@{n}"] = {
                    "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                    "ahead": sum(x > 1 for x in ratios), "rounds": len(ratios), "ratios": ratios}
    return out


def int4_against_int8_in_turn(engines, steps):
    """Per decode context, ein int8 and int4 decoding a token each in turn in one process
    (ein_decode_in_turn): the median over the pairs of neighbouring steps of int4's speed / int8's,
    with quartiles, and each one's median tokens/s. {} unless both artifacts are among the engines."""
    paths = {p: x for e, p, x in engines if e == "ein"}
    if "int4" not in paths or "int8" not in paths:
        return {}
    out = {}
    for n in DECODE_CONTEXTS:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            p = subprocess.run([DECODE_IN_TURN, paths["int8"], paths["int4"], "--prompt-ids", ",".join(map(str, prompt(n))),
                                "--tokens", str(steps), "--threads", str(THREADS), "--json", f.name],
                               capture_output=True, text=True)
            if p.returncode != 0:
                out[f"@{n}"] = {"error": p.stderr[-2000:]}
                continue
            r = json.load(open(f.name))
        out[f"@{n}"] = {"median": r["speed_ratio_median"], "q1": r["speed_ratio_q1"], "q3": r["speed_ratio_q3"],
                        "int8_tokens_per_s": 1e3 / statistics.median(r["a_step_ms"]),
                        "int4_tokens_per_s": 1e3 / statistics.median(r["b_step_ms"])}
    return out


def decode_profile(einb, n, steps, ein_run=None):
    """EIN_PROFILE of a decode step: (prefill n + `steps` steps) minus (prefill n alone), per step."""
    def prof(g):
        r = worker_ein(einb, "decode", n, g, profile=True, ein_run=ein_run)
        d = {m[0]: float(m[1]) for m in re.findall(r"profile: (\w+)\s+([0-9.]+) ms", r["profile"])}
        return d, r
    a, _ = prof(1)
    b, r = prof(steps + 1)
    out = {k: (b[k] - a.get(k, 0.0)) / steps for k in b}
    out["sum of ops"] = sum(out.values())
    out["measured step"] = 1000.0 / r["decode"]
    return out


def worker_hf(weights, mode, n, steps):
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.set_num_threads(THREADS)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    model.load_state_dict(load_file(weights))
    ids = torch.tensor([prompt(n)])
    with torch.no_grad():
        model(ids[:, :16])  # warm up
        t0 = time.perf_counter()
        out = model(ids, use_cache=True, logits_to_keep=1)
        t1 = time.perf_counter()
        if mode == "prefill":
            return n / (t1 - t0)
        past = out.cache
        tok = out.logits[:, -1:].argmax(-1)
        times = []
        for _ in range(steps):
            s = time.perf_counter()
            out = model(tok, cache=past, use_cache=True)
            past = out.cache
            tok = out.logits[:, -1:].argmax(-1)
            times.append(time.perf_counter() - s)
        return len(times) / sum(times)


def llamacpp_argmax(llm):
    """The last token's greedy choice (Llama.eval no longer fills llm.scores unless logits_all)."""
    import numpy as np
    return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))))


def llamacpp_without_amx_buffers():
    """On CPUs with AMX, llama.cpp's AMX kernels for q4_0 and q8_0 (an "extra buffer type") run tilezero
    on a thread without a tile configuration and die (SIGILL or SIGSEGV: llama-cpp-python 0.3.36); without
    extra buffer types those tensors run on its AVX-512 VNNI dot products. Call before loading a model."""
    if "amx_int8" not in open("/proc/cpuinfo").read():
        return
    import llama_cpp.llama_cpp as api
    defaults = api.llama_model_default_params
    if getattr(defaults, "without_extra_buffers", False):
        return

    def without_extra_buffers():
        params = defaults()
        params.use_extra_bufts = False
        return params
    without_extra_buffers.without_extra_buffers = True
    api.llama_model_default_params = without_extra_buffers
    import llama_cpp
    llama_cpp.llama_model_default_params = without_extra_buffers


def worker_llamacpp(gguf_path, mode, n, steps):
    import numpy as np
    import llama_cpp
    llamacpp_without_amx_buffers()
    llm = llama_cpp.Llama(model_path=gguf_path, n_threads=THREADS, n_threads_batch=THREADS, n_ctx=CACHE,
                          n_batch=2048, verbose=False)
    toks = prompt(n)
    llm.eval(toks[:16])  # warm up
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(toks)
    t1 = time.perf_counter()
    if mode == "prefill":
        return n / (t1 - t0)
    tok = llamacpp_argmax(llm)
    s = time.perf_counter()
    for _ in range(steps):
        llm.eval([tok])
        tok = llamacpp_argmax(llm)
    return steps / (time.perf_counter() - s)


def worker_llamacpp_tokens(gguf_path, ids, n_new):
    import llama_cpp
    llamacpp_without_amx_buffers()
    llm = llama_cpp.Llama(model_path=gguf_path, n_threads=THREADS, n_ctx=256, verbose=False)
    llm.eval(ids)
    tokens = []
    for _ in range(n_new):
        tokens.append(llamacpp_argmax(llm))
        llm.eval([tokens[-1]])
    return tokens


def dram_read_gbps(threads, repetitions=5):
    """DRAM read bandwidth in GB/s: the best of `repetitions` runs of ein_kernel_bench's BM_StreamRead over
    a 1 GiB buffer, flushed from the caches before each pass and summed with the CPU's widest vector loads by
    `threads` threads, each its own contiguous part (as a decode gemv splits its panels)."""
    out = subprocess.run([KERNEL_BENCH, f"--benchmark_filter=^BM_StreamRead/1024/{threads}/",
                          f"--benchmark_repetitions={repetitions}", "--benchmark_min_time=0.2",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True).stdout
    return max(b["weight_GBps"] for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration")


def worker_bandwidth():
    return {"read_1thread_GBps": dram_read_gbps(1), f"read_{THREADS}threads_GBps": dram_read_gbps(THREADS)}


def worker_correctness(weights, einb, n_new=16, ein_run=None):
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.set_num_threads(THREADS)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    model.load_state_dict(load_file(weights))
    ids = prompt(32, seed=7)
    with torch.no_grad():
        hf = model.generate(torch.tensor([ids]), max_new_tokens=n_new, do_sample=False, num_beams=1,
                            pad_token_id=0, eos_token_id=None)[0, len(ids):].tolist()
    p = subprocess.run([ein_run or EIN_RUN, einb, "--generate", str(n_new), "--prompt-ids", ",".join(map(str, ids)),
                        "--threads", str(THREADS)], capture_output=True, text=True)
    res = {}
    gg = os.path.join(os.path.dirname(einb), "llama_f32.gguf")
    if os.path.exists(gg):
        try:
            lc = worker_llamacpp_tokens(gg, ids, n_new)
            res = {"llamacpp_f32": lc, "llamacpp_f32_match": lc == hf}
        except ImportError:
            pass
    m = re.search(r"^tokens: ([0-9,]+)", p.stdout, re.M)
    ein = [int(x) for x in m.group(1).split(",")] if m else None
    return {"prompt_length": len(ids), "hf": hf, "ein": ein, "match": ein == hf,
            "ein_error": None if m else (p.stdout + p.stderr)[-1000:], **res}


def worker_logits(engine, path, n, ein_run=None):
    """The logits of every position of a prompt of n tokens: ein-run's output, or llama.cpp's (logits_all)."""
    import numpy as np
    ids = np.array([prompt(n, seed=11)], dtype=np.int64)
    if engine == "ein":
        with tempfile.TemporaryDirectory() as out:
            np.save(os.path.join(out, "ids.npy"), ids)
            p = subprocess.run([ein_run or EIN_RUN, path, "--input", f"ids={out}/ids.npy", "--output-dir", out,
                                "--threads", str(THREADS)], capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            logits = np.load(os.path.join(out, "logits.npy"))[0]
    else:
        import llama_cpp
        llamacpp_without_amx_buffers()
        llm = llama_cpp.Llama(model_path=path, n_threads=THREADS, n_threads_batch=THREADS, n_ctx=max(256, 2 * n),
                              n_batch=2 * n, logits_all=True, verbose=False)
        llm.eval(ids[0].tolist())
        logits = np.array(llm.scores[:n], dtype=np.float32)
    out = os.path.join(tempfile.gettempdir(), f"ein-bench-logits-{os.getpid()}.npy")
    np.save(out, logits)
    return {"logits": out}


def quantization_errors(work, engines, ein_run, n=64):
    """Each engine's logits against ein fp32's on the same prompt (ein fp32 matches transformers): the largest
    and the RMS difference and how often the top-1 token agrees; and ein compiled from llama.cpp's own q8_0/q4_0
    GGUF files (int8/int4), whose greedy tokens are set against llama.cpp's on the same file."""
    import numpy as np
    reference = [p for e, prec, p in engines if e == "ein" and prec == "fp32"]
    if not reference:
        return {}

    def logits_of(engine, path):
        r = sub({"engine": "logits", "which": engine, "path": path, "n": n, "ein_run": ein_run})
        if "error" in r:
            return None
        values = np.load(r["logits"])
        os.remove(r["logits"])
        return values
    want = logits_of("ein", reference[0])
    rows = {}
    candidates = [(("ein" if e == "ein" else "llama.cpp") + " " + prec, "ein" if e == "ein" else "llamacpp", p)
                  for e, prec, p in engines if e in ("ein", "llamacpp") and prec != "fp32"]
    for kind, precision in (("q8_0", "int8-g32"), ("q4_0", "int4")):
        gguf_path = os.path.join(work, f"llama_{kind}.gguf")
        if os.path.exists(gguf_path):
            path, err = compile_ein(work, gguf_path, precision, suffix=f"_from_{kind}")
            if path:
                candidates.append((f"ein {precision} from {kind}.gguf", "ein", path))
                ids = prompt(32, seed=7)
                ours = worker_ein(path, "tokens", 32, 16, ein_run=ein_run, ids=ids)
                theirs = sub({"engine": "llamacpp-tokens", "path": gguf_path, "ids": ids, "n_new": 16})
                rows[f"greedy tokens, ein {precision} vs llama.cpp {kind} on {kind}.gguf"] = {
                    "ein": ours, "llama.cpp": theirs, "match": ours == theirs}
    for name, engine, path in candidates:
        got = logits_of(engine, path)
        if got is None or got.shape != want.shape:
            rows[name] = "failed"
            continue
        d = got.astype(np.float64) - want
        rows[name] = {"max_abs": float(np.abs(d).max()), "rms": float(np.sqrt((d ** 2).mean())),
                      "logit_rms": float(np.sqrt((want.astype(np.float64) ** 2).mean())),
                      "top1_agree": float((got.argmax(-1) == want.argmax(-1)).mean())}
    return rows


# ---------------------------------------------------------------- orchestration
def usable_tables(ein_run, einb, tables):
    """The CPU kernel tables of `tables` that this CPU runs: those ein-inspect names as its cpu_kernels
    when EIN_CPU_ISA asks for them (the runtime falls back to CPUID's pick otherwise)."""
    inspect = os.path.join(os.path.dirname(ein_run), "ein-inspect")
    usable = set()
    for isa in tables:
        out = subprocess.run([inspect, "--json", einb], capture_output=True, text=True,
                             env=dict(os.environ, EIN_CPU_ISA=isa))
        if out.returncode == 0 and json.loads(out.stdout).get("cpu_kernels") == isa:
            usable.add(isa)
    return usable


def sub(args):
    args = dict(args, shape=SHAPE)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-1500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker")
    ap.add_argument("--workdir", help="default: ein-llm-bench (125m) or ein-llm-bench-1.1b in the temporary folder")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="125m")
    ap.add_argument("--decode-contexts", default="128,2048", help="contexts of the decode cells, comma-separated")
    ap.add_argument("--llamacpp-kinds", default="f32,f16,bf16,q8_0",
                    help="llama.cpp's GGUF kinds, comma-separated (of f32, f16, bf16, q8_0, q4_0)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--einc", default=EINC)
    ap.add_argument("--ein-run", default=EIN_RUN)
    ap.add_argument("--baseline-ein-run")
    ap.add_argument("--baseline-einc")
    ap.add_argument("--ein-isas", default="", help="CPU kernel tables to run ein's artifacts under too, comma-separated")
    ap.add_argument("--precisions", default="fp32,bf16,int8", help="ein's precisions, comma-separated (of fp32, "
                    "bf16, int8, int8-g32: int8 with --group-size 32, int4)")
    ap.add_argument("--profile-steps", type=int, default=200)
    ap.add_argument("--decode-only", action="store_true", help="time the decode cells only, not prefill")
    ap.add_argument("--quantization-errors", action="store_true",
                    help="each precision's logits against ein fp32's, and ein on llama.cpp's own q8_0/q4_0 files")
    a = ap.parse_args()
    global DECODE_CONTEXTS
    DECODE_CONTEXTS = tuple(int(n) for n in a.decode_contexts.split(","))
    if a.worker:
        w = json.loads(a.worker)
        use_shape(w["shape"])
        fn = {"ein": worker_ein, "hf": worker_hf, "llamacpp": worker_llamacpp}.get(w["engine"])
        if w["engine"] in ("ein", "ein-base") or w["engine"].startswith("ein@"):
            r = worker_ein(w["path"], w["mode"], w["n"], w["steps"], ein_run=w["ein_run"],
                           isa=w["engine"].partition("@")[2] or None)
        elif w["engine"] == "bandwidth":
            r = worker_bandwidth()
        elif w["engine"] == "logits":
            r = worker_logits(w["which"], w["path"], w["n"], ein_run=w["ein_run"])
        elif w["engine"] == "llamacpp-tokens":
            r = worker_llamacpp_tokens(w["path"], w["ids"], w["n_new"])
        elif w["engine"] == "correct":
            r = worker_correctness(w["weights"], w["einb"], ein_run=w["ein_run"])
        else:
            r = fn(w["path"], w["mode"], w["n"], w["steps"])
        print(json.dumps(r))
        return

    use_shape(a.shape)
    a.workdir = a.workdir or os.path.join(tempfile.gettempdir(),
                                          "ein-llm-bench" + ("" if a.shape == "125m" else "-" + a.shape))
    os.makedirs(a.workdir, exist_ok=True)
    weights = make_model(a.workdir)
    engines, failures = [], {}
    isas, usable = [t for t in a.ein_isas.split(",") if t], None
    for prec in a.precisions.split(","):
        path, err = compile_ein(a.workdir, weights, prec, a.einc)
        if path:
            engines.append(("ein", prec, path))
            if usable is None:
                usable = usable_tables(a.ein_run, path, isas)
            for isa in isas:
                if isa in usable:
                    engines.append((f"ein@{isa}", prec, path))
                else:
                    failures[f"ein@{isa}"] = "this CPU has no such kernel table (ein-inspect's cpu_kernels differs)"
            if a.baseline_ein_run and a.baseline_einc:
                base, err = compile_ein(a.workdir, weights, prec, a.baseline_einc, suffix="_base")
                if base:
                    engines.append(("ein-base", prec, base))
                else:
                    failures[f"ein-base {prec} compile"] = err
            elif a.baseline_ein_run:
                engines.append(("ein-base", prec, path))
        else:
            failures[f"ein {prec} compile"] = err
    if not a.skip_hf:
        engines.append(("hf", "fp32", weights))
    if not a.skip_llamacpp:
        for kind in a.llamacpp_kinds.split(","):
            try:
                engines.append(("llamacpp", kind, write_gguf(a.workdir, weights, kind)))
            except Exception as e:  # noqa: BLE001
                failures[f"gguf {kind}"] = repr(e)
    # Engines of equal bytes a weight side by side (ein int4 next to q4_0), so that each pair compared
    # below runs in the same minutes of each round.
    engines.sort(key=lambda e: -weight_bytes_per_token(e[1]))
    print("engines:", [(e, p) for e, p, _ in engines], flush=True)
    if failures:
        print("failures:", json.dumps(failures, indent=1), flush=True)

    results = {}
    if not a.skip_hf and any(e == "ein" and p == "fp32" for e, p, _ in engines):  # needs transformers
        einb = [x for e, p, x in engines if e == "ein" and p == "fp32"][0]
        c = sub({"engine": "correct", "weights": weights, "einb": einb, "ein_run": a.ein_run})
        print("correctness:", json.dumps(c), flush=True)
        results["correctness"] = c
    if a.profile:
        for eng, prec, path in engines:
            if eng in ("ein", "ein-base"):
                run = a.baseline_ein_run if eng == "ein-base" else a.ein_run
                for n in DECODE_CONTEXTS:
                    print(f"{eng} {prec} decode step at context {n}, ms per step by op kind:", flush=True)
                    for k, ms in decode_profile(path, n, a.profile_steps, run).items():
                        print(f"   {k:<12}{ms:8.3f}", flush=True)
    if a.quantization_errors:
        errors = quantization_errors(a.workdir, engines, a.ein_run)
        print("quantization errors against ein fp32 (logits of a 64-token prompt):", flush=True)
        for name, row in errors.items():
            print(f"   {name}: {json.dumps(row)}", flush=True)
        results["quantization_errors"] = errors
    bw = sub({"engine": "bandwidth"})
    print("bandwidth:", bw, flush=True)
    results["bandwidth"] = bw
    cells = ([] if a.decode_only else [("prefill", n) for n in PREFILL_LENGTHS]) + \
        [("decode", n) for n in DECODE_CONTEXTS]
    by_round, fractions = {}, {}  # key -> {round: tokens/s}; key -> fractions of the read
    for rnd in range(a.rounds):
        order = engines if rnd % 2 == 0 else engines[::-1]
        for mode, n in cells:
            # A decode run's bandwidth against the read measured just before and just after it (the mean of
            # the two): this VM's bandwidth moves by a third within minutes, more than the gaps the goals draw.
            read_before = dram_read_gbps(THREADS, repetitions=2) if mode == "decode" else None
            for eng, prec, path in order:
                r = sub({"engine": eng, "path": path, "mode": mode, "n": n, "steps": a.steps,
                         "ein_run": a.baseline_ein_run if eng == "ein-base" else a.ein_run})
                key = f"{eng}/{prec}/{mode}{n}"
                if isinstance(r, dict):
                    print(key, "ERROR", r["error"][-400:], flush=True)
                    failures[key] = r["error"]
                    continue
                by_round.setdefault(key, {})[rnd] = r
                line = f"round {rnd} {key}: {r:.1f} tok/s"
                if read_before is not None:
                    read_after = dram_read_gbps(THREADS, repetitions=2)
                    read = (read_before + read_after) / 2
                    fraction = weight_bytes_per_token(prec) * r / 1e9 / read
                    fractions.setdefault(key, []).append(fraction)
                    line += f", {100 * fraction:.0f}% of the read around it ({read:.1f} GB/s)"
                    read_before = read_after
                print(line, flush=True)
    raw = {key: list(rounds.values()) for key, rounds in by_round.items()}
    results["raw"] = raw
    results["paired_ratios"] = paired = paired_ratios(engines, cells, by_round)
    results["fractions_of_read"] = fractions
    results["int4_against_int8_in_turn"] = in_turn = int4_against_int8_in_turn(engines, a.steps)
    results["failures"] = failures

    gbps = bw.get(f"read_{THREADS}threads_GBps", float("nan"))
    print("\n" + os.popen("lscpu | grep 'Model name'").read().strip(), f"| {THREADS} threads, batch 1, medians of "
          f"{a.rounds} rounds, {a.steps} decode steps")
    print(f"DRAM read bandwidth (BM_StreamRead, 1 GiB): {THREADS} threads {gbps:.1f} GB/s, 1 thread "
          f"{bw.get('read_1thread_GBps', float('nan')):.1f} GB/s")
    head = f"{'engine':<16}{'prec':<9}" + "".join(f"{m + str(n):>12}" for m, n in cells) + f"{'MB/token':>10}" + \
        "".join(f"{'GB/s@' + str(n):>10}" for n in DECODE_CONTEXTS) + \
        "".join(f"{'%read@' + str(n):>10}" for n in DECODE_CONTEXTS)
    print(head)
    for eng, prec, _ in engines:
        row = f"{eng:<16}{prec:<9}"
        med = {}
        for mode, n in cells:
            v = raw.get(f"{eng}/{prec}/{mode}{n}")
            med[(mode, n)] = statistics.median(v) if v else float("nan")
            row += f"{med[(mode, n)]:>12.1f}"
        wb = weight_bytes_per_token(prec)
        row += f"{wb / 1e6:>10.0f}" + "".join(f"{wb * med[('decode', n)] / 1e9:>10.1f}" for n in DECODE_CONTEXTS)
        for n in DECODE_CONTEXTS:
            f = fractions.get(f"{eng}/{prec}/decode{n}")
            row += f"{100 * statistics.median(f):>10.0f}" if f else f"{'nan':>10}"
        print(row)
    if paired:
        print("\nPaired by round (runs side by side in each round), the median of the rounds' ratios (range), "
              "the rounds where the first is faster:")
        for name, cell in paired.items():
            print(f"  {name}: " + ",  ".join(
                f"{c} {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f}) {v['ahead']}/{v['rounds']}"
                for c, v in cell.items()))
    if in_turn:
        print("\nein int4 / ein int8 in one process, a token of each in turn (ein_decode_in_turn), the median of the "
              "pairs' ratios (quartiles; each one's median tokens/s):")
        for cell, v in in_turn.items():
            print(f"  {cell}: " + (f"error {v['error'][-300:]}" if "error" in v else
                                   f"{v['median']:.2f} ({v['q1']:.2f}-{v['q3']:.2f}; int8 {v['int8_tokens_per_s']:.1f}, "
                                   f"int4 {v['int4_tokens_per_s']:.1f})"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
