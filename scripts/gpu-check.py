#!/usr/bin/env python3
"""Checks the CUDA backend on a GPU machine with the kit scripts/gpu-kit.sh made.

Runs the CUDA kernel tests, then every conformance case at fp32, bf16 and fp16
with `ein-run --device cuda`, comparing each output with the PyTorch float64
results (the case's tolerances; bf16 and fp16 widen them to 2e-2 and 5e-3, as
runtime/src/cuda/README.md documents), then the attention benchmark against
torch SDPA and ViT-B/16 at batch 64 against PyTorch eager and torch.compile. Prints a summary; logs and JSON lines go to $OUT when set.
Needs python3 with numpy (and torch for the SDPA comparison)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

KIT = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT") or tempfile.mkdtemp()
os.makedirs(OUT, exist_ok=True)
WIDENED = {"fp32": 0.0, "bf16": 2e-2, "fp16": 5e-3}


def library_path():
    """Where libcublasLt may live there: the toolkit, or PyTorch's nvidia wheels."""
    places = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    try:
        import nvidia.cublas
        places += [os.path.join(path, "lib") for path in nvidia.cublas.__path__]
    except ImportError:
        pass
    return ":".join([p for p in places if os.path.isdir(p)] + [os.environ.get("LD_LIBRARY_PATH", "")])


os.environ["LD_LIBRARY_PATH"] = library_path()


def gtest_summary(output):
    """The '[  PASSED  ] N tests.' style lines of a GoogleTest run."""
    return "; ".join(line.strip() for line in output.splitlines()
                     if re.match(r"\[ +(PASSED|SKIPPED|FAILED) +\] \d+ tests?", line))


def run(command, log_name):
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:  # e.g. no nvidia-smi
        result = subprocess.CompletedProcess(command, 127, "", str(error))
    with open(os.path.join(OUT, log_name), "a") as log:
        log.write("$ " + " ".join(command) + "\n" + result.stdout + result.stderr + "\n")
    return result


def check_case(name, precision):
    case_dir = os.path.join(KIT, "cases", name)
    spec = json.load(open(os.path.join(case_dir, "case.json")))
    atol = max(spec["tolerance"]["atol"], WIDENED[precision])
    rtol = max(spec["tolerance"]["rtol"], WIDENED[precision])
    out_dir = tempfile.mkdtemp()
    command = [os.path.join(KIT, "bin", "ein-run"), os.path.join(case_dir, f"model_{precision}.einb"),
               "--device", "cuda", "--output-dir", out_dir]
    for input_name in spec["inputs"]:
        command += ["--input", f"{input_name}={os.path.join(case_dir, input_name + '.npy')}"]
    result = run(command, "conformance.log")
    if result.returncode != 0:
        return False, "ein-run failed: " + result.stderr.strip()[-300:]
    worst = []
    ok = True
    for output in spec["outputs"]:
        got = np.load(os.path.join(out_dir, output + ".npy")).astype(np.float64)
        want = np.load(os.path.join(case_dir, "expected", output + ".npy")).astype(np.float64)
        if got.shape != want.shape:
            return False, f"{output}: shape {got.shape} != {want.shape}"
        close = np.isclose(got, want, atol=atol, rtol=rtol, equal_nan=True)
        ok &= bool(close.all())
        worst.append(f"{output} max|diff| {np.nanmax(np.abs(got - want)) if got.size else 0:.3g}")
    return ok, ", ".join(worst)


def vit_benchmark(batch=64, runs=20):
    """ViT-B/16 images/s: ein (artifact refilled with random weights) against
    PyTorch eager and torch.compile on a timm-named model of the same shape."""
    import torch
    sys.path.insert(0, KIT)
    from vit_vs_pytorch import IMAGE, timm_weights, torch_vit
    work = tempfile.mkdtemp()
    np.save(os.path.join(work, "img.npy"), np.random.default_rng(1).standard_normal((batch, 3, IMAGE, IMAGE),
                                                                                    dtype=np.float32))
    for precision in ("fp32", "bf16"):
        stripped = os.path.join(KIT, "vit", f"vit_b16_batch64_{precision}.einb")
        size = int(open(stripped + ".weights_bytes").read())
        artifact = os.path.join(work, os.path.basename(stripped))
        with open(artifact, "wb") as out:
            out.write(open(stripped, "rb").read())
            out.write((np.random.default_rng(2).standard_normal(size // 4, dtype=np.float32) * 0.02).tobytes())
        result = run([os.path.join(KIT, "bin", "ein-run"), artifact, "--device", "cuda", "--input",
                      f"img={work}/img.npy", "--bench", str(runs)], "vit.log")
        found = re.search(r"median ([\d.]+) ms", result.stdout)
        median = float(found.group(1)) if found else float("nan")
        print(json.dumps({"impl": f"ein_cuda_{precision}", "batch": batch, "median_ms": median,
                          "images_per_s": round(batch / median * 1e3, 1)}))
        model = torch_vit(768, 12).cuda().eval()
        model.load_state_dict({k: torch.from_numpy(v) for k, v in timm_weights(768, seed=0).items()})
        dtype = None if precision == "fp32" else torch.bfloat16
        torch.backends.cuda.matmul.allow_tf32 = False
        x = torch.from_numpy(np.load(os.path.join(work, "img.npy"))).cuda()
        for name, module in (("eager", model), ("compile", torch.compile(model))):
            with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                for _ in range(5):
                    module(x)
                torch.cuda.synchronize()
                times = []
                for _ in range(runs):
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    module(x)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
            median = sorted(times)[len(times) // 2]
            print(json.dumps({"impl": f"torch_{name}_{precision}", "batch": batch, "median_ms": round(median, 3),
                              "images_per_s": round(batch / median * 1e3, 1)}))


def main():
    print("device:", run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], "nvidia-smi.log").stdout.strip())
    tests = run([os.path.join(KIT, "bin", "cuda_runtime_tests")], "cuda_runtime_tests.log")
    print("cuda_runtime_tests:", "exit", tests.returncode, "-", gtest_summary(tests.stdout))
    failures = 0
    for name in sorted(os.listdir(os.path.join(KIT, "cases"))):
        for precision in ("fp32", "bf16", "fp16"):
            ok, detail = check_case(name, precision)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} {precision}: {detail}")
    if "--no-bench" not in sys.argv:
        for precision in ("bf16", "fp16"):
            bench = run([os.path.join(KIT, "bin", "attention_bench"), "--precision", precision], "attention.log")
            print(bench.stdout.strip() or bench.stderr.strip()[-300:])
            torch_bench = run([sys.executable, os.path.join(KIT, "attention_torch.py"), "--dtype", precision],
                              "attention.log")
            print(torch_bench.stdout.strip() or torch_bench.stderr.strip()[-300:])
    if "--no-bench" not in sys.argv:
        vit_benchmark()
    print(f"{failures} conformance failures; logs in {OUT}")
    return 1 if failures or tests.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
