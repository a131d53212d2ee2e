#!/usr/bin/env bash
# The GPU kit's fallback (scripts/gpu-kit.sh copies it into gpu-kit/): builds
# ein-run, ein-inspect, cuda_runtime_tests and attention_bench from
# gpu-kit/src on a machine whose glibc is older than the prebuilt bin/ needs.
# Needs CMake, a C++20 compiler and nvcc; nothing else (src/deps carries the
# libraries). Only this machine's GPU architecture is built, which takes about
# 2-3 minutes on 16 cores.
#   gpu-kit/build-from-source.sh [BUILD_DIR]      (default gpu-kit/build, beside src/)
# The binaries land in BUILD_DIR/bin, the CUDA backend they load in BUILD_DIR/lib. EIN_KIT_CUDA_ARCH=90 builds for sm_90
# where no GPU is present to ask (the default, native, needs one);
# EIN_KIT_LIBRARY_DIRS (colon-separated, check.py sets it) is where to look
# for libcublasLt when the toolkit has none.
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
build=${1:-$kit/build}
arch=${EIN_KIT_CUDA_ARCH:-native}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$kit/src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch"
cmake --build "$build" -j"$(nproc)" --target ein-run ein-inspect cuda_runtime_tests ein_cuda attention_bench
echo "build-from-source: $build/bin"
