#!/usr/bin/env python3
"""conv1d/conv2d in ein against PyTorch eager (oneDNN), same weights, at the sizes
the models that use them run:

- Whisper-base's audio front end: conv1d 80 -> 512 (kernel 3, padding 1), GELU,
  conv1d 512 -> 512 (kernel 3, stride 2, padding 1), GELU, over 3000 frames;
- ConvNeXt-T's first-stage depthwise conv2d: 96 channels, 7x7, padding 3, 56x56;
- a dense 3x3 conv2d (64 -> 64, padding 1, 56x56), a ResNet stage's;
- the conformance case's whole module (tests/conformance/cases/convolutions_torch)
  at those sizes.

Times: medians over --runs after warm-up, --rounds alternating rounds, the median
of the rounds' medians; ein with `ein-run --bench RUNS --threads T`, torch under
inference_mode with torch.set_num_threads(T). Accuracy: ein's outputs against
torch in float64. Prints a table and `lscpu`'s model name.

  .venv-python/bin/python bench/convolutions.py --einc build/bin/einc --ein-run build/bin/ein-run
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vit_vs_pytorch import conformance_script, run_with_torch_env, time_runs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE_MODEL = os.path.join(ROOT, "tests", "conformance", "cases", "convolutions_torch", "model.ein")

WHISPER = """
input mel: f32[1, 80, 3000]
param w1: f32[512, 80, 3]
param b1: f32[512]
param w2: f32[512, 512, 3]
param b2: f32[512]
h = gelu(conv1d(mel, w1, b1, padding=1))
output y = gelu(conv1d(h, w2, b2, stride=2, padding=1))
"""
DEPTHWISE = """
input x: f32[1, 96, 56, 56]
param w: f32[96, 1, 7, 7]
param b: f32[96]
output y = conv2d(x, w, b, padding=3, groups=96)
"""
DENSE = """
input x: f32[1, 64, 56, 56]
param w: f32[64, 64, 3, 3]
param b: f32[64]
output y = conv2d(x, w, b, padding=1)
"""


def random_weights(shapes, seed):
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=generator) / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 10)
            for name, shape in shapes.items()}


def cases():
    """(name, model file or text, --dim overrides, weights, inputs, torch function of the inputs -> outputs)."""
    whisper = random_weights({"w1": (512, 80, 3), "b1": (512,), "w2": (512, 512, 3), "b2": (512,)}, 1)
    depthwise = random_weights({"w": (96, 1, 7, 7), "b": (96,)}, 2)
    dense = random_weights({"w": (64, 64, 3, 3), "b": (64,)}, 3)
    generator = torch.Generator().manual_seed(4)
    mel = torch.randn(1, 80, 3000, generator=generator)
    img96 = torch.randn(1, 96, 56, 56, generator=generator)
    img64 = torch.randn(1, 64, 56, 56, generator=generator)
    module, state = conformance_script("make_conv_case").model(mels=80, width=512, c=96)
    module64 = copy.deepcopy(module).double()

    def whisper_torch(w, mel):
        h = F.gelu(F.conv1d(mel, w["w1"], w["b1"], padding=1))
        return {"y": F.gelu(F.conv1d(h, w["w2"], w["b2"], stride=2, padding=1))}

    return [
        ("Whisper-base front end (2 conv1d, 3000 frames)", WHISPER, [], whisper, {"mel": mel},
         lambda w, x: whisper_torch(w, x["mel"])),
        ("ConvNeXt depthwise 7x7, 96 x 56 x 56", DEPTHWISE, [], depthwise, {"x": img96},
         lambda w, x: {"y": F.conv2d(x["x"], w["w"], w["b"], padding=3, groups=96)}),
        ("dense 3x3, 64 -> 64, 56 x 56", DENSE, [], dense, {"x": img64},
         lambda w, x: {"y": F.conv2d(x["x"], w["w"], w["b"], padding=1)}),
        ("the conformance module (all of the above kinds)", CASE_MODEL,
         ["b=1", "t=3000", "mels=80", "width=512", "c=96", "quarter=24", "s=56"], state,
         {"mel": mel, "img": img96},
         lambda w, x: (module64 if x["mel"].dtype == torch.float64 else module)(x["mel"], x["img"])),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run_with_torch_env()
    from safetensors.torch import save_file
    torch.set_num_threads(args.threads)
    work = tempfile.mkdtemp(prefix="conv_bench_")
    rows = []
    for index, (name, model, dims, weights, inputs, reference) in enumerate(cases()):
        source = model if os.path.exists(model) else os.path.join(work, f"model{index}.ein")
        if source != model:
            with open(source, "w") as f:
                f.write(model)
        weights_path = os.path.join(work, f"weights{index}.safetensors")
        save_file({k: v.contiguous() for k, v in weights.items()}, weights_path)
        artifact = os.path.join(work, f"model{index}.einb")
        subprocess.run([args.einc, source, "--weights", weights_path, "-o", artifact] +
                       [flag for dim in dims for flag in ("--dim", dim)], check=True)
        input_flags = []
        for input_name, value in inputs.items():
            path = os.path.join(work, f"{input_name}{index}.npy")
            np.save(path, value.numpy())
            input_flags += ["--input", f"{input_name}={path}"]
        out = os.path.join(work, f"out{index}")
        subprocess.run([args.ein_run, artifact, *input_flags, "--output-dir", out], check=True, capture_output=True)
        with torch.no_grad():
            exact = reference({k: v.double() for k, v in weights.items()}, {k: v.double() for k, v in inputs.items()})
        error = max(float(np.abs(np.load(os.path.join(out, f"{k}.npy")) - v.numpy()).max()) for k, v in exact.items())
        ein_times, torch_times = [], []
        for _ in range(args.rounds):
            text = subprocess.run([args.ein_run, artifact, *input_flags, "--threads", str(args.threads), "--bench",
                                   str(args.runs)], check=True, capture_output=True, text=True).stdout
            ein_times.append(float(re.search(r"median ([0-9.]+) ms", text).group(1)))
            with torch.inference_mode():
                torch_times.append(time_runs(lambda: reference(weights, inputs), args.runs)[0])
        rows.append((name, float(np.median(ein_times)), float(np.median(torch_times)), error))
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True).stdout.strip()
    print(f"conv1d/conv2d, fp32, {args.threads} threads, medians of {args.rounds} rounds x {args.runs} runs")
    print(cpu)
    print("| what | ein ms | torch eager ms | ein / torch | ein max err vs fp64 |")
    print("| --- | --- | --- | --- | --- |")
    for name, ein, torch_ms, error in rows:
        print(f"| {name} | {ein:.3f} | {torch_ms:.3f} | {ein / torch_ms:.2f} | {error:.1e} |")


if __name__ == "__main__":
    main()
