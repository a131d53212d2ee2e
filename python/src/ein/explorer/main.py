"""The Model Explorer adapter extension: ``model-explorer MODEL --extensions=ein.explorer``.

Opens compiled models (``.einb``), ``.ein`` models (compiled here with random
weights: the graph does not depend on them) and IR dumps (``einc --dump-ir``'s
folder, or one of its ``NN-pass.mlir`` files: one graph per pass). Needs
``ai-edge-model-explorer``.
"""
import os
from typing import Dict

import dacite
from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs, graph_builder

from ._convert import convert_ir_dump, convert_model


def _graph(data: Dict) -> graph_builder.Graph:
    return dacite.from_dict(graph_builder.Graph, data)


class EinAdapter(Adapter):
    """One node per kernel step, grouped by the model's namespaces."""

    metadata = AdapterMetadata(
        id="ein",
        name="ein",
        description="ein models: compiled artifacts (.einb, one node per kernel step), .ein files and "
                    "einc --dump-ir folders (the IR after each pass)",
        source_repo="",
        fileExts=["einb", "ein", "mlir"],
    )

    def convert(self, model_path: str, settings: Dict) -> ModelExplorerGraphs:
        if os.path.isdir(model_path) or model_path.endswith(".mlir"):
            collection = convert_ir_dump(model_path)
            return {"graphCollections": [graph_builder.GraphCollection(
                label=collection["label"], graphs=[_graph(g) for g in collection["graphs"]])]}
        return {"graphs": [_graph(convert_model(model_path)["graph"])]}
