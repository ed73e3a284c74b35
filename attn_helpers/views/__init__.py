"""views: printouts and pictures. They take tensors or arrays and import no math.

Names load on first use, so ``attn_helpers.views.show`` does not import matplotlib."""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "describe": "shapes",
    "show": "shapes",
    "shape_rows": "shapes",
    "shape_table": "shapes",
    "shape_trace": "shapes",
    "show_source": "source",
    "FLOWS": "dataflow",
    "LATE": "dataflow",
    "flow_of": "dataflow",
    "traced_flow": "dataflow",
    "flow_layout": "dataflow",
    "dataflow_diagram": "dataflow",
    "to_numpy": "plotting",
    "heatmap": "plotting",
    "annotate_cells": "plotting",
    "head_grid": "plotting",
    "LiveHeadGrid": "plotting",
    "layer_head_grid": "plotting",
    "pipeline_diagram": "plotting",
    "cmap_with_nan": "plotting",
    "convex_hull": "plotting",
    "values_plot": "plotting",
    "NAN_COLOUR": "plotting",
    "WEIGHTS_CMAP": "plotting",
    "SIGNED_CMAP": "plotting",
    "HEAD_COLOURS": "plotting",
    "block_heatmap": "plotting",
    "origin_grid": "plotting",
    "growth_plot": "plotting",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    if name in set(_HOME.values()):  # a module of this room, e.g. attn_helpers.views.plotting
        return importlib.import_module(f".{name}", __name__)
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
