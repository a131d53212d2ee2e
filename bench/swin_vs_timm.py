#!/usr/bin/env python3
"""The Swin example (examples/models/swin_tiny_window4.ein) in ein, in timm eager
and in ONNX Runtime, same weights, batch 1 and 8.

timm's own SwinTransformer (depths (2, 2), heads (2, 4), patch 4) with random
weights, at the example's configuration (--img 32 --embed 32 --window 4) or a
larger one (default: --img 224 --embed 96 --window 7, Swin-T's first two stages);
einc compiles the example with --dim overrides. Times (medians over --runs, after
warm-up, --rounds alternating rounds, the median of the rounds' medians): ein with
`ein-run --bench RUNS --threads T`; timm under torch.inference_mode with
torch.set_num_threads(T) and PyTorch's best allocator/ISA settings (as
bench/vit_vs_pytorch.py); ONNX Runtime on timm's ONNX export (opset 17, all graph
optimisations, intra_op_num_threads=T). Accuracy: ein's logits against timm in
float64. Prints a table and `lscpu`'s model name.

Needs torch, timm, numpy, safetensors, onnx and onnxruntime, e.g. in a venv:
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install torch timm numpy safetensors onnx onnxruntime
  .venv-bench/bin/python bench/swin_vs_timm.py --einc build/bin/einc --ein-run build/bin/ein-run
"""
import argparse
import os
import re
import subprocess
import tempfile

import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vit_vs_pytorch import conformance_script, run_with_torch_env, time_runs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "models", "swin_tiny_window4.ein")


def ein_ms(ein_run, artifact, inputs, threads, runs):
    text = subprocess.run([ein_run, artifact, "--input", f"x={inputs}", "--threads", str(threads), "--bench",
                           str(runs)], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", text).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--img", type=int, default=224)
    parser.add_argument("--embed", type=int, default=96)
    parser.add_argument("--window", type=int, default=7)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run_with_torch_env()

    import onnxruntime as ort
    from safetensors.torch import save_file
    torch.set_num_threads(args.threads)
    config = dict(img_size=args.img, patch_size=4, embed_dim=args.embed, depths=(2, 2), num_heads=(2, 4),
                  window_size=args.window, num_classes=10)
    swin, state = conformance_script("make_swin_case").model(seed=0, config=config)
    work = tempfile.mkdtemp(prefix="swin_bench_")
    weights = os.path.join(work, "weights.safetensors")
    save_file({k: v.contiguous() for k, v in state.items()}, weights)
    exact = conformance_script("make_swin_case").model(seed=0, config=config)[0].double()
    rows = []
    for batch in args.batches:
        artifact = os.path.join(work, f"swin_b{batch}.einb")
        subprocess.run([args.einc, MODEL, "--weights", weights, "-o", artifact, "--dim", f"b={batch}",
                        "--dim", f"img={args.img}", "--dim", f"c0={args.embed}", "--dim", f"ws={args.window}"],
                       check=True)
        x = torch.randn(batch, 3, args.img, args.img, generator=torch.Generator().manual_seed(batch))
        inputs = os.path.join(work, f"x{batch}.npy")
        np.save(inputs, x.numpy())
        out = os.path.join(work, f"out{batch}")
        subprocess.run([args.ein_run, artifact, "--input", f"x={inputs}", "--output-dir", out], check=True,
                       capture_output=True)
        with torch.no_grad():
            reference = exact(x.double()).numpy()
        error = float(np.abs(np.load(os.path.join(out, "logits.npy")) - reference).max())
        onnx_path = os.path.join(work, f"swin_b{batch}.onnx")
        torch.onnx.export(swin, (x,), onnx_path, opset_version=17, dynamo=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # ORT's pool spins between runs by default, which would take the cores
        # from the runtimes timed after it.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        feed = {session.get_inputs()[0].name: x.numpy()}
        ort_error = float(np.abs(session.run(None, feed)[0] - reference).max())
        timings = {"ein": [], "timm": [], "ort": []}
        for _ in range(args.rounds):
            timings["ein"].append(ein_ms(args.ein_run, artifact, inputs, args.threads, args.runs))
            with torch.inference_mode():
                timings["timm"].append(time_runs(lambda: swin(x), args.runs)[0])
            timings["ort"].append(time_runs(lambda: session.run(None, feed), args.runs)[0])
        rows.append((batch, *(float(np.median(timings[k])) for k in ("ein", "timm", "ort")), error, ort_error))
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True).stdout.strip()
    print(f"Swin (timm SwinTransformer, img {args.img}, embed {args.embed}, window {args.window}, depths (2, 2), "
          f"heads (2, 4)), {args.threads} threads, medians of {args.rounds} rounds x {args.runs} runs")
    print(cpu)
    print("| batch | ein ms | timm eager ms | ONNX Runtime ms | ein / timm | ein / ORT | ein max err vs fp64 | ORT max err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for batch, ein, timm_ms, ort_ms, error, ort_error in rows:
        print(f"| {batch} | {ein:.3f} | {timm_ms:.3f} | {ort_ms:.3f} | {ein / timm_ms:.2f} | {ein / ort_ms:.2f} | "
              f"{error:.1e} | {ort_error:.1e} |")


if __name__ == "__main__":
    main()
