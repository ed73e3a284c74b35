"""A forward pass drawn as a column of boxes, one per step, each with its shape and named axes.

(The data flow between the steps, with its edges, is :mod:`.dataflow`.)
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from .dataflow import _check_steps
from .display import describe_axes

__all__ = ["pipeline_diagram"]


def pipeline_diagram(
    steps: Sequence[tuple[str, Sequence[int], str]], *, title: str | None = None
) -> Axes:
    """Lesson 00: Draw a pipeline as a column of boxes, one per step, each with its shape and named axes.

    ``steps``: ``(name, shape, axes)`` triples in order, e.g. ``("q", [13, 4, 100, 16], "batch H tokens head_dim")``.
    Returns the axes.
    """
    _check_steps(steps)
    _, ax = plt.subplots(figsize=(8.5, 0.55 * len(steps) + 0.5))
    n = len(steps)
    for i, (name, shape, axes) in enumerate(steps):
        y = n - 1 - i
        named = ", ".join(f"{a}={s}" for a, s in zip(axes.split(), shape))
        ax.text(0.0, y, name, ha="right", va="center", fontsize=10, fontweight="bold")
        box = ax.text(0.06, y, f"{list(shape)}", ha="left", va="center", fontsize=10, family="monospace",
                      bbox=dict(boxstyle="round,pad=0.3", facecolor="#e8eef7", edgecolor="#5b7fb5"))
        ax.annotate(named, xy=(1.0, 0.5), xycoords=box, xytext=(10, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=8.5, color="#404040")
        if i < n - 1:
            ax.annotate("", xy=(0.03, y - 0.72), xytext=(0.03, y - 0.28),
                        arrowprops=dict(arrowstyle="->", color="#5b7fb5"))
    ax.set(xlim=(-0.3, 1.3), ylim=(-0.6, n - 0.4))
    ax.axis("off")
    if title:
        ax.set_title(title)
    describe_axes(ax, "Diagram of the steps in order, each with its shape: " + "; then ".join(
        f"{name} {list(shape)} ({', '.join(f'{a} {s}' for a, s in zip(axes.split(), shape))})"
        for name, shape, axes in steps) + ".")
    return ax
