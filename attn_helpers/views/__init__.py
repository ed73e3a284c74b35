"""views: printouts and pictures. They take tensors or arrays and import no math.

Names load on first use, so ``attn_helpers.views.show`` does not import matplotlib; but in an IPython kernel,
importing ``views`` sets up how figures are shown (sharp at 2x, with a description: :mod:`.display`)."""

from __future__ import annotations

import builtins
import importlib
from typing import Any

_HOME = {
    # printouts (torch only)
    "describe": "shapes",
    "show": "shapes",
    "shape_rows": "shapes",
    "shape_table": "shapes",
    "shape_trace": "shapes",
    "show_source": "source",
    "source_text": "source",
    # pictures (matplotlib): arrays and colours every picture uses
    "to_numpy": "arrays",
    "WEIGHTS_CMAP": "colours",
    "SIGNED_CMAP": "colours",
    "NAN_COLOUR": "colours",
    "HEAD_COLOURS": "colours",
    "GROWTH_COLOURS": "colours",
    "cmap_with_nan": "colours",
    "text_colour": "colours",
    # one matrix
    "heatmap": "heatmaps",
    "annotate_cells": "heatmaps",
    "block_heatmap": "heatmaps",
    # many matrices
    "head_grid": "grids",
    "LiveHeadGrid": "grids",
    "origin_grid": "grids",
    "plot_all_heads": "grids",
    # diagrams of a forward pass
    "pipeline_diagram": "diagrams",
    "LATE": "dataflow",
    "traced_flow": "dataflow",
    "flow_layout": "dataflow",
    "dataflow_diagram": "dataflow",
    # how a figure is shown: sharp, with a description (alt text)
    "describe_figure": "display",
    "describe_axes": "display",
    "figure_description": "display",
    "show_figures_sharp": "display",
    "figure_html": "display",
    "UNDESCRIBED": "display",
    # lesson pictures
    "convex_hull": "values",
    "values_plot": "values",
    "growth_plot": "curves",
    "plot_learning_curves": "learning",
    "plot_snapshots": "learning",
    "weights_panel": "learning",
    "head_name": "learning",
    "runs_by_name": "learning",
    "plot_circuit_forming": "learning",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    if name in set(_HOME.values()):  # a module of this room, e.g. attn_helpers.views.heatmaps
        return importlib.import_module(f".{name}", __name__)
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _in_ipython() -> bool:
    """Whether an IPython shell runs this code (IPython puts ``get_ipython`` into builtins; nothing is imported)."""
    return getattr(builtins, "get_ipython", lambda: None)() is not None


if _in_ipython():
    importlib.import_module(".display", __name__).show_figures_sharp()
