#!/usr/bin/env bash
# Packs what a GPU machine needs to check the CUDA backend without building ein
# there: the GPU machine needs an NVIDIA driver for CUDA 13, cuBLASLt 13 and
# python3 with numpy and PyTorch (gpu-check.py lists it all), but none of our
# Debian build dependencies and no network access. Everything is built or
# gathered on the build machine, with the full build's dependencies, the CUDA
# 13 toolkit and objdump:
#   - bin/: ein-run, ein-inspect, cuda_runtime_tests and libein_cuda.so, the
#     CUDA backend they load from their own folder (EIN_ENABLE_CUDA=ON,
#     libstdc++/libgcc linked in, RUNPATH to the usual CUDA library folders)
#     and the attention benchmark, for sm_80 and sm_90; bin-dynamic/: the same
#     linked against the system's libstdc++ (glibc 2.34 and GCC 12's libstdc++
#     instead of glibc 2.36: Ubuntu 22.04 runs these, not bin/);
#     requirements.json in each lists the glibc and libstdc++ symbol versions
#     each binary needs;
#   - src/: the source fallback for a machine whose glibc is older than those
#     binaries need: the runtime, the CUDA tests and the benchmark's sources,
#     the header-only libraries and GoogleTest's sources the build would find
#     on Debian (deps/), the generated schema header, and a CMake project over
#     them (scripts/gpu-kit/CMakeLists.txt); check.py builds it there on demand;
#   - cases/: every conformance case compiled with einc --target cuda at fp32,
#     bf16 and fp16, with its inputs, expected outputs and case.json;
#   - vit/: ViT-B/16 at batch 64 for cuda (fp32, bf16) without its weights;
#   - check.py (scripts/gpu-check.py), attention_torch.py, vit_vs_pytorch.py.
# Usage, on the build machine (after a full build, for einc):
#   scripts/gpu-kit.sh [KIT_DIR]         # writes gpu-kit/ (~51 MB, git-ignored)
# then copy the kit to the GPU machine (it needs nothing else of the checkout),
# or run it where it is if the build machine has the GPU:
#   python3 -u gpu-kit/check.py [STEP ...] [--out DIR]   # bench/cuda/README.md
# EIN_GPU_BUILD_DIR (default build-gpu; build-gpu-dynamic beside it), EINC
# (default build/bin/einc), EIN_GPU_KIT_JOBS (default 2) and EIN_CONFORMANCE_DIR
# change where and how it builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit=${1:-$root/gpu-kit}
build=${EIN_GPU_BUILD_DIR:-$root/build-gpu}
einc=${EINC:-$root/build/bin/einc}
jobs=${EIN_GPU_KIT_JOBS:-2}
# The repository's conformance cases, and those of $EIN_CONFORMANCE_DIR if set (same-named ones replace ours).
conformance_dirs=("$root/tests/conformance/cases" ${EIN_CONFORMANCE_DIR:+"$EIN_CONFORMANCE_DIR"})
[[ -x "$einc" ]] || { echo "gpu-kit: no einc at $einc (build the compiler first, or set EINC)" >&2; exit 1; }

# Two sets: libstdc++ and libgcc linked in (bin/: any libstdc++, glibc >= 2.36)
# or not (bin-dynamic/: glibc >= 2.34 and libstdc++ >= GCC 12's). Both find
# libcublasLt through RUNPATH in the toolkit's usual folders, or through
# LD_LIBRARY_PATH, which check.py points at PyTorch's nvidia wheels as well
# (LD_LIBRARY_PATH is searched before RUNPATH).
cuda_runpath='/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/cuda-13/lib64'
rm -rf "$kit"
mkdir -p "$kit/cases"
# One build folder per link: the objects are the same (ccache serves the second).
for variant in static dynamic; do
  folder=$build; out=$kit/bin; link_flags="-static-libstdc++ -static-libgcc "
  if [[ $variant == dynamic ]]; then folder=$build-dynamic; out=$kit/bin-dynamic; link_flags=""; fi
  link_flags+="-Wl,--enable-new-dtags,-rpath,$cuda_runpath"
  cmake -S "$root" -B "$folder" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEIN_BUILD_COMPILER=OFF \
    -DEIN_BUILD_BENCHMARKS=ON -DEIN_ENABLE_CUDA=ON -DCMAKE_EXE_LINKER_FLAGS="$link_flags" \
    -DCMAKE_MODULE_LINKER_FLAGS="$link_flags" >/dev/null
  cmake --build "$folder" -j"$jobs" --target ein-run ein-inspect cuda_runtime_tests ein_cuda attention_bench
  mkdir -p "$out"
  # The runtime looks for libein_cuda.so beside the binary that holds it first.
  cp "$folder/bin/ein-run" "$folder/bin/ein-inspect" "$folder/bin/cuda_runtime_tests" "$folder/bin/attention_bench" \
    "$folder/lib/libein_cuda.so" "$out/"
  # The newest GLIBC_ / GLIBCXX_ symbol version each binary needs: check.py compares
  # them with the device's before choosing this set, the other or the source build.
  python3 - "$out" <<'EOF'
import json, os, re, subprocess, sys
folder = sys.argv[1]
needs = {}
for name in sorted(os.listdir(folder)):
    symbols = subprocess.run(["objdump", "-T", os.path.join(folder, name)], capture_output=True, text=True).stdout
    entry = {}
    for library in ("GLIBC", "GLIBCXX"):
        versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(rf"\b{library}_([\d.]+)\b", symbols)}
        if versions:
            entry[library] = ".".join(map(str, max(versions)))
    needs[name] = entry
json.dump(needs, open(os.path.join(folder, "requirements.json"), "w"), indent=1)
print("gpu-kit:", os.path.basename(folder), "needs", needs)
EOF
done
build_schema=$build/schemas/include/ein/schema/ein_artifact_generated.h

# The source fallback: what the runtime's CMake files need, and nothing of /usr/include beyond the toolchains.
src="$kit/src"
mkdir -p "$src/runtime" "$src/schemas" "$src/tests/runtime/cuda" "$src/bench/cuda" "$src/deps/include/ein/schema" \
  "$src/deps/googletest"
cp "$root/scripts/gpu-kit/CMakeLists.txt" "$src/CMakeLists.txt"
cp -r "$root/cmake" "$src/"
cp -r "$root/runtime/CMakeLists.txt" "$root/runtime/include" "$root/runtime/src" "$root/runtime/tools" "$src/runtime/"
cp -r "$root/schemas/ops" "$src/schemas/"
cp "$root/tests/runtime/artifact_builder.hpp" "$root/tests/runtime/artifact_builder.cpp" "$src/tests/runtime/"
cp "$root"/tests/runtime/cuda/* "$src/tests/runtime/cuda/"
cp "$root/bench/cuda/attention_bench.cu" "$root/bench/cuda/CMakeLists.txt" "$src/bench/cuda/"
cp "$build_schema" "$src/deps/include/ein/schema/"
for header_dir in fmt CLI nlohmann flatbuffers; do cp -r "/usr/include/$header_dir" "$src/deps/include/"; done
cp -r /usr/src/googletest/googletest/include /usr/src/googletest/googletest/src "$src/deps/googletest/"
cp "$root/scripts/gpu-kit/build-from-source.sh" "$kit/"

cp "$root/scripts/gpu-check.py" "$kit/check.py"
cp "$root/bench/cuda/attention_torch.py" "$root/bench/vit_vs_pytorch.py" "$kit/"

# ViT-B/16 at batch 64 for the images/s benchmark and the fp32-vs-bf16
# comparison. Its weights (~350 MB a precision) would make the kit ten times larger: the artifact
# travels without its weight segment, which check.py refills there (the same
# values for both precisions).
mkdir -p "$kit/vit"
for precision in fp32 bf16; do
  artifact="$kit/vit/vit_b16_batch64_$precision.einb"
  "$einc" "$root/examples/models/vit_small_patch16_224.ein" --random-weights 1 --dim embed=768 --dim heads=12 \
    --dim batch=64 --target cuda --precision "$precision" -o "$artifact"
  "$build/bin/ein-inspect" "$artifact" --json > "$artifact.json"
  weights=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['weights_bytes'])" "$artifact.json")
  truncate -s "-$weights" "$artifact"
  echo "$weights" > "$artifact.weights_bytes"
done

# A 1.1B Llama shape (TinyLlama's sizes, cache 2048) for the decode benchmark,
# likewise without its weights (4.4 GB at fp32, 2.2 GB of bf16 gemm weights at bf16).
mkdir -p "$kit/llama"
for precision in fp32 bf16; do
  artifact="$kit/llama/llama_1b_$precision.einb"
  "$einc" "$root/examples/models/llama_decoder.ein" --random-weights 1 --dim vocab=32000 --dim hidden=2048 \
    --dim heads=32 --dim kv_heads=4 --dim head_dim=64 --dim inter=5632 --dim layers=22 --dim cache=2048 --dim t=1..2048 \
    --target cuda --precision "$precision" -o "$artifact"
  "$build/bin/ein-inspect" "$artifact" --json > "$artifact.json"
  weights=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['weights_bytes'])" "$artifact.json")
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
    [[ -f "$dir/generation.json" ]] && cp "$dir/generation.json" "$kit/cases/$name/"
    cp -r "$dir/expected" "$kit/cases/$name/"
    # A model.ein with its weights, or a Hugging Face checkpoint folder (tests/conformance/case_source.hpp).
    if [[ -f "$dir/checkpoint/config.json" ]]; then source=(--hf "$dir/checkpoint")
    else source=("$dir/model.ein" --weights "$dir/weights.safetensors"); fi
    for precision in fp32 bf16 fp16; do
      "$einc" "${source[@]}" --target cuda --precision "$precision" -o "$kit/cases/$name/model_$precision.einb"
    done
  done
done
du -sh "$kit"
