#!/usr/bin/env bash
# Packs what a lent GPU machine needs to check the CUDA backend. That machine
# has nvcc, CMake and PyTorch but none of our Debian build dependencies (and
# no network), so everything is built here:
#   - bin/: ein-run, ein-inspect and cuda_runtime_tests built with
#     EIN_ENABLE_CUDA=ON, and the attention benchmark (sm_80, sm_90);
#   - cases/: every conformance case compiled with einc --target cuda at fp32,
#     bf16 and fp16, with its inputs, expected outputs and case.json;
#   - vit/: ViT-B/16 at batch 64 for cuda (fp32, bf16) without its weights;
#   - check.py, attention_torch.py, vit_vs_pytorch.py: what runs there.
# Usage, here (after a full build, for einc):
#   scripts/gpu-kit.sh                 # writes gpu-kit/ (git-ignored)
# then with the device tool: command "python3 gpu-kit/check.py", carry ["gpu-kit"].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit=${1:-$root/gpu-kit}
build=${EIN_GPU_BUILD_DIR:-$root/build-gpu}
einc=${EINC:-$root/build/bin/einc}
# The repository's conformance cases, and those of $EIN_CONFORMANCE_DIR if set (same-named ones replace ours).
conformance_dirs=("$root/tests/conformance/cases" ${EIN_CONFORMANCE_DIR:+"$EIN_CONFORMANCE_DIR"})
[[ -x "$einc" ]] || { echo "gpu-kit: no einc at $einc (build the compiler first, or set EINC)" >&2; exit 1; }

# libstdc++ and libgcc linked in: the device image need only have glibc >= 2.34.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEIN_BUILD_COMPILER=OFF \
  -DEIN_BUILD_BENCHMARKS=OFF -DEIN_ENABLE_CUDA=ON -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" --target ein-run ein-inspect cuda_runtime_tests

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/cases"
cp "$build/bin/ein-run" "$build/bin/ein-inspect" "$build/bin/cuda_runtime_tests" "$kit/bin/"
nvcc -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -Xcompiler -static-libstdc++,-static-libgcc -I"$root/runtime/src" "$root/bench/cuda/attention_bench.cu" \
  "$build/lib/libein_runtime_cuda.a" -lcublasLt -o "$kit/bin/attention_bench"
cp "$root/scripts/gpu-check.py" "$kit/check.py"
cp "$root/bench/cuda/attention_torch.py" "$root/bench/vit_vs_pytorch.py" "$kit/"

# ViT-B/16 at batch 64 for the images/s benchmark. Its weights (~350 MB) are
# too large to carry: the artifact travels without its weight segment, which
# check.py refills with random values there (only the speed is measured; the
# conformance cases check the numbers).
mkdir -p "$kit/vit"
for precision in fp32 bf16; do
  artifact="$kit/vit/vit_b16_batch64_$precision.einb"
  "$einc" "$root/examples/models/vit_small_patch16_224.ein" --random-weights 1 --dim embed=768 --dim heads=12 \
    --dim batch=64 --target cuda --precision "$precision" -o "$artifact"
  weights=$("$build/bin/ein-inspect" "$artifact" --json | python3 -c "import json, sys; print(json.load(sys.stdin)['weights_bytes'])")
  truncate -s "-$weights" "$artifact"
  echo "$weights" > "$artifact.weights_bytes"
done

for folder in "${conformance_dirs[@]}"; do
  for dir in "$folder"/*/; do
    name=$(basename "$dir")
    [[ -f "$dir/case.json" ]] || continue
    rm -rf "$kit/cases/$name"
    mkdir -p "$kit/cases/$name"
    cp "$dir"/case.json "$dir"/*.npy "$kit/cases/$name/"
    cp -r "$dir/expected" "$kit/cases/$name/"
    for precision in fp32 bf16 fp16; do
      "$einc" "$dir/model.ein" --weights "$dir/weights.safetensors" --target cuda --precision "$precision" \
        -o "$kit/cases/$name/model_$precision.einb"
    done
  done
done
du -sh "$kit"
