#!/usr/bin/env bash
# One command for the CUDA benchmarks on a GPU machine (see bench/cuda/README.md):
#   bench/cuda/run_all.sh [BUILD_DIR]      (default build-cuda; needs nvcc, python3 with torch)
# Builds the runtime with the CUDA backend, the attention harness, then runs
# ein's attention (bf16, fp16) against torch SDPA (flash) and, when einc is
# available (EINC=path, default build/bin/einc), ViT-B/16 batch 64 against
# PyTorch eager and torch.compile. Results: JSON lines on stdout and, as
# attention.jsonl and vit.jsonl, in the folder the environment variable OUT
# names (default bench/cuda/results). Needs, besides the GPU: a driver for
# CUDA 13, the CUDA 13 toolkit (nvcc, cuBLASLt), CMake, Ninja and the build's
# other dependencies.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build-cuda}"
RESULTS="${OUT:-$ROOT/bench/cuda/results}"
mkdir -p "$RESULTS"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEIN_BUILD_COMPILER=OFF -DEIN_BUILD_BENCHMARKS=ON \
  -DEIN_BUILD_TESTS=OFF -DEIN_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target ein-run attention_bench
{
  "$BUILD/bin/attention_bench" --precision bf16
  "$BUILD/bin/attention_bench" --precision fp16
  python3 "$ROOT/bench/cuda/attention_torch.py" --dtype bf16
  python3 "$ROOT/bench/cuda/attention_torch.py" --dtype fp16
} | tee "$RESULTS/attention.jsonl"
EINC="${EINC:-$ROOT/build/bin/einc}"
if [ -x "$EINC" ]; then
  for precision in bf16 fp32; do
    python3 "$ROOT/bench/cuda/vit_cuda_vs_pytorch.py" --einc "$EINC" --ein-run "$BUILD/bin/ein-run" \
      --batch 64 --precision "$precision"
  done | tee "$RESULTS/vit.jsonl"
else
  echo "no einc at $EINC: ViT benchmark skipped (compile the artifact elsewhere or set EINC)" >&2
fi
