#!/usr/bin/env bash
# Installs, with apt-get, whatever ein's build and tests need that this Debian 12
# machine lacks. Idempotent and quiet when everything is present.
#   scripts/install-deps.sh            compiler + runtime + tests
#   scripts/install-deps.sh --runtime  runtime-only build (no MLIR/LLVM)
set -euo pipefail

runtime_packages=(
  cmake ninja-build ccache g++ git python3
  flatbuffers-compiler libflatbuffers-dev libfmt-dev
  libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
)
# MLIR and LLVM are pinned to 19: only one libmlir-N can be installed at a time.
compiler_packages=(libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools)
# ein-tblgen links LLVM's static TableGen and Support libraries, which need zstd.
compiler_packages+=(libzstd-dev)
# The Python package (scripts/python-env.sh): a venv and the headers its module builds against.
compiler_packages+=(python3-venv python3-dev)
# clang 19 with its sanitizer and libFuzzer runtimes: the ASan+UBSan test
# configuration and the fuzz targets (scripts/test.sh, scripts/fuzz.sh).
compiler_packages+=(clang-19 libclang-rt-19-dev)
# Headless Chromium: the check that Model Explorer draws ein.explorer's graph
# (scripts/explorer-screenshot.sh, run by python/tests/test_explorer.py).
compiler_packages+=(chromium)

packages=("${runtime_packages[@]}")
if [[ "${1:-}" != "--runtime" ]]; then
  packages+=("${compiler_packages[@]}")
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
