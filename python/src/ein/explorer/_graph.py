"""A compiled model as Model Explorer's graph JSON, built from ``Model.inspect()``.

Plain dicts in Model Explorer's layout (``Graph``, ``GraphNode``, ``IncomingEdge``,
``KeyValue``, ``MetadataItem`` of ``model_explorer.graph_builder``; node data as its
``GraphNodeData``), so the conversion runs and is tested without the viewer installed.

One node per step, one per model input, output and state tensor. A step's incoming
edges come from the steps that wrote each tensor it reads (or the input and state
nodes); weights are not nodes but the step's ``weights`` attribute. Steps are grouped
by namespace: the module of the parameters a step reads (``blocks.3.attn.qkv``), else
the block it came from (``blocks.3.attn``), else what the steps around it share.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

# Colours of the node data scale: low values green, high red.
_GRADIENT = [
    {"stop": 0.0, "bgColor": "#d5f5d5"},
    {"stop": 0.5, "bgColor": "#fde9a0"},
    {"stop": 1.0, "bgColor": "#f4a3a3"},
]


def _kv(key: str, value: Any) -> Dict[str, str]:
    return {"key": key, "value": str(value)}


def _type_text(tensor: Dict[str, Any]) -> str:
    """'f32[1, t, 384]': the size of an axis over ranged dims by its expression."""
    dims = tensor.get("dims") or []
    axes = [dims[i] if i < len(dims) and dims[i] else str(size) for i, size in enumerate(tensor["shape"])]
    return f"{tensor['dtype']}[{', '.join(axes)}]"


def _common_prefix(names: Sequence[str]) -> str:
    """'blocks.3' for 'blocks.3.attn' and 'blocks.3.mlp'."""
    parts = [name.split(".") for name in names if name]
    if not parts:
        return ""
    common: List[str] = []
    for pieces in zip(*parts):
        if len(set(pieces)) != 1:
            break
        common.append(pieces[0])
    return ".".join(common)


class _SourceLines:
    """The text of the model's source lines, where the model file can be found."""

    def __init__(self, search_dirs: Sequence[str]):
        self._dirs = [d for d in search_dirs if d]
        self._files: Dict[str, Optional[List[str]]] = {}

    def line(self, location: str) -> Optional[str]:
        parts = location.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        path, line = parts[0], int(parts[1])
        if path not in self._files:
            self._files[path] = None
            for candidate in [path] + [os.path.join(d, os.path.basename(path)) for d in self._dirs]:
                if os.path.isfile(candidate):
                    with open(candidate, encoding="utf-8", errors="replace") as handle:
                        self._files[path] = handle.read().splitlines()
                    break
        lines = self._files[path]
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1].strip()


def _weights_by_offset(info: Dict[str, Any]) -> Dict[int, List[str]]:
    """Parameter names by the weight-segment offset of the tensor that holds them."""
    names: Dict[int, List[str]] = {}
    for param in info["params"]["tensors"]:
        names.setdefault(param["stored"]["offset"], []).append(param["name"])
    return names


def _step_namespaces(info: Dict[str, Any], weights: List[List[str]]) -> List[str]:
    """Each step's namespace, dotted: from its weights' modules within its block,
    else its block's; a step with neither takes what its neighbours share."""
    chosen: List[Optional[str]] = []
    for step, names in zip(info["steps"], weights):
        block = step.get("namespace", "")
        modules = _common_prefix([name.rsplit(".", 1)[0] for name in names if "." in name])
        if modules and (not block or modules == block or modules.startswith(block + ".")):
            chosen.append(modules)
        elif block:
            chosen.append(block)
        else:
            chosen.append(None)
    result: List[str] = []
    for i, namespace in enumerate(chosen):
        if namespace is not None:
            result.append(namespace)
            continue
        before = next((chosen[j] for j in range(i - 1, -1, -1) if chosen[j] is not None), None)
        after = next((chosen[j] for j in range(i + 1, len(chosen)) if chosen[j] is not None), None)
        result.append(_common_prefix([before, after]) if before and after else "")
    return result


def _lifetimes(info: Dict[str, Any]) -> Dict[int, Tuple[int, int]]:
    """For each arena tensor a step touches: the first and last step that does."""
    spans: Dict[int, Tuple[int, int]] = {}
    tensors = info["tensors"]
    for index, step in enumerate(info["steps"]):
        for operand in step["operands"]:
            tensor = operand["tensor"]
            if tensors[tensor]["storage"] != "arena":
                continue
            first, _ = spans.get(tensor, (index, index))
            spans[tensor] = (first, index)
    return spans


def _node_data(name: str, values: Dict[str, float]) -> Dict[str, Any]:
    return {"name": name, "results": {node: {"value": value} for node, value in values.items()},
            "gradient": _GRADIENT}


def explorer_graph(info: Dict[str, Any], *, graph_id: str = "ein", profile: Optional[Dict[str, Any]] = None,
                   source_dirs: Sequence[str] = ()) -> Dict[str, Any]:
    """The Model Explorer graph of a model whose ``Model.inspect()`` is ``info``.

    Returns ``{"graph": Graph JSON, "node_data": {overlay name: GraphNodeData JSON}}``:
    the overlays are each step's weight bytes, arena bytes written, live arena bytes
    and, with ``profile`` (``EIN_PROFILE=FILE.json``'s contents), its median time.
    ``source_dirs`` are where to look for the model's ``.ein`` file, whose lines
    the nodes then quote.
    """
    tensors = info["tensors"]
    steps = info["steps"]
    if not steps:
        raise ValueError("the artifact shows no steps (they do not verify at the dims' maxima)")
    by_offset = _weights_by_offset(info)
    step_weights = [sorted({name for operand in step["operands"]
                            if tensors[operand["tensor"]]["storage"] == "weights"
                            for name in by_offset.get(tensors[operand["tensor"]]["offset"], [])})
                    for step in steps]
    namespaces = _step_namespaces(info, step_weights)
    lines = _SourceLines(source_dirs)
    lifetimes = _lifetimes(info)
    nodes: List[Dict[str, Any]] = []

    def binding_node(kind: str, name: str, tensor: Dict[str, Any]) -> str:
        node_id = f"{kind}:{name}"
        nodes.append({"id": node_id, "label": name, "namespace": f"{kind}s", "attrs": [_kv("kind", kind)],
                      "incomingEdges": [], "inputsMetadata": [],
                      "outputsMetadata": [{"id": "0", "attrs": [_kv("tensor_shape", _type_text(tensor))]}]})
        return node_id

    # The tensor of each input, output and state, by (storage, binding number).
    bound = {(t["storage"], t["index"]): i for i, t in enumerate(tensors) if "index" in t}
    # The nodes tensors come from before any step writes them.
    source_of: Dict[int, List[str]] = {}
    for kind, bindings in (("input", info["inputs"]), ("state", info["states"])):
        for index, binding in enumerate(bindings):
            tensor_index = bound[(kind, index)]
            source_of[tensor_index] = [binding_node(kind, binding["name"], tensors[tensor_index])]

    writers: Dict[int, List[str]] = {}  # the steps that wrote each tensor so far
    weight_bytes: Dict[str, float] = {}
    written_bytes: Dict[str, float] = {}
    live_bytes: Dict[str, float] = {}
    times: Dict[str, float] = {}
    profiled = {entry["step"]: entry for entry in (profile or {}).get("steps", [])}
    for index, step in enumerate(steps):
        node_id = f"step{index}"
        attrs = [_kv("step", index), _kv("op", step["op"])]
        if "cpu_kernels" in info:
            attrs.append(_kv("kernels", f"{info['cpu_kernels']} (this CPU)"))
        skip = {"op", "location", "sources", "namespace", "fused_by", "operands"}
        for key, value in step.items():
            if key not in skip:
                attrs.append(_kv(key, value))
        # "model.ein:25:7  s = einsum(...)": the file by its name, the line's text where found.
        for number, source in enumerate(step["sources"]):
            text = lines.line(source)
            shown = os.path.basename(source)
            attrs.append(_kv(f"source {number}", f"{shown}  {text}" if text else shown))
        if step["fused_by"]:
            attrs.append(_kv("fused_by", ", ".join(step["fused_by"])))
        if step["namespace"]:
            attrs.append(_kv("block", step["namespace"]))
        if step_weights[index]:
            attrs.append(_kv("weights", ", ".join(step_weights[index])))
        edges: List[Dict[str, str]] = []
        inputs_metadata: List[Dict[str, Any]] = []
        outputs_metadata: List[Dict[str, Any]] = []
        reads = [operand for operand in step["operands"] if not operand["written"]]
        seen_weights = set()
        weights_read = 0
        for number, operand in enumerate(reads):
            tensor = tensors[operand["tensor"]]
            if tensor["storage"] == "weights":
                if operand["tensor"] not in seen_weights:
                    seen_weights.add(operand["tensor"])
                    weights_read += tensor["bytes"]
                continue
            for source in writers.get(operand["tensor"], source_of.get(operand["tensor"], [])):
                edges.append({"sourceNodeId": source, "sourceNodeOutputId": "0", "targetNodeInputId": str(number)})
            inputs_metadata.append({"id": str(number), "attrs": [
                _kv("role", operand["role"]), _kv("tensor", operand["tensor"]),
                _kv("tensor_shape", _type_text(tensor))]})
        written = [operand for operand in step["operands"] if operand["written"]]
        arena_written = 0
        for number, operand in enumerate(written):
            tensor = tensors[operand["tensor"]]
            meta = [_kv("role", operand["role"]), _kv("tensor", operand["tensor"]),
                    _kv("tensor_shape", _type_text(tensor)), _kv("storage", tensor["storage"])]
            if tensor["storage"] == "arena":
                arena_written += tensor["bytes"]
                first, last = lifetimes[operand["tensor"]]
                meta += [_kv("arena_offset", tensor["offset"]), _kv("bytes", tensor["bytes"]),
                         _kv("lifetime", f"steps {first}..{last}")]
            outputs_metadata.append({"id": str(number), "attrs": meta})
            writers.setdefault(operand["tensor"], [])
            if node_id not in writers[operand["tensor"]]:
                writers[operand["tensor"]].append(node_id)
        weight_bytes[node_id] = weights_read
        written_bytes[node_id] = arena_written
        live_bytes[node_id] = sum(tensors[t]["bytes"] for t, (first, last) in lifetimes.items()
                                  if first <= index <= last)
        attrs.append(_kv("weight_bytes", weights_read))
        if index in profiled:
            times[node_id] = profiled[index]["median_ms"]
            attrs.append(_kv("median_ms", f"{profiled[index]['median_ms']:.4f}"))
        nodes.append({"id": node_id, "label": step["op"], "namespace": namespaces[index].replace(".", "/"),
                      "attrs": attrs, "incomingEdges": _unique(edges), "inputsMetadata": inputs_metadata,
                      "outputsMetadata": outputs_metadata})

    for index, binding in enumerate(info["outputs"]):
        tensor_index = bound[("output", index)]
        node_id = binding_node("output", binding["name"], tensors[tensor_index])
        nodes[-1]["incomingEdges"] = [{"sourceNodeId": source, "sourceNodeOutputId": "0", "targetNodeInputId": "0"}
                                      for source in writers.get(tensor_index, [])]
    node_data = {
        "weight bytes": _node_data("weight bytes", weight_bytes),
        "arena bytes written": _node_data("arena bytes written", written_bytes),
        "live arena bytes": _node_data("live arena bytes", live_bytes),
    }
    if times:
        node_data["time (ms)"] = _node_data("time (ms)", times)
    return {"graph": {"id": graph_id, "nodes": nodes}, "node_data": node_data}


def _unique(edges: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """Each (source, target input) once: a step may read one tensor through several views."""
    seen = set()
    result = []
    for edge in edges:
        key = (edge["sourceNodeId"], edge["targetNodeInputId"])
        if key not in seen:
            seen.add(key)
            result.append(edge)
    return result
