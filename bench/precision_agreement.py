#!/usr/bin/env python3
"""Accuracy of reduced-precision CPU artifacts (einc --precision bf16|int8) against fp32.

ViT-S/16 (examples/models/vit_small_patch16_224.ein; ViT-B/16 with --vit-b) at
batch 8, compiled from the same random weights (einc --random-weights SEED) at
fp32 and at each precision, runs on the same random images (ein-run
--random-inputs 1..N/8): how many images get the same top-1 class, the largest
logit difference relative to the largest fp32 logit, and the median gap
between the fp32 top-1 and top-2 logits (what a difference has to overcome to
change a class). Random weights, not a trained model: its logits are small
and close together, which makes agreement harder, not easier.

A MiniLM-sized BERT encoder (examples/models/bert_encoder.ein at c=384, 12
heads, f=1536, vocabulary 30522; 4 layers) on random ids at (8, 128) with a
random padding tail: the cosine similarity of each sentence embedding with
fp32's (the minimum and the mean over the batch).

Targets (issue 20): ViT top-1 agreement bf16 >= 99%, int8 >= 97%; embedding
cosine bf16 >= 0.999, int8 >= 0.99. Needs numpy:
  .venv-bench/bin/python bench/precision_agreement.py --einc build/bin/einc --ein-run build/bin/ein-run
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIT = os.path.join(ROOT, "examples", "models", "vit_small_patch16_224.ein")
BERT = os.path.join(ROOT, "examples", "models", "bert_encoder.ein")
MINILM = ["--dim", "c=384", "--dim", "h=12", "--dim", "d=32", "--dim", "f=1536", "--dim", "vocab=30522"]


def compile_model(args, model, precision, dims, work, name):
    artifact = os.path.join(work, f"{name}_{precision}.einb")
    subprocess.run([args.einc, model, "--random-weights", str(args.seed), "--precision", precision, "-o", artifact]
                   + dims, check=True)
    return artifact


def run(args, artifact, out, inputs):
    command = [args.ein_run, artifact, "--output-dir", out]
    command += inputs if isinstance(inputs, list) else ["--random-inputs", str(inputs)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def vit(args, work, precisions):
    dims = ["--dim", "batch=8"] + (["--dim", "embed=768", "--dim", "heads=12"] if args.vit_b else [])
    logits = {}
    for precision in ("fp32",) + precisions:
        artifact = compile_model(args, VIT, precision, dims, work, "vit")
        batches = []
        for batch in range(args.images // 8):
            out = os.path.join(work, f"vit_{precision}_{batch}")
            run(args, artifact, out, batch + 1)
            batches.append(np.load(os.path.join(out, "logits.npy")).astype(np.float64))
        logits[precision] = np.concatenate(batches)
    f32 = logits["fp32"]
    top2 = np.sort(f32, 1)[:, -2:]
    for precision in precisions:
        other = logits[precision]
        agree = int((f32.argmax(1) == other.argmax(1)).sum())
        print(f"ViT {'B' if args.vit_b else 'S'}/16 {precision}: top-1 agreement {agree}/{len(f32)} "
              f"({100.0 * agree / len(f32):.1f}%); max |{precision} - fp32| / max |fp32| = "
              f"{np.abs(other - f32).max() / np.abs(f32).max():.3g}; median fp32 top-1 - top-2 gap "
              f"{np.median(top2[:, 1] - top2[:, 0]):.3g} (logits within +-{np.abs(f32).max():.3g})")


def encoder(args, work, precisions):
    rng = np.random.default_rng(args.seed)
    batch, tokens = 8, 128
    ids = rng.integers(0, 30522, (batch, tokens)).astype(np.int32)
    mask = np.ones((batch, tokens), np.int32)
    for row in range(batch):
        mask[row, tokens - int(rng.integers(0, tokens // 2)):] = 0
    np.save(os.path.join(work, "ids.npy"), ids)
    np.save(os.path.join(work, "mask.npy"), mask)
    inputs = ["--input", f"ids={os.path.join(work, 'ids.npy')}", "--input", f"mask={os.path.join(work, 'mask.npy')}"]
    embeddings = {}
    for precision in ("fp32",) + precisions:
        artifact = compile_model(args, BERT, precision, MINILM, work, "bert")
        out = os.path.join(work, f"bert_{precision}")
        run(args, artifact, out, inputs)
        embeddings[precision] = np.load(os.path.join(out, "sentence.npy")).astype(np.float64)
    f32 = embeddings["fp32"]
    for precision in precisions:
        other = embeddings[precision]
        cosine = (f32 * other).sum(1) / (np.linalg.norm(f32, axis=1) * np.linalg.norm(other, axis=1))
        print(f"MiniLM-sized encoder {precision}: sentence embedding cosine to fp32 min {cosine.min():.6f}, "
              f"mean {cosine.mean():.6f} ({batch} x {tokens} tokens, padded)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--precision", action="append", choices=["bf16", "int8"],
                        help="repeatable; default both")
    parser.add_argument("--images", type=int, default=64, help="a multiple of 8")
    parser.add_argument("--seed", type=int, default=1, help="the random weights")
    parser.add_argument("--vit-b", action="store_true", help="ViT-B/16 instead of ViT-S/16")
    args = parser.parse_args()
    precisions = tuple(args.precision or ["bf16", "int8"])
    with tempfile.TemporaryDirectory() as work:
        vit(args, work, precisions)
        encoder(args, work, precisions)


if __name__ == "__main__":
    main()
