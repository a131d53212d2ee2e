"""Models, profiles and IR dumps turned into Model Explorer graphs."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, Mapping, Optional

from .. import _ein
from .._compile import compile as _compile
from .._model import Model, load
from ._graph import explorer_graph


def _model_of(path: str, weights: Any = None) -> Model:
    """The artifact at ``path``, or the ``.ein`` model there compiled (with
    ``weights``, else random ones: the graph does not depend on them)."""
    if path.endswith(".ein"):
        return _compile(path, weights, random_weights=None if weights is not None else 0)
    return load(path)


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
    model = _model_of(path, weights)
    graph_id = os.path.basename(path)
    return explorer_graph(model.inspect(), graph_id=graph_id, profile=profile,
                          source_dirs=[os.path.dirname(os.path.abspath(path)), os.getcwd()])


def convert_ir_dump(folder: str) -> Dict[str, Any]:
    """The IR after each pass, as ``einc --dump-ir FOLDER`` wrote it: one graph
    per ``NN-pass.mlir`` file, in pass order, each op a node that keeps its
    source locations (so a fused op traces back to the model's lines)."""
    files = sorted(glob.glob(os.path.join(folder, "[0-9][0-9]-*.mlir")))
    if not files:
        raise ValueError(f"{folder} holds no IR dumps (NN-pass.mlir files, as einc --dump-ir writes)")
    graphs = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            graph = json.loads(_ein.ir_graph(handle.read(), os.path.basename(path)))
        graph["id"] = os.path.splitext(os.path.basename(path))[0]
        graphs.append(graph)
    return {"label": os.path.basename(os.path.normpath(folder)), "graphs": graphs}
