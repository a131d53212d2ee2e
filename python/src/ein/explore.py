"""Opens a model in Model Explorer with ein's adapter and overlays.

    python -m ein.explore model.einb                    # or model.ein [--weights w.safetensors]
    python -m ein.explore model.einb --profile --dims t=128   # time per step, at these dims
    python -m ein.explore ir/                           # einc --dump-ir's folder (or one of its files): the IR after each pass
    python -m ein.explore model.einb --json graph.json  # the graph and overlays as JSON, no viewer

The viewer shows one node per kernel step; its overlays (node data) colour the
steps by weight bytes, arena bytes written, live arena bytes and, with
--profile, median time.
"""
import argparse
import json
import os
import sys
import tempfile

from ._errors import Error
from .explorer import convert_ir_dump, convert_model, profile_model
from .explorer._convert import ir_dump_files


def _dims(text):
    dims = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = item.partition("=")
        if not value.strip().isdigit():
            raise argparse.ArgumentTypeError(f"--dims takes NAME=VALUE,... (got {item!r})")
        dims[name.strip()] = int(value)
    return dims


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ein.explore", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a compiled model (.einb), a .ein model, or an einc --dump-ir folder")
    parser.add_argument("--weights", help="weights for a .ein model (.safetensors); random ones otherwise")
    parser.add_argument("--profile", nargs="?", const=10, type=int, metavar="RUNS",
                        help="run the model RUNS times (default 10) on random inputs and overlay each step's median time")
    parser.add_argument("--dims", type=_dims, default={}, help="the ranged dims' values for --profile (default: their maxima)")
    parser.add_argument("--json", metavar="FILE", help="write the graph and overlays as JSON to FILE instead of opening the viewer")
    parser.add_argument("--host", default="localhost", help="the viewer's host (default localhost)")
    parser.add_argument("--port", type=int, default=8080, help="the viewer's port (default 8080)")
    parser.add_argument("--no-browser", action="store_true", help="start the viewer without opening a browser")
    args = parser.parse_args(argv)
    # A .ein model is compiled into it; it lives as long as the viewer.
    with tempfile.TemporaryDirectory(prefix="ein-explore-") as scratch:
        return _explore(args, scratch)


def _explore(args, scratch: str) -> int:
    try:
        if os.path.isdir(args.model) or args.model.endswith(".mlir"):
            collection = convert_ir_dump(args.model)
            converted = {"graph_collection": collection, "node_data": collection.pop("node_data")}
            # The viewer opens files by their extension: the folder by its first dump.
            artifact = ir_dump_files(args.model)[0]
        else:
            artifact = args.model
            if args.model.endswith(".ein"):
                # Compiled once: the viewer's adapter and the profile read the artifact.
                from ._compile import compile as compile_model
                model = compile_model(args.model, args.weights, random_weights=None if args.weights else 0)
                artifact = os.path.join(scratch, os.path.splitext(os.path.basename(args.model))[0] + ".einb")
                model.save(artifact)
            profile = profile_model(artifact, runs=args.profile, dims=args.dims) if args.profile else None
            converted = convert_model(artifact, profile=profile)
    except (Error, OSError, ValueError, RuntimeError) as error:
        print(f"ein.explore: {error}", file=sys.stderr)
        return 1

    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(converted, handle, indent=1)
        return 0
    try:
        import model_explorer
    except ImportError:
        print("ein.explore: the viewer needs ai-edge-model-explorer (pip install 'ein[explorer]'); "
              "--json FILE writes the graph without it", file=sys.stderr)
        return 1
    config = model_explorer.config().add_model_from_path(os.path.abspath(artifact), adapterId="ein")
    for name, data in converted["node_data"].items():
        # A model's overlays are its one graph's; an IR dump's are by graph already.
        by_graph = {converted["graph"]["id"]: data} if "graph" in converted else data
        config.add_node_data(name, json.dumps(by_graph))
    model_explorer.visualize_from_config(config, host=args.host, port=args.port, extensions=["ein.explorer"],
                                         no_open_in_browser=args.no_browser)
    return 0


if __name__ == "__main__":
    sys.exit(main())
