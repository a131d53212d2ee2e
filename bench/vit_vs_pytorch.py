#!/usr/bin/env python3
"""ViT-S/16 and ViT-B/16 in ein, in PyTorch eager and (with --onnxruntime) in
ONNX Runtime, same weights, one run.

Writes random weights under timm's state_dict names to a .safetensors file,
compiles examples/models/vit_small_patch16_224.ein with them (einc --weights;
ViT-B via --dim embed=768 --dim heads=12, batch via --dim batch=N) and times:
ein with `ein-run --bench RUNS --threads T`; PyTorch with a hand-written
timm-named ViT (F.scaled_dot_product_attention, as timm uses) under
inference_mode with torch.set_num_threads(T) and its best allocator/ISA
settings; ONNX Runtime with that model exported to ONNX (opset 17), all graph
optimisations, intra_op_num_threads=T, sequential execution (measured faster
here than after its transformer optimizer, which finds no attention to fuse in
this export). Prints the medians and ein's time over each (< 1: ein is faster).
The runtimes alternate for --rounds rounds (shared machines drift over
minutes); each figure is the median of the rounds' medians. Accuracy: every
set of logits against the same PyTorch model run in float64.

Needs numpy, safetensors and torch (and onnxruntime, onnx for --onnxruntime),
e.g. in a venv (the build and the tests never need them):
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install numpy safetensors torch onnxruntime onnx
  .venv-bench/bin/python bench/vit_vs_pytorch.py --einc build/bin/einc --ein-run build/bin/ein-run --onnxruntime
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "models", "vit_small_patch16_224.ein")
CONFIGS = {"vit_s16": dict(embed=384, heads=6), "vit_b16": dict(embed=768, heads=12)}
DEPTH, PATCH, IMAGE, CLASSES = 12, 16, 224, 1000
# PyTorch's best CPU settings: large allocations stay mapped, and AVX-512
# kernels where the CPU has them (forcing them elsewhere is an illegal instruction).
with open("/proc/cpuinfo") as _cpuinfo:
    _HAS_AVX512 = any("avx512f" in line.split() for line in _cpuinfo if line.startswith("flags"))
TORCH_ENV = {"MALLOC_MMAP_THRESHOLD_": "67108864", "MALLOC_TRIM_THRESHOLD_": "4294967296",
             "ATEN_CPU_CAPABILITY": "avx512" if _HAS_AVX512 else "avx2"}


def run_with_torch_env():
    """Runs the calling script again with TORCH_ENV, unless it already has it:
    PyTorch reads its allocator and ISA settings at start-up."""
    if any(os.environ.get(name) != value for name, value in TORCH_ENV.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **TORCH_ENV})


def conformance_script(name):
    """tests/conformance/NAME.py as a module: a case's PyTorch model, with its weights."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", "conformance", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timm_weights(embed, seed):
    """Random weights with timm's vit_*_patch16_224 names and shapes (trunc-normal-ish scale)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    w = lambda *shape, s=0.02: (rng.standard_normal(shape) * s).astype(np.float32)
    grid = (IMAGE // PATCH) ** 2
    t = {"cls_token": w(1, 1, embed), "pos_embed": w(1, grid + 1, embed),
         "patch_embed.proj.weight": w(embed, 3, PATCH, PATCH), "patch_embed.proj.bias": w(embed),
         "norm.weight": 1 + w(embed), "norm.bias": w(embed), "head.weight": w(CLASSES, embed), "head.bias": w(CLASSES)}
    for i in range(DEPTH):
        p = f"blocks.{i}."
        t.update({p + "norm1.weight": 1 + w(embed), p + "norm1.bias": w(embed),
                  p + "norm2.weight": 1 + w(embed), p + "norm2.bias": w(embed),
                  p + "attn.qkv.weight": w(3 * embed, embed), p + "attn.qkv.bias": w(3 * embed),
                  p + "attn.proj.weight": w(embed, embed), p + "attn.proj.bias": w(embed),
                  p + "mlp.fc1.weight": w(4 * embed, embed), p + "mlp.fc1.bias": w(4 * embed),
                  p + "mlp.fc2.weight": w(embed, 4 * embed), p + "mlp.fc2.bias": w(embed)})
    return t


def torch_vit(embed, heads):
    """timm's ViT (pre-norm, class token, learned positions) with timm's parameter names."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(embed, 3 * embed), nn.Linear(embed, embed)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4).unbind(0)
            return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(embed, 4 * embed), nn.Linear(4 * embed, embed)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(embed, eps=1e-6), nn.LayerNorm(embed, eps=1e-6)
            self.attn, self.mlp = Attention(), Mlp()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(3, embed, PATCH, stride=PATCH)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = PatchEmbed()
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed))
            self.pos_embed = nn.Parameter(torch.zeros(1, (IMAGE // PATCH) ** 2 + 1, embed))
            self.blocks = nn.Sequential(*[Block() for _ in range(DEPTH)])
            self.norm, self.head = nn.LayerNorm(embed, eps=1e-6), nn.Linear(embed, CLASSES)

        def forward(self, img):
            x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            return self.head(self.norm(self.blocks(x))[:, 0])

    return ViT()


def load_torch_model(args):
    from safetensors.torch import load_file
    model = torch_vit(args.embed, args.heads).eval()
    model.load_state_dict(load_file(args.weights))
    return model


def time_runs(run, runs):
    """Five warm-up calls, then `runs` timed ones: (median ms, min ms)."""
    import time
    for _ in range(5):
        run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def worker(args):
    """Times one runtime in this (fresh) process: prints one JSON line. The
    ONNX Runtime worker imports torch only to export the model, once."""
    import numpy as np
    img = np.load(args.input)
    if args.worker == "torch":
        import torch
        torch.set_num_threads(int(args.threads))
        model, x = load_torch_model(args), torch.from_numpy(img)
        with torch.inference_mode():
            logits = model(x).numpy()
            median, fastest = time_runs(lambda: model(x), args.runs)
            if args.reference_output:
                np.save(args.reference_output, model.double()(x.double()).numpy())
    else:
        import onnxruntime
        if not os.path.exists(args.onnx):
            import torch
            torch.onnx.export(load_torch_model(args), (torch.from_numpy(img),), args.onnx, input_names=["img"],
                              output_names=["logits"], opset_version=17, dynamo=False)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = int(args.threads), 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(args.onnx, options, providers=["CPUExecutionProvider"])
        feed = {"img": img}
        logits = session.run(None, feed)[0]
        median, fastest = time_runs(lambda: session.run(None, feed), args.runs)
    np.save(args.output, logits)
    print(json.dumps({"median_ms": median, "min_ms": fastest}))


def run_ein(ein_run, artifact, inputs, threads, runs, out_dir):
    text = subprocess.run([ein_run, artifact, "--input", f"img={inputs}", "--threads", str(threads), "--bench",
                           str(runs), "--output-dir", out_dir], check=True, capture_output=True, text=True).stdout
    m = re.search(r"bench: (\d+) runs, min ([\d.]+) ms, median ([\d.]+) ms, p90 ([\d.]+) ms", text)
    return float(m.group(3)), float(m.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--models", default="vit_s16,vit_b16")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per round")
    parser.add_argument("--rounds", type=int, default=3, help="the runtimes alternate this many times")
    parser.add_argument("--onnxruntime", action="store_true", help="also time ONNX Runtime")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--worker", choices=["torch", "onnxruntime"], help=argparse.SUPPRESS)
    parser.add_argument("--onnx", help=argparse.SUPPRESS)
    parser.add_argument("--embed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--heads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--reference-output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    others = ["torch"] + (["onnxruntime"] if args.onnxruntime else [])
    label = {"ein": "ein", "torch": "PyTorch", "onnxruntime": "ONNX Runtime"}

    import numpy as np
    from safetensors.numpy import save_file
    work = args.workdir or tempfile.mkdtemp(prefix="ein-vit-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        cfg = CONFIGS[name]
        weights = os.path.join(work, f"{name}.safetensors")
        save_file(timm_weights(cfg["embed"], seed=0), weights)
        for batch in map(int, args.batches.split(",")):
            artifact = os.path.join(work, f"{name}_b{batch}.einb")
            subprocess.run([args.einc, MODEL, "--weights", weights, "--dim", f"embed={cfg['embed']}", "--dim",
                            f"heads={cfg['heads']}", "--dim", f"batch={batch}", "-o", artifact], check=True)
            img = os.path.join(work, f"img_b{batch}.npy")
            np.save(img, np.random.default_rng(batch).standard_normal((batch, 3, IMAGE, IMAGE)).astype(np.float32))
            for threads in map(int, args.threads.split(",")):
                out_dir = os.path.join(work, f"out_{name}_b{batch}_t{threads}")
                os.makedirs(out_dir, exist_ok=True)
                reference_out = os.path.join(out_dir, "float64_logits.npy")
                logits = {"ein": os.path.join(out_dir, "logits.npy")}
                logits.update({other: os.path.join(out_dir, f"{other}_logits.npy") for other in others})
                env = dict(os.environ, **TORCH_ENV, OMP_NUM_THREADS=str(threads))
                medians = {runtime: [] for runtime in ["ein"] + others}
                for round_index in range(args.rounds):
                    medians["ein"].append(run_ein(args.ein_run, artifact, img, threads, args.runs, out_dir)[0])
                    for other in others:
                        command = [sys.executable, os.path.abspath(__file__), "--worker", other, "--embed",
                                   str(cfg["embed"]), "--heads", str(cfg["heads"]), "--weights", weights, "--input",
                                   img, "--output", logits[other], "--threads", str(threads), "--runs",
                                   str(args.runs), "--onnx", os.path.join(work, f"{name}_b{batch}.onnx")]
                        if round_index == 0 and other == "torch":
                            command += ["--reference-output", reference_out]
                        result = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
                        medians[other].append(json.loads(result.stdout.strip().splitlines()[-1])["median_ms"])
                reference = np.load(reference_out).astype(np.float64)
                ms = {runtime: float(np.median(values)) for runtime, values in medians.items()}
                error = {runtime: float(np.max(np.abs(np.load(path) - reference))) for runtime, path in logits.items()}
                rows.append((name, batch, threads, ms, error))
                parts = [f"ein {ms['ein']:.2f} ms"] + [
                    f"{label[other]} {ms[other]:.2f} ms (ein/{label[other]} {ms['ein'] / ms[other]:.2f})"
                    for other in others]
                rounds = "; ".join(label[runtime] + " " + " ".join(f"{value:.1f}" for value in values)
                                   for runtime, values in medians.items())
                errors = ", ".join(f"{label[runtime]} {value:.1e}" for runtime, value in error.items())
                print(f"{name} batch {batch} threads {threads}: {', '.join(parts)}; rounds (ms): {rounds}; "
                      f"max |logits - float64|: {errors}", flush=True)
    print()
    header = f"{'model':8} {'batch':>5} {'threads':>7} {'ein ms':>9}"
    for other in others:
        header += f" {other[:5] + ' ms':>9} {'ein/' + other[:5]:>10}"
    print(header + f" {'ein err':>9}" + "".join(f" {other[:5] + ' err':>9}" for other in others))
    for name, batch, threads, ms, error in rows:
        line = f"{name:8} {batch:5d} {threads:7d} {ms['ein']:9.2f}"
        for other in others:
            line += f" {ms[other]:9.2f} {ms['ein'] / ms[other]:10.2f}"
        print(line + f" {error['ein']:9.1e}" + "".join(f" {error[other]:9.1e}" for other in others))
    print("(err: max |logits - float64 PyTorch logits|)")

if __name__ == "__main__":
    sys.exit(main())
