#!/usr/bin/env bash
# A screenshot of a model in Model Explorer with ein's adapter, rendered by
# headless Chromium (Debian's `chromium`): the check that the viewer draws
# the graph with ein's overlays, and the pictures in docs/explorer.md.
#   scripts/explorer-screenshot.sh MODEL OUT.png [python -m ein.explore options...]
# MODEL is a .einb, a .ein or an einc --dump-ir folder. Needs the venv of
# scripts/python-env.sh and chromium (apt-get install chromium).
# EIN_SCREENSHOT_WAIT (seconds, default 20) is how long the page may draw;
# EIN_SCREENSHOT_SIZE the window (default 1600,1000); EIN_SCREENSHOT_SELECT a
# node to select (its attributes fill the side panel: "step7") and
# EIN_SCREENSHOT_EXPAND a layer to open ("blocks/0/attn"). Fails when the
# picture of a model shows none of the overlays' colours (no graph drawn).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1 out=$2
shift 2
python=${EIN_PYTHON_BIN:-$root/.venv-python/bin/python}
command -v chromium >/dev/null || { echo "explorer-screenshot: needs chromium (apt-get install chromium)" >&2; exit 1; }
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
"$python" -m ein.explore "$model" --host 127.0.0.1 --port "$port" --no-browser "$@" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
# The server prints the page's address, with the model and its overlays in it.
url=
for _ in $(seq 1 600); do
  url=$(grep -m1 -o "http://127.0.0.1:$port/?data=[^ ]*" "$log" || true)
  [[ -n "$url" ]] && break
  kill -0 $server 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
[[ -n "$url" ]] || { echo "explorer-screenshot: the viewer did not start" >&2; cat "$log" >&2; exit 1; }
"$python" - "$url" "$out" "${EIN_SCREENSHOT_WAIT:-20}" "${EIN_SCREENSHOT_SIZE:-1600,1000}" "$model" <<'PY'
import http.server, json, os, socketserver, struct, subprocess, sys, threading, time, urllib.parse, zlib

url, out, wait, size = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
select, expand = os.environ.get("EIN_SCREENSHOT_SELECT", ""), os.environ.get("EIN_SCREENSHOT_EXPAND", "")
if select or expand:
    # The viewer restores a pane's state from the page address (its uiState).
    base, _, query = url.partition("?data=")
    data = json.loads(urllib.parse.unquote(query))
    data["uiState"] = {"paneStates": [{"deepestExpandedGroupNodeIds": [expand + "___group___"] if expand else [],
                                       "selectedNodeId": select, "selectedGraphId": "", "selectedCollectionLabel": "",
                                       "widthFraction": 1}]}
    url = base + "?data=" + urllib.parse.quote(json.dumps(data))
# Headless Chromium shoots when the page has loaded, but the viewer draws
# the graph later: a frame around it holds back its load with an image
# served after `wait` seconds.
PIXEL = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")


class Frame(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/":
            body = (f'<html><body style="margin:0"><iframe src="{url}" style="border:0;width:100vw;height:100vh">'
                    '</iframe><img src="/later" style="display:none"></body></html>').encode()
            kind = "text/html"
        else:
            time.sleep(wait)
            body, kind = PIXEL, "image/gif"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:
            pass

    def log_message(self, *args):
        pass


server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Frame)
threading.Thread(target=server.serve_forever, daemon=True).start()
subprocess.run(["timeout", str(int(wait) + 90), "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--hide-scrollbars", f"--window-size={size}", f"--screenshot={out}",
                f"http://127.0.0.1:{server.server_address[1]}/"], capture_output=True)


def pixels(path):
    """The RGB pixels of an 8-bit RGB or RGBA PNG, as Chromium writes them."""
    data = open(path, "rb").read()
    chunks, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunks.setdefault(kind, b"")
        chunks[kind] += data[at + 8:at + 8 + length]
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {2: 3, 6: 4}[colour]
    raw, stride, rows, previous = zlib.decompress(chunks[b"IDAT"]), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1: line[x] = (line[x] + a) & 255
            elif kind == 2: line[x] = (line[x] + b) & 255
            elif kind == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line
    return [tuple(row[x:x + 3]) for row in rows for x in range(0, stride, channels)]


if os.path.isdir(sys.argv[5]) or sys.argv[5].endswith(".mlir"):
    sys.exit(print(f"{out}: written (an IR dump: its overlay may be one colour, so the picture is not checked)"))
# The overlays' scale (ein/explorer/_graph.py): green, yellow, red.
stops = [(0xd5, 0xf5, 0xd5), (0xfd, 0xe9, 0xa0), (0xf4, 0xa3, 0xa3)]
coloured = sum(1 for p in pixels(out) if any(sum(abs(p[i] - s[i]) for i in range(3)) < 12 for s in stops))
if coloured < 500:
    sys.exit(f"explorer-screenshot: {out} shows no graph with ein's overlays ({coloured} pixels in their colours)")
print(f"{out}: drawn ({coloured} pixels in the overlays' colours)")
PY
