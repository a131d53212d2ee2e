"""ein in Google's Model Explorer: a compiled model drawn step by step.

    model-explorer model.einb --extensions=ein.explorer     # the viewer's own command
    python -m ein.explore model.einb --profile               # with the overlays (time, memory)

``ein.explorer.main`` is the adapter extension Model Explorer loads (it needs the
``ai-edge-model-explorer`` package: ``pip install 'ein[explorer]'``);
``explorer_graph`` turns ``Model.inspect()`` into the viewer's graph JSON without it.
"""
from ._graph import explorer_graph
from ._convert import convert_model, convert_ir_dump, profile_model

__all__ = ["explorer_graph", "convert_model", "convert_ir_dump", "profile_model"]
