#!/usr/bin/env python3
"""Top-1 agreement of a bf16 artifact with its fp32 twin (CPU, einc --precision bf16).

Compiles examples/models/vit_small_patch16_224.ein (ViT-S/16; ViT-B/16 with
--vit-b) at batch 8 twice from the same random weights (einc --random-weights
SEED), fp32 and bf16, runs both on the same random images (ein-run
--random-inputs 1..N/8, .npy outputs) and prints how many images get the
same top-1 class, the largest logit difference relative to the largest fp32
logit, and the median gap between the fp32 top-1 and top-2 logits (what a
difference has to overcome to change a class). Random weights, not a trained
model: its logits are small and close together, which makes agreement harder,
not easier. Needs numpy:
  .venv-bench/bin/python bench/bf16_agreement.py --einc build/bin/einc --ein-run build/bin/ein-run
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "models", "vit_small_patch16_224.ein")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--images", type=int, default=64, help="a multiple of 8")
    parser.add_argument("--seed", type=int, default=1, help="the random weights")
    parser.add_argument("--vit-b", action="store_true", help="ViT-B/16 instead of ViT-S/16")
    args = parser.parse_args()
    dims = ["--dim", "batch=8"] + (["--dim", "embed=768", "--dim", "heads=12"] if args.vit_b else [])
    with tempfile.TemporaryDirectory() as work:
        logits = {}
        for precision in ("fp32", "bf16"):
            artifact = os.path.join(work, f"{precision}.einb")
            subprocess.run([args.einc, MODEL, "--random-weights", str(args.seed), "--precision", precision, "-o",
                            artifact] + dims, check=True)
            batches = []
            for batch in range(args.images // 8):
                out = os.path.join(work, f"{precision}_{batch}")
                subprocess.run([args.ein_run, artifact, "--random-inputs", str(batch + 1), "--output-dir", out],
                               check=True, stdout=subprocess.DEVNULL)
                batches.append(np.load(os.path.join(out, "logits.npy")).astype(np.float64))
            logits[precision] = np.concatenate(batches)
    f32, bf16 = logits["fp32"], logits["bf16"]
    agree = int((f32.argmax(1) == bf16.argmax(1)).sum())
    top2 = np.sort(f32, 1)[:, -2:]
    print(f"top-1 agreement {agree}/{len(f32)} ({100.0 * agree / len(f32):.1f}%); "
          f"max |bf16 - fp32| / max |fp32| = {np.abs(bf16 - f32).max() / np.abs(f32).max():.3g}; "
          f"median fp32 top-1 - top-2 gap {np.median(top2[:, 1] - top2[:, 0]):.3g} "
          f"(logits within +-{np.abs(f32).max():.3g})")


if __name__ == "__main__":
    main()
