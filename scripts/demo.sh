#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build,
# compile an example model and run it, printing its outputs and time; then
# the Python package (scripts/python-env.sh) runs a real model from its
# Hugging Face folder (all-MiniLM-L6-v2): sentences in, embeddings and a
# similarity ranking out, checked against sentence-transformers'.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
bin=$root/build/bin
model=$root/examples/models/mhsa.ein
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== einc $model"
"$bin/einc" "$model" -o "$out/mhsa.einb" --random-weights 7
"$bin/ein-inspect" "$out/mhsa.einb"
echo "== ein-run"
"$bin/ein-run" "$out/mhsa.einb" --random-inputs 1
echo "== a Hugging Face folder through ein.from_pretrained (examples/pretrained/sentence_similarity.py)"
python=$("$root/scripts/python-env.sh" | tail -n 1)
"$python" "$root/examples/pretrained/sentence_similarity.py"
