#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-19, ASan+UBSan, into build-fuzz/ or
# $EIN_FUZZ_BUILD_DIR) and runs each for SECONDS (default 60), one after the
# other; fails on any finding (crash, sanitizer report, leak, timeout, OOM).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh --build-only     configure and build the targets and corpora
# Each target keeps its corpus in build-fuzz/fuzz-corpus/TARGET (grown run
# after run, seeded from build-fuzz/tests/fuzz/corpus/TARGET) and writes the
# input of a finding to build-fuzz/findings/TARGET/. Reproduce one with
#   build-fuzz/bin/TARGET build-fuzz/findings/TARGET/crash-...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EIN_FUZZ_BUILD_DIR:-$root/build-fuzz}
build_only=false
if [[ "${1:-}" == "--build-only" ]]; then
  build_only=true
  shift
fi
seconds=${1:-60}
shift || true
all_targets=(fuzz_frontend fuzz_einc fuzz_safetensors fuzz_gguf fuzz_npy fuzz_artifact fuzz_artifact_fields)
[[ $# -gt 0 ]] && targets=("$@") || targets=("${all_targets[@]}")

if ! command -v clang++-19 >/dev/null; then
  echo "fuzz.sh: clang++-19 is missing (scripts/install-deps.sh installs clang-19 and libclang-rt-19-dev)" >&2
  exit 1
fi
# -O1 with line tables, and assertions on (MLIR's inline ones too): asserts are oracles.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DEIN_SANITIZE=address,undefined -DEIN_BUILD_FUZZERS=ON -DEIN_ENABLE_CUDA=OFF \
  -DEIN_BUILD_BENCHMARKS=OFF -DEIN_BUILD_TRITON_BACKEND=OFF >/dev/null
cmake --build "$build" --target ein_fuzzers -- -j"${EIN_FUZZ_JOBS:-$(nproc)}"
$build_only && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
summary=()
for target in "${targets[@]}"; do
  corpus=$build/fuzz-corpus/$target
  findings=$build/findings/$target
  mkdir -p "$corpus" "$findings"
  seeds=$build/tests/fuzz/corpus/${target#fuzz_}
  dict=()
  [[ -f $root/tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
  log=$build/findings/$target.log
  echo "== $target: ${seconds}s"
  status=0
  "$build/bin/$target" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 \
    -max_len=65536 -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' || echo "?")
  if [[ $status -ne 0 ]]; then
    failed+=("$target")
    summary+=("$target: FINDING (exit $status) after $runs runs; see $log and $findings/")
    tail -n 40 "$log" >&2
  else
    summary+=("$target: ${seconds}s, $runs runs, no findings")
  fi
done
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
