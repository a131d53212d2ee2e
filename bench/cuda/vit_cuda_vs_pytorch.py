#!/usr/bin/env python3
"""ViT-B/16 at batch 64 on the GPU: images/s of ein (einc --target cuda
[--precision P], ein-run --device cuda --bench N) against PyTorch eager and
torch.compile (same random timm-named weights; fp32, or autocast to bf16/fp16
for the reduced precisions). Reuses the model and weights of
bench/vit_vs_pytorch.py. Prints one JSON line per implementation and checks
that ein's logits match PyTorch's (fp32: 1e-3; bf16/fp16: 5e-2 relative to the
logits' scale)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from vit_vs_pytorch import MODEL, IMAGE, timm_weights, torch_vit  # noqa: E402


def time_torch(model, img, runs, dtype):
    import torch
    with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
        for _ in range(5):
            out = model(img)
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            model(img)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e3, out.float().cpu().numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build-cuda", "bin", "ein-run"))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()

    import numpy as np
    import torch
    from safetensors.numpy import save_file
    embed, heads = 768, 12
    work = tempfile.mkdtemp(prefix="ein_vit_cuda_")
    weights = timm_weights(embed, seed=0)
    save_file(weights, os.path.join(work, "w.safetensors"))
    img = np.random.default_rng(1).standard_normal((args.batch, 3, IMAGE, IMAGE)).astype(np.float32)
    np.save(os.path.join(work, "img.npy"), img)

    artifact = os.path.join(work, "vit_b16.einb")
    subprocess.run([args.einc, MODEL, "--weights", os.path.join(work, "w.safetensors"), "--dim", f"embed={embed}",
                    "--dim", f"heads={heads}", "--dim", f"batch={args.batch}", "--target", "cuda", "--precision",
                    args.precision, "-o", artifact], check=True)
    text = subprocess.run([args.ein_run, artifact, "--device", "cuda", "--input", f"img={work}/img.npy", "--bench",
                           str(args.runs), "--output-dir", os.path.join(work, "out")],
                          check=True, capture_output=True, text=True).stdout
    median = float(re.search(r"median ([\d.]+) ms", text).group(1))
    print(json.dumps({"impl": f"ein_cuda_{args.precision}", "batch": args.batch, "median_ms": median,
                      "images_per_s": round(args.batch / median * 1e3, 1)}), flush=True)
    ein_logits = np.load(os.path.join(work, "out", os.listdir(os.path.join(work, "out"))[0]))

    model = torch_vit(embed, heads).cuda().eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    x = torch.from_numpy(img).cuda()
    if args.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    eager_ms, torch_logits = time_torch(model, x, args.runs, dtype)
    print(json.dumps({"impl": f"torch_eager_{args.precision}", "batch": args.batch, "median_ms": round(eager_ms, 3),
                      "images_per_s": round(args.batch / eager_ms * 1e3, 1)}), flush=True)
    if not args.no_compile:
        compiled_ms, _ = time_torch(torch.compile(model), x, args.runs, dtype)
        print(json.dumps({"impl": f"torch_compile_{args.precision}", "batch": args.batch,
                          "median_ms": round(compiled_ms, 3), "images_per_s": round(args.batch / compiled_ms * 1e3, 1)}),
              flush=True)
    scale = max(1.0, float(np.abs(torch_logits).max()))
    error = float(np.abs(ein_logits - torch_logits).max()) / scale
    limit = 1e-3 if args.precision == "fp32" else 5e-2
    print(json.dumps({"logits_max_error_relative": error, "ok": error <= limit}), flush=True)


if __name__ == "__main__":
    main()
