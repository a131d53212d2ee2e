#!/usr/bin/env python3
"""Ranged dims against fixed shapes (issue 13): one artifact compiled with
ranged dims against a static artifact compiled for each shape, run side by
side by the same ein-run, alternating, so load changes hit both alike.

  python3 bench/dynamic_vs_static.py [--bin build/bin] [--runs 30] [--rounds 3]

Prints, per model and shape, the median latency of each artifact and their
ratio; then the artifacts' sizes and the peak resident memory of one process
that serves every shape with the ranged artifact against one that holds the
static artifacts it replaces (run through the Python package when it is
importable, e.g. from .venv-python; skipped otherwise).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# model file, ranged dims, extra fixed dims, shapes (dim values) to time
CASES = [
    ("ViT-S/16", "vit_small_patch16_224.ein", {"batch": (1, 8)}, {}, [{"batch": 1}, {"batch": 8}]),
    ("BERT-style encoder", "bert_encoder.ein", {"b": (1, 16), "t": (1, 512)}, {"positions": 512},
     [{"b": 1, "t": 16}, {"b": 8, "t": 128}, {"b": 1, "t": 512}]),
]


def dim_flags(dims):
    flags = []
    for name, value in dims.items():
        text = f"{value[0]}..{value[1]}" if isinstance(value, tuple) else str(value)
        flags += ["--dim", f"{name}={text}"]
    return flags


def compile_model(binaries, model, dims, output):
    subprocess.run([os.path.join(binaries, "einc"), os.path.join(ROOT, "examples", "models", model), "-o", output,
                    "--random-weights", "1"] + dim_flags(dims), check=True)


def median_ms(binaries, artifact, shape, runs):
    """ein-run's median latency over `runs` runs at `shape` (random inputs)."""
    command = [os.path.join(binaries, "ein-run"), artifact, "--random-inputs", "1", "--bench", str(runs)]
    for name, value in shape.items():
        command += ["--dim", f"{name}={value}"]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", text).group(1))


SERVE = """
import resource, sys
import numpy as np
import ein
models = [ein.load(path) for path in sys.argv[2:]]
shapes = eval(sys.argv[1])
rng = np.random.default_rng(0)
for model, shape in zip(models * len(shapes) if len(models) == 1 else models, shapes):
    inputs = {}
    for info in model.inputs:
        size = [s if isinstance(s, int) else eval(s, {}, dict(shape)) for s in info.shape]
        bound = info.id_bound or 2
        inputs[info.name] = (rng.integers(0, bound, size) if info.dtype.startswith("i") else
                             rng.standard_normal(size)).astype(info.numpy_dtype)
    model.run(inputs)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_mb(artifacts, shapes):
    """Peak RSS of one Python process that loads `artifacts` and runs `shapes`."""
    text = subprocess.run([sys.executable, "-c", SERVE, repr(shapes)] + artifacts, check=True, capture_output=True,
                          text=True).stdout
    return int(text.strip()) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; ein-run --bench {args.runs}, {args.rounds} alternating rounds, "
          "medians of the rounds' medians\n")
    try:
        import ein  # noqa: F401
        have_python = True
    except ImportError:
        have_python = False
    with tempfile.TemporaryDirectory() as work:
        for title, model, ranged, fixed, shapes in CASES:
            dynamic = os.path.join(work, "ranged.einb")
            compile_model(args.bin, model, {**fixed, **ranged}, dynamic)
            statics = []
            print(f"{title}: ranged {', '.join(f'{n} = {lo}..{hi}' for n, (lo, hi) in ranged.items())}")
            print(f"  {'shape':<16}{'static ms':>12}{'ranged ms':>12}{'ranged/static':>16}")
            for index, shape in enumerate(shapes):
                static = os.path.join(work, f"static{index}.einb")
                compile_model(args.bin, model, {**fixed, **shape}, static)
                statics.append(static)
                times = {"static": [], "ranged": []}
                for _ in range(args.rounds):
                    times["static"].append(median_ms(args.bin, static, {}, args.runs))
                    times["ranged"].append(median_ms(args.bin, dynamic, shape, args.runs))
                s, d = statistics.median(times["static"]), statistics.median(times["ranged"])
                label = ", ".join(f"{n}={v}" for n, v in shape.items())
                print(f"  {label:<16}{s:>12.3f}{d:>12.3f}{d / s:>16.3f}")
            static_bytes = sum(os.path.getsize(path) for path in statics)
            print(f"  artifact bytes: ranged {os.path.getsize(dynamic):,}, the {len(statics)} static ones "
                  f"{static_bytes:,}")
            if have_python:
                print(f"  peak RSS serving every shape: ranged {peak_rss_mb([dynamic], shapes):.1f} MB, "
                      f"static artifacts {peak_rss_mb(statics, shapes):.1f} MB")
            print()


if __name__ == "__main__":
    main()
