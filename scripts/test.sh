#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install what is missing, build the
# full project and the runtime-only configuration, and run both test suites.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
# ccache keys on paths relative to the checkout, so that the Python package's
# build (build-python/, the same sources) hits what the full build compiled,
# and a clone in another folder hits a previous clone's objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
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

# ---- the Python package (issue 14) --------------------------------------------
# A venv (.venv-python) with the package built from this checkout into
# build-python/ (ccache serves the objects build/ compiled), then its pytest
# suite. pytest's status 5 (no tests collected) is a failure like any other.
# The venv holds the serving requirements too (issue 15): test_serving.py
# starts tritonserver on loopback, and under CI fails rather than skips
# should they be missing.
echo "== Python package: build and tests"
python_start=$SECONDS
python=$("$root/scripts/python-env.sh" | tail -n 1)
pytest_status=0
(cd "$root/python" && EIN_BUILD_DIR="$root/build" "$python" -m pytest -q -p no:cacheprovider tests) || pytest_status=$?
if [[ $pytest_status -eq 5 ]]; then echo "error: pytest collected no tests" >&2; fi
if [[ $pytest_status -ne 0 ]]; then exit "$pytest_status"; fi
echo "== Python package took $((SECONDS - python_start)) s"

# ---- ASan+UBSan and fuzzing (issue 17) ----------------------------------------
# One clang-19 build with ASan+UBSan and libFuzzer's coverage instrumentation
# (build-fuzz/, as scripts/fuzz.sh makes it) serves both: every unit and lit
# test runs in it (the install test excepted: it builds a consumer with the
# host compiler, which cannot link sanitized libraries), then each fuzz target
# runs for EIN_CI_FUZZ_SECONDS (default 30) from its seed corpus.
echo "== ASan+UBSan build (clang-19, with the fuzz targets)"
sanitize_start=$SECONDS
"$root/scripts/fuzz.sh" --build-only
cmake --build "$root/build-fuzz" -- -j"$jobs"
echo "== tests: ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-fuzz" --output-on-failure -j "$jobs" -E '^runtime_install_consumer$'
echo "== fuzz targets: ${EIN_CI_FUZZ_SECONDS:-30} s each"
"$root/scripts/fuzz.sh" "${EIN_CI_FUZZ_SECONDS:-30}"
echo "== ASan+UBSan and fuzzing took $((SECONDS - sanitize_start)) s"

# ThreadSanitizer: one model run from many threads (Runner, C API, Session
# misuse, a Scheduler fed and read by many threads), in a runtime-only build
# of just those tests; the Scheduler's decoder is compiled by the full build.
echo "== tests: ThreadSanitizer, concurrency (runtime only)"
cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEIN_BUILD_COMPILER=OFF \
  -DEIN_BUILD_BENCHMARKS=OFF -DEIN_BUILD_TRITON_BACKEND=OFF -DEIN_ENABLE_CUDA=OFF -DEIN_SANITIZE=thread >/dev/null
cmake --build "$root/build-tsan" --target runtime_concurrency_tests
"$root/build/bin/einc" "$root/examples/models/llama_decoder.ein" --random-weights 3 -o "$root/build-tsan/decoder.einb"
EIN_TEST_DECODER=$root/build-tsan/decoder.einb TSAN_OPTIONS=halt_on_error=1 \
  ctest --test-dir "$root/build-tsan" -L concurrency --output-on-failure -j "$jobs"
