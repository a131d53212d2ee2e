#!/usr/bin/env bash
# A screenshot of a model in Model Explorer with ein's adapter, rendered by
# headless Chromium (Debian's `chromium`): the check that the viewer draws
# the graph, and the pictures in docs/explorer.md.
#   scripts/explorer-screenshot.sh MODEL OUT.png [python -m ein.explore options...]
# MODEL is a .einb, a .ein or an einc --dump-ir folder. Needs the venv of
# scripts/python-env.sh and chromium (apt-get install chromium). Fails when
# the page shows no graph (too few bytes of drawing in the picture).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1 out=$2
shift 2
python=${EIN_PYTHON_BIN:-$root/.venv-python/bin/python}
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$browser" ]] || { echo "explorer-screenshot: needs chromium (apt-get install chromium)" >&2; exit 1; }
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
"$python" -m ein.explore "$model" --host 127.0.0.1 --port "$port" --no-browser "$@" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
# The server prints the page's address, with the model and its overlays in it.
url=
for _ in $(seq 1 240); do
  url=$(grep -m1 -o "http://127.0.0.1:$port/?data=[^ ]*" "$log" || true)
  [[ -n "$url" ]] && break
  kill -0 $server 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
[[ -n "$url" ]] || { echo "explorer-screenshot: the viewer did not start" >&2; cat "$log" >&2; exit 1; }
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="${EIN_SCREENSHOT_SIZE:-1600,1000}" \
  --virtual-time-budget="${EIN_SCREENSHOT_WAIT_MS:-30000}" --screenshot="$out" "$url" >/dev/null 2>&1
"$python" - "$out" <<'PY'
import sys
# A drawn graph is many distinct colours; an empty or error page is a few.
data = open(sys.argv[1], "rb").read()
if len(data) < 30000:
    sys.exit(f"explorer-screenshot: {sys.argv[1]} is {len(data)} bytes: no graph drawn")
print(f"{sys.argv[1]}: {len(data)} bytes")
PY
