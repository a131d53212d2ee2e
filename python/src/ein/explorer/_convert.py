"""Models, profiles and IR dumps turned into Model Explorer graphs."""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Mapping, Optional

from .. import _ein
from .._compile import compile as _compile
from ._graph import _node_data, explorer_graph


def _inspect(path: str, weights: Any = None) -> Dict[str, Any]:
    """``Model.inspect()`` of the artifact at ``path`` (read without preparing
    it to run: a 1B model's weights are not copied), or of the ``.ein`` model
    there compiled (with ``weights``, else random ones: the graph does not
    depend on them)."""
    if path.endswith(".ein"):
        return _compile(path, weights, random_weights=None if weights is not None else 0).inspect()
    return json.loads(_ein.inspect_artifact(os.fspath(path)))


def profile_model(artifact: str, *, runs: int = 10, dims: Optional[Mapping[str, int]] = None,
                  threads: Optional[int] = None) -> Dict[str, Any]:
    """Each step's times over ``runs`` runs of the artifact on random inputs at
    ``dims`` (a dim not given takes its largest value), as ``EIN_PROFILE=FILE.json``
    writes them. Runs in a child process: the profile is written when its
    session ends."""
    with tempfile.TemporaryDirectory(prefix="ein-profile-") as folder:
        out = os.path.join(folder, "profile.json")
        env = dict(os.environ, EIN_PROFILE=out)
        command = [sys.executable, "-m", "ein.explorer._profile", os.fspath(artifact), str(runs),
                   json.dumps(dict(dims or {})), str(threads or 0)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"profiling {artifact} failed: {done.stderr.strip() or done.stdout.strip()}")
        with open(out, encoding="utf-8") as handle:
            return json.load(handle)


def convert_model(path: str, *, weights: Any = None, profile: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``explorer_graph`` of the artifact (or ``.ein`` model) at ``path``; the
    model's source lines are looked up beside it and from the working folder."""
    graph_id = os.path.basename(path)
    return explorer_graph(_inspect(path, weights), graph_id=graph_id, profile=profile,
                          source_dirs=[os.path.dirname(os.path.abspath(path)), os.getcwd()])


def ir_dump_files(path: str) -> List[str]:
    """The dumps of ``einc --dump-ir`` in pass order: those of the folder
    ``path``, or of the folder of ``path``, one of them; another ``.mlir``
    file alone."""
    if os.path.isdir(path):
        folder = path
    elif re.fullmatch(r"[0-9][0-9]-.*\.mlir", os.path.basename(path)):
        folder = os.path.dirname(os.path.abspath(path))
    else:
        return [path]
    files = sorted(glob.glob(os.path.join(folder, "[0-9][0-9]-*.mlir")))
    if not files:
        raise ValueError(f"{path} holds no IR dumps (NN-pass.mlir files, as einc --dump-ir writes)")
    return files


def convert_ir_dump(path: str) -> Dict[str, Any]:
    """The IR after each pass, as ``einc --dump-ir FOLDER`` wrote it (``path``
    is the folder or one of its files; another ``.mlir`` file is one graph):
    one graph per ``NN-pass.mlir`` file, in pass order, each op a node that
    keeps its source locations (so a fused op traces back to the model's lines)."""
    files = ir_dump_files(path)
    folder = os.path.dirname(os.path.abspath(files[0]))
    graphs = []
    fused: Dict[str, Any] = {}
    for path in files:
        with open(path, encoding="utf-8") as handle:
            graph = json.loads(_ein.ir_graph(handle.read(), os.path.basename(path)))
        graph["id"] = os.path.splitext(os.path.basename(path))[0]
        graphs.append(graph)
        # How many of the model's ops each op stands for: fusion made visible pass by pass.
        counts = {node["id"]: sum(1 for a in node["attrs"] if a["key"].startswith("source "))
                  for node in graph["nodes"]}
        fused[graph["id"]] = _node_data("model ops", {node: count for node, count in counts.items() if count})
    return {"label": os.path.basename(folder), "graphs": graphs, "node_data": {"model ops": fused}}
