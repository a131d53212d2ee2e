"""ein.explorer: compiled models as Model Explorer graphs, their overlays, the
IR after each pass, and the viewer serving them (issue 40)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import ein
from ein.explorer import convert_ir_dump, convert_model, explorer_graph, profile_model
from conftest import CONFORMANCE_CASES, EXAMPLES, REPO, conformance_case_names

# Attention written out by hand in a block: each line one op the fused step replaces.
HAND_ATTENTION = """\
dim t = 1..16, d = 8
input x: f32[t, d]
def attend(x, p) {
  param p.wq: f32[d, d]
  param p.wk: f32[d, d]
  param p.wv: f32[d, d]
  q = x @ p.wq
  k = x @ p.wk
  v = x @ p.wv
  s = einsum("i c, j c -> i j", q, k)
  s = s * 0.35
  s = where(rearrange(arange(t), "i -> i 1") >= rearrange(arange(t), "j -> 1 j"), s, -inf)
  m = max(s, axis=-1, keepdim=true)
  e = exp(s - m)
  a = e / sum(e, axis=-1, keepdim=true)
  return a @ v
}
y = x
for i in 0..2 {
  y = y + attend(y, layers.{i}.attn)
}
output out = y
"""
# The lines of the ops attention fuses: q·k, scale, mask, the softmax (3 lines), ·v.
ATTENTION_LINES = {10, 11, 12, 13, 14, 15, 16}


def graph_checks(info, converted):
    """One node per step, every tensor a step reads from another step or a
    binding drawn as an edge, every edge between existing nodes."""
    nodes = {node["id"]: node for node in converted["graph"]["nodes"]}
    steps = [node for node in converted["graph"]["nodes"] if node["id"].startswith("step")]
    assert len(steps) == len(info["steps"])
    tensors = info["tensors"]
    written_before = {}
    for index, step in enumerate(info["steps"]):
        node = nodes[f"step{index}"]
        sources = {edge["sourceNodeId"] for edge in node["incomingEdges"]}
        assert sources <= set(nodes), f"step {index} has an edge from a missing node"
        for operand in step["operands"]:
            tensor = tensors[operand["tensor"]]
            if operand["written"] or tensor["storage"] == "weights":
                continue
            expected = written_before.get(operand["tensor"])
            if expected:
                assert expected & sources, f"step {index} reads tensor {operand['tensor']} without its edge"
            elif tensor["storage"] in ("input", "state"):
                assert any(s.startswith(tensor["storage"] + ":") for s in sources)
        for operand in step["operands"]:
            if operand["written"]:
                written_before.setdefault(operand["tensor"], set()).add(f"step{index}")
    for name, data in converted["node_data"].items():
        assert set(data["results"]) == {node["id"] for node in steps}, name
        assert all(isinstance(r["value"], (int, float)) and r["value"] >= 0 for r in data["results"].values())


def attr(node, key):
    return next((a["value"] for a in node["attrs"] if a["key"] == key), None)


@pytest.mark.parametrize("case", conformance_case_names())
def test_graph_of_each_conformance_case(case):
    case_dir = CONFORMANCE_CASES / case
    model = ein.compile(case_dir / "model.ein", weights=case_dir / "weights.safetensors")
    info = model.inspect()
    graph_checks(info, explorer_graph(info, graph_id=case))


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.ein")))
def test_graph_of_each_example(example, tmp_path):
    artifact = tmp_path / "model.einb"
    ein.compile(EXAMPLES / example, random_weights=1).save(artifact)
    converted = convert_model(str(artifact))
    graph_checks(ein.load(artifact).inspect(), converted)


def test_fused_attention_lists_the_lines_it_replaced(tmp_path):
    source = tmp_path / "hand.ein"
    source.write_text(HAND_ATTENTION)
    converted = convert_model(str(source))
    attention = [n for n in converted["graph"]["nodes"] if n["label"] == "attention"]
    assert len(attention) == 2
    for node in attention:
        lines = {int(a["value"].split(":")[1]) for a in node["attrs"] if a["key"].startswith("source ")}
        assert ATTENTION_LINES <= lines, lines
        # The nodes quote the model's text, found beside it.
        assert any("einsum(" in a["value"] for a in node["attrs"] if a["key"].startswith("source "))
        assert "ein-fuse-attention" in attr(node, "fused_by")
        assert attr(node, "kernels").endswith("(this CPU)")
    # Grouped by the block each came from.
    assert [n["namespace"] for n in attention] == ["layers/0/attn", "layers/1/attn"]
    # The projections by their weights' modules, within the block.
    gemms = [n for n in converted["graph"]["nodes"] if n["label"] == "gemm"]
    assert gemms and all(n["namespace"].startswith("layers/") for n in gemms)


def test_ranged_dims_by_name_and_memory_in_the_metadata(tmp_path):
    source = tmp_path / "hand.ein"
    source.write_text(HAND_ATTENTION)
    converted = convert_model(str(source))
    shapes = [a["value"] for n in converted["graph"]["nodes"] for m in n.get("outputsMetadata", [])
              for a in m["attrs"] if a["key"] == "tensor_shape"]
    assert "f32[t, 8]" in shapes
    arena = [m for n in converted["graph"]["nodes"] for m in n.get("outputsMetadata", [])
             if any(a["key"] == "arena_offset" for a in m["attrs"])]
    assert arena and all(any(a["key"] == "lifetime" for a in m["attrs"]) for m in arena)
    assert max(converted["node_data"]["live arena bytes"]["results"][n]["value"]
               for n in converted["node_data"]["live arena bytes"]["results"]) > 0


def test_profile_overlay_times_every_step(tmp_path):
    artifact = tmp_path / "mhsa.einb"
    ein.compile(EXAMPLES / "mhsa.ein", random_weights=1).save(artifact)
    profile = profile_model(str(artifact), runs=3)
    steps = ein.load(artifact).inspect()["steps"]
    assert [entry["step"] for entry in profile["steps"]] == list(range(len(steps)))
    assert all(entry["calls"] == 3 and entry["median_ms"] >= 0 for entry in profile["steps"])
    converted = convert_model(str(artifact), profile=profile)
    times = converted["node_data"]["time (ms)"]["results"]
    assert len(times) == len(steps)


def test_profile_at_given_dims(tmp_path):
    source = tmp_path / "hand.ein"
    source.write_text(HAND_ATTENTION)
    artifact = tmp_path / "hand.einb"
    ein.compile(source, random_weights=1).save(artifact)
    profile = profile_model(str(artifact), runs=2, dims={"t": 3})
    assert len(profile["steps"]) == len(ein.load(artifact).inspect()["steps"])
    with pytest.raises(RuntimeError, match='no dim "q"'):
        profile_model(str(artifact), runs=1, dims={"q": 3})


def test_ir_after_each_pass(tmp_path):
    source = tmp_path / "hand.ein"
    source.write_text(HAND_ATTENTION)
    ein.compile(source, random_weights=1, dump_ir=tmp_path / "ir")
    collection = convert_ir_dump(str(tmp_path / "ir"))
    names = [graph["id"] for graph in collection["graphs"]]
    assert names[0] == "00-frontend" and "08-ein-fuse-attention" in names
    by_name = {graph["id"]: graph for graph in collection["graphs"]}
    before = [n for n in by_name["00-frontend"]["nodes"] if n["label"] == "ein.einsum"]
    assert before and all(n["namespace"] == "layers/0/attn" or n["namespace"] == "layers/1/attn" for n in before)
    fused = [n for n in by_name["08-ein-fuse-attention"]["nodes"] if n["label"] == "ein.attention"]
    assert len(fused) == 2
    lines = {int(a["value"].split(":")[1]) for a in fused[0]["attrs"] if a["key"].startswith("source ")}
    assert ATTENTION_LINES <= lines
    # Edges by SSA value: every edge's source is a node of the same graph.
    for graph in collection["graphs"]:
        ids = {n["id"] for n in graph["nodes"]}
        assert all(e["sourceNodeId"] in ids for n in graph["nodes"] for e in n["incomingEdges"])


def test_malformed_inputs_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.einb"
    bad.write_bytes(b"\x10\x00\x00\x00" + os.urandom(200))
    with pytest.raises(ein.ArtifactError):
        convert_model(str(bad))
    done = subprocess.run([sys.executable, "-m", "ein.explore", str(bad), "--json", str(tmp_path / "g.json")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("ein.explore: ") and "bad.einb" in done.stderr
    (tmp_path / "ir").mkdir()
    (tmp_path / "ir" / "00-frontend.mlir").write_text("func.func @f( {")
    with pytest.raises(ValueError, match="00-frontend.mlir:1"):
        convert_ir_dump(str(tmp_path / "ir"))


def test_explore_command_writes_the_graph(tmp_path):
    out = tmp_path / "graph.json"
    done = subprocess.run([sys.executable, "-m", "ein.explore", str(EXAMPLES / "mhsa.ein"), "--json", str(out),
                           "--profile", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    converted = json.loads(out.read_text())
    assert converted["graph"]["nodes"] and "time (ms)" in converted["node_data"]


def test_viewer_draws_the_graph_in_chromium(tmp_path):
    """The page Model Explorer serves draws the ViT example with ein's overlays
    (scripts/explorer-screenshot.sh: headless Chromium, the picture checked
    for the overlays' colours). Without chromium it skips, except under CI."""
    if not shutil.which("chromium"):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (scripts/install-deps.sh installs it)")
        pytest.skip("needs chromium")
    pytest.importorskip("model_explorer")
    artifact = tmp_path / "vit.einb"
    ein.compile(EXAMPLES / "vit_small_patch16_224.ein", random_weights=1).save(artifact)
    picture = tmp_path / "vit.png"
    done = subprocess.run(["bash", str(REPO / "scripts" / "explorer-screenshot.sh"), str(artifact), str(picture)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, EIN_PYTHON_BIN=sys.executable, EIN_SCREENSHOT_WAIT="15"))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "drawn" in done.stdout and picture.stat().st_size > 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_viewer_converts_through_its_http_api(tmp_path):
    """Model Explorer's server with the extension loaded converts the ViT example on request."""
    pytest.importorskip("model_explorer")
    artifact = tmp_path / "vit.einb"
    ein.compile(EXAMPLES / "vit_small_patch16_224.ein", random_weights=1).save(artifact)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ein.explore", str(artifact), "--host", "127.0.0.1", "--port", str(port), "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the viewer did not start: {server.stdout.read()}")
                time.sleep(0.5)
        extensions = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/get_extensions", timeout=10))
        assert any(e["id"] == "ein" for e in extensions)
        command = {"extensionId": "ein", "cmdId": "convert", "modelPath": str(artifact), "settings": {},
                   "deleteAfterConversion": False}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/apipost/v1/send_command",
                                         data=json.dumps(command).encode(), headers={"Content-Type": "application/json"})
        response = json.load(urllib.request.urlopen(request, timeout=60))
        assert "error" not in response, response
        nodes = response["graphs"][0]["nodes"]
        assert sum(1 for n in nodes if n["label"] == "attention") == 12
        assert any(n["namespace"].startswith("blocks/11") for n in nodes)
        # A malformed artifact is an error the viewer shows, not a crash of the server.
        bad = tmp_path / "bad.einb"
        bad.write_bytes(b"\x10\x00\x00\x00" + bytes(64))
        command["modelPath"] = str(bad)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/apipost/v1/send_command",
                                         data=json.dumps(command).encode(), headers={"Content-Type": "application/json"})
        response = json.load(urllib.request.urlopen(request, timeout=60))
        assert "ArtifactError" in response["error"]
    finally:
        server.terminate()
        server.wait(timeout=30)
