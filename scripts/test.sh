#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install what is missing, build the
# full project and the runtime-only configuration, and run both test suites.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/install-deps.sh"

echo "== full build (compiler + runtime)"
EIN_BUILD_DIR=$root/build "$root/scripts/build.sh"
echo "== runtime-only build (no MLIR/LLVM)"
EIN_BUILD_DIR=$root/build-runtime "$root/scripts/build.sh" -DEIN_BUILD_COMPILER=OFF -DEIN_BUILD_BENCHMARKS=OFF

if ldd "$root/build/bin/ein-run" | grep -qiE 'libMLIR|libLLVM'; then
  echo "error: ein-run links MLIR/LLVM" >&2
  exit 1
fi

echo "== tests: runtime-only build"
ctest --test-dir "$root/build-runtime" --output-on-failure -j "$jobs"
echo "== tests: full build"
ctest --test-dir "$root/build" --output-on-failure -j "$jobs"

# ThreadSanitizer: one model run from many threads (Runner, C API, Session
# misuse), in a runtime-only build of just those tests.
echo "== tests: ThreadSanitizer, concurrency (runtime only)"
cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEIN_BUILD_COMPILER=OFF \
  -DEIN_BUILD_BENCHMARKS=OFF -DEIN_ENABLE_CUDA=OFF -DEIN_SANITIZE=thread >/dev/null
cmake --build "$root/build-tsan" --target runtime_concurrency_tests
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$root/build-tsan" -L concurrency --output-on-failure -j "$jobs"
