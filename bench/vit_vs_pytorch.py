#!/usr/bin/env python3
"""ViT-S/16 and ViT-B/16 in ein and in PyTorch eager, same weights, one run.

Writes random weights under timm's state_dict names to a .safetensors file,
compiles examples/models/vit_small_patch16_224.ein with them (einc --weights;
ViT-B via --dim embed=768 --dim heads=12, batch via --dim batch=N), checks
that ein's logits match PyTorch's, then times both: ein with
`ein-run --bench RUNS --threads T`, PyTorch with a hand-written timm-named ViT
(F.scaled_dot_product_attention, as timm uses) under inference_mode with
torch.set_num_threads(T) and its best allocator/ISA settings. Prints both
medians and ein's time over PyTorch's (< 1: ein is faster). ein and PyTorch
alternate for --rounds rounds (shared machines drift over minutes); each
figure is the median of the rounds' medians. Accuracy: both sets of logits
against the same PyTorch model run in float64.

Needs numpy, safetensors and torch, e.g. in a venv (the build and the tests
never need them):
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install numpy safetensors torch   # or torch from the CPU index
  .venv-bench/bin/python bench/vit_vs_pytorch.py --einc build/bin/einc --ein-run build-kernels/bin/ein-run
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
# PyTorch's best CPU settings (large allocations stay mapped, AVX-512 kernels).
TORCH_ENV = {"MALLOC_MMAP_THRESHOLD_": "67108864", "MALLOC_TRIM_THRESHOLD_": "4294967296",
             "ATEN_CPU_CAPABILITY": "avx512"}


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


def torch_worker(args):
    """Times PyTorch in this (fresh) process: prints one JSON line."""
    import time
    import numpy as np
    import torch
    from safetensors.torch import load_file
    torch.set_num_threads(int(args.threads))
    model = torch_vit(args.embed, args.heads).eval()
    model.load_state_dict(load_file(args.weights))
    img = torch.from_numpy(np.load(args.input))
    times = []
    with torch.inference_mode():
        logits = model(img)
        for _ in range(5):
            model(img)
        for _ in range(args.runs):
            start = time.perf_counter()
            model(img)
            times.append((time.perf_counter() - start) * 1e3)
    np.save(args.output, logits.numpy())
    if args.reference_output:
        with torch.inference_mode():
            np.save(args.reference_output, model.double()(img.double()).numpy())
    times.sort()
    print(json.dumps({"median_ms": times[len(times) // 2], "min_ms": times[0]}))


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
    parser.add_argument("--rounds", type=int, default=3, help="ein and PyTorch alternate this many times")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--embed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--heads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--reference-output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args)

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
                torch_out = os.path.join(out_dir, "torch_logits.npy")
                reference_out = os.path.join(out_dir, "float64_logits.npy")
                env = dict(os.environ, **TORCH_ENV, OMP_NUM_THREADS=str(threads))
                ein_medians, torch_medians = [], []
                for round_index in range(args.rounds):
                    ein_medians.append(run_ein(args.ein_run, artifact, img, threads, args.runs, out_dir)[0])
                    command = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--embed",
                               str(cfg["embed"]), "--heads", str(cfg["heads"]), "--weights", weights, "--input", img,
                               "--output", torch_out, "--threads", str(threads), "--runs", str(args.runs)]
                    if round_index == 0:
                        command += ["--reference-output", reference_out]
                    worker = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
                    torch_medians.append(json.loads(worker.stdout.strip().splitlines()[-1])["median_ms"])
                ein_ms, torch_ms = float(np.median(ein_medians)), float(np.median(torch_medians))
                reference = np.load(reference_out).astype(np.float64)
                ein_error = float(np.max(np.abs(np.load(os.path.join(out_dir, "logits.npy")) - reference)))
                torch_error = float(np.max(np.abs(np.load(torch_out) - reference)))
                rows.append((name, batch, threads, ein_ms, torch_ms, ein_error, torch_error))
                rounds = " ".join(f"{e:.1f}/{t:.1f}" for e, t in zip(ein_medians, torch_medians))
                print(f"{name} batch {batch} threads {threads}: ein median {ein_ms:.2f} ms, PyTorch median "
                      f"{torch_ms:.2f} ms, ein/PyTorch {ein_ms / torch_ms:.2f} (rounds ein/torch ms: {rounds}); "
                      f"max |logits - float64|: ein {ein_error:.1e}, PyTorch {torch_error:.1e}", flush=True)
    print()
    print(f"{'model':8} {'batch':>5} {'threads':>7} {'ein ms':>9} {'torch ms':>9} {'ein/torch':>9} "
          f"{'ein err':>9} {'torch err':>9}")
    for name, batch, threads, ein_ms, torch_ms, ein_error, torch_error in rows:
        print(f"{name:8} {batch:5d} {threads:7d} {ein_ms:9.2f} {torch_ms:9.2f} {ein_ms / torch_ms:9.2f} "
              f"{ein_error:9.1e} {torch_error:9.1e}")
    print("(err: max |logits - float64 PyTorch logits|)")


if __name__ == "__main__":
    sys.exit(main())
