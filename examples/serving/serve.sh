#!/usr/bin/env bash
# Serves the BERT-style encoder (examples/models/bert_encoder.ein, random
# weights, seed 1) with Triton Inference Server on 127.0.0.1: HTTP on 8000,
# gRPC on 8001, dynamic batching (requests of any batch size and length up to
# 16 x 256, padded to the longest with the mask), two instances. Extra
# arguments go to `python -m ein.serve` (e.g. --http-port 9000,
# --no-dynamic-batching, --weights w.safetensors in place of the random ones).
# Makes the venv (scripts/python-env.sh) when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=$root/.venv-python/bin/python
if ! "$python" -c "import ein.serve, tritonclient" 2>/dev/null; then
  python=$("$root/scripts/python-env.sh" | tail -n 1)
fi
weights=(--random-weights 1)
for arg in "$@"; do [[ $arg == --weights ]] && weights=(); done
exec "$python" -m ein.serve "$root/examples/models/bert_encoder.ein" "${weights[@]}" --name bert_encoder \
  --pad t --instances 2 "$@"
