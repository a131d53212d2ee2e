#!/usr/bin/env python3
"""The bf16 and int8 gemms per ISA table, side by side: runs ein_kernel_bench's
BM_GemmWeights (weights packed at load, cached) once per table with
EIN_CPU_ISA=<table> (each in its own process), the tables alternating for
--rounds rounds, and prints the median GFLOP/s (int8: GOP/s) of each shape,
thread count and table as a Markdown table, with the first table over each other.
On 1 thread the rate is per second of the benchmark thread's CPU time, so
that preemption on a shared machine does not count; on 2 threads it is per
second of wall time.

Shapes (m x k x n): ViT-S/16 at batch 1 and 8 (197 and 1576 tokens: qkv
384 -> 1152, fc1 384 -> 1536) and BERT-base at 8 x 128 tokens (fc1 768 ->
3072).

  bench/gemm_isa.py [--bench build/bin/ein_kernel_bench] [--tables amx,avx512bf16]
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(197, 384, 1152), (1576, 384, 1536), (1024, 768, 3072)]
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def run(bench, table, kind, shapes, threads, repetitions):
    names = "|".join(f"{m}/{k}/{n}/{t}" for m, k, n in shapes for t in threads)
    command = [bench, f"--benchmark_filter=BM_GemmWeights/{kind}_cached/({names})/real_time$", "--benchmark_format=json",
               f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    out = subprocess.run(command, check=True, capture_output=True, text=True,
                         env=dict(os.environ, EIN_CPU_ISA=table)).stdout
    result = {}
    for row in json.loads(out)["benchmarks"]:
        if row.get("aggregate_name") == "median" or (repetitions == 1 and row.get("run_type") == "iteration"):
            m, k, n, t = map(int, row["run_name"].split("/")[2:6])
            # 1 thread: per second of the benchmark thread's CPU time (a shared
            # machine's preemption left out); 2 threads: per second of wall time.
            seconds = (row["cpu_time"] if t == 1 else row["real_time"]) * UNITS[row["time_unit"]]
            result[(m, k, n, t)] = 2.0 * m * n * k / seconds * 1e-9
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=os.path.join(ROOT, "build", "bin", "ein_kernel_bench"))
    parser.add_argument("--bf16-tables", default="amx,avx512bf16")
    parser.add_argument("--int8-tables", default="amx,avx512vnni,avx2vnni")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3, help="benchmark repetitions per round")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    for kind, tables, unit in (("bf16", args.bf16_tables, "GFLOP/s"), ("int8", args.int8_tables, "GOP/s")):
        tables = tables.split(",")
        samples = {table: {} for table in tables}
        for _ in range(args.rounds):
            for table in tables:
                for key, value in run(args.bench, table, kind, SHAPES, threads, args.repetitions).items():
                    samples[table].setdefault(key, []).append(value)
        print(f"\n{kind} gemm, {unit} (median of {args.rounds} rounds), weights cached\n")
        print("| m x k x n | threads | " + " | ".join(tables) + " | " +
              " | ".join(f"{tables[0]}/{t}" for t in tables[1:]) + " |")
        print("|---" * (2 + 2 * len(tables) - 1) + "|")
        for m, k, n in SHAPES:
            for t in threads:
                medians = [statistics.median(samples[table].get((m, k, n, t), [float("nan")])) for table in tables]
                print(f"| {m} x {k} x {n} | {t} | " + " | ".join(f"{v:.0f}" for v in medians) + " | " +
                      " | ".join(f"{medians[0] / v:.2f}x" for v in medians[1:]) + " |")


if __name__ == "__main__":
    main()
