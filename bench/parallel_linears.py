#!/usr/bin/env python3
"""Horizontal GEMM fusion (ein-fuse-parallel-linears): the same models compiled by an einc
without the pass (--before, e.g. a build of main) and by this build's einc, side by side.

Models (random weights, einc --random-weights 1), at fp32 / bf16 / int8:
  BERT-style encoder: examples/models/bert_encoder.ein (4 layers; q/k/v linears with biases)
    at MiniLM-L12 widths (--dim c=384 h=12 d=32 f=1536); latency of (batch, tokens) = (8, 128)
    and (1, 16): `ein-run --random-inputs 1 --dim b=B --dim t=T --bench N`, its median.
  Llama decoder: examples/models/llama_decoder.ein (q/k/v appended to the cache; SwiGLU gate/up)
    at hidden 768, 12 query / 4 key-value heads of 64, SwiGLU 2048, vocab 32000, 4 layers;
    `ein-run --generate STEPS --prompt-ids (128 ids)`: prefill and decode tokens/s.
Both artifacts run on this build's ein-run (the runtime reads either). Rounds alternate the two
compilers; each figure is the median over rounds, and the best round (the least disturbed by
other load: min latency, max tokens/s); ratios are after / before (latency: < 1 is faster;
tokens/s: > 1 is faster). Prints `lscpu`'s model name with the table.

Run:  python3 bench/parallel_linears.py --before BEFORE/build/bin/einc [--rounds 5] [--threads 2]
      (BEFORE: a build of a commit without the pass, e.g. a `git worktree` of main built with
      scripts/build.sh)

Results (Intel(R) Xeon(R) Processor, family 6 model 207 (Sapphire/Emerald Rapids class, AMX), 2 cores
shared with 5 other jobs building (load average 5-18), 2026-11-26, 5 rounds; before = main's einc):
                          precision  before   after  after/before   best before  best after  ratio
  bert (8,128) ms              fp32   197.4   193.3     0.98           120.7       120.6     1.00
  bert (1,16) ms               fp32   3.111   2.671     0.86           1.955       2.106     1.08
  llama prefill128 tok/s       fp32   657.0   678.1     1.03           781.0       756.1     0.97
  llama decode tok/s           fp32    29.8    28.1     0.94            40.0        40.1     1.00
  bert (8,128) ms              bf16   358.0   348.2     0.97           325.0       287.8     0.89
  bert (1,16) ms               bf16   7.801   3.884     0.50           2.191       3.359     1.53
  llama prefill128 tok/s       bf16   403.1   443.6     1.10           491.7       504.4     1.03
  llama decode tok/s           bf16    40.6    45.2     1.11            45.3        46.4     1.02
  bert (8,128) ms              int8   125.1   115.1     0.92            72.1        97.1     1.35
  bert (1,16) ms               int8   1.054   1.075     1.02           0.993       0.786     0.79
  llama prefill128 tok/s       int8  1500.8  1639.5     1.09          1635.9      2111.7     1.29
  llama decode tok/s           int8    93.2    99.7     1.07           214.0       271.7     1.27
Three such runs swung by up to +-20-50% in either direction per row: on that machine the
difference is within the noise (no consistent loss; medians mostly slightly ahead). A quiet
machine is needed to size the gain; the step counts are exact: 24 -> 16 gemms (BERT, 4 layers),
16 -> 10 (Llama, 2 layers).
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EINC = os.path.join(ROOT, "build", "bin", "einc")
EIN_RUN = os.path.join(ROOT, "build", "bin", "ein-run")
BERT = os.path.join(ROOT, "examples", "models", "bert_encoder.ein")
LLAMA = os.path.join(ROOT, "examples", "models", "llama_decoder.ein")
BERT_DIMS = ["c=384", "h=12", "d=32", "f=1536"]
LLAMA_DIMS = ["vocab=32000", "hidden=768", "heads=12", "kv_heads=4", "head_dim=64", "inter=2048", "layers=4"]
PRECISIONS = ["fp32", "bf16", "int8"]
SHAPES = [(8, 128), (1, 16)]


def cpu_model():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def compile_model(einc, model, dims, precision, output):
    command = [einc, model, "--random-weights", "1", "--precision", precision, "-o", output]
    for dim in dims:
        command += ["--dim", dim]
    subprocess.run(command, check=True)


def bert_median_ms(artifact, batch, tokens, runs, threads):
    out = subprocess.run([EIN_RUN, artifact, "--random-inputs", "1", "--dim", f"b={batch}", "--dim", f"t={tokens}",
                          "--bench", str(runs), "--threads", str(threads)], capture_output=True, text=True, check=True)
    return float(re.search(r"median ([0-9.]+) ms", out.stdout).group(1)), float(re.search(r"min ([0-9.]+) ms", out.stdout).group(1))


def llama_tokens_per_s(artifact, prompt, steps, threads):
    ids = ",".join(str(1 + (i * 37) % 31999) for i in range(prompt))
    out = subprocess.run([EIN_RUN, artifact, "--generate", str(steps), "--prompt-ids", ids, "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    prefill = float(re.search(r"prefill: .*\(([0-9.]+) tokens/s\)", out.stdout).group(1))
    decode = float(re.search(r"decode: .*\(([0-9.]+) tokens/s\)", out.stdout).group(1))
    return prefill, decode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="an einc without ein-fuse-parallel-linears")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20, help="ein-run --bench runs per encoder measurement")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    workdir = args.workdir or tempfile.mkdtemp(prefix="parallel_linears_")
    os.makedirs(workdir, exist_ok=True)
    compilers = {"before": args.before, "after": EINC}
    artifacts = {}
    for name, einc in compilers.items():
        for precision in precisions:
            for model, path, dims in (("bert", BERT, BERT_DIMS), ("llama", LLAMA, LLAMA_DIMS)):
                artifact = os.path.join(workdir, f"{model}-{precision}-{name}.einb")
                compile_model(einc, path, dims, precision, artifact)
                artifacts[(model, precision, name)] = artifact

    results = {}  # (row, precision, name) -> [values]
    best = {}  # the same, the best round: min latency or max tokens/s
    for round_index in range(args.rounds):
        order = list(compilers) if round_index % 2 == 0 else list(reversed(list(compilers)))
        for precision in precisions:
            for name in order:
                for batch, tokens in SHAPES:
                    value, fastest = bert_median_ms(artifacts[("bert", precision, name)], batch, tokens, args.runs,
                                                    args.threads)
                    results.setdefault((f"bert ({batch},{tokens}) ms", precision, name), []).append(value)
                    best.setdefault((f"bert ({batch},{tokens}) ms", precision, name), []).append(fastest)
                prefill, decode = llama_tokens_per_s(artifacts[("llama", precision, name)], args.prompt, args.steps,
                                                     args.threads)
                results.setdefault((f"llama prefill{args.prompt} tok/s", precision, name), []).append(prefill)
                results.setdefault((f"llama decode tok/s", precision, name), []).append(decode)
                for key, value in (((f"llama prefill{args.prompt} tok/s", precision, name), prefill),
                                   ((f"llama decode tok/s", precision, name), decode)):
                    best.setdefault(key, []).append(-value)

    print(f"CPU: {cpu_model()}; {args.threads} threads; {args.rounds} rounds, medians")
    print(f"{'':28} {'precision':>9} {'before':>10} {'after':>10} {'after/before':>13}"
          f" {'best before':>12} {'best after':>11} {'after/before':>13}")
    rows = []
    for (row, precision, name) in results:
        if (row, precision) not in rows:
            rows.append((row, precision))
    for row, precision in rows:
        before = statistics.median(results[(row, precision, "before")])
        after = statistics.median(results[(row, precision, "after")])
        best_before = abs(min(best[(row, precision, "before")]))
        best_after = abs(min(best[(row, precision, "after")]))
        print(f"{row:28} {precision:>9} {before:10.3f} {after:10.3f} {after / before:13.3f}"
              f" {best_before:12.3f} {best_after:11.3f} {best_after / best_before:13.3f}")


if __name__ == "__main__":
    main()
