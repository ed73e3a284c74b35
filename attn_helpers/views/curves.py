"""How a cost grows with the sequence length (lesson 09): log-log lines with their fitted slopes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .arrays import to_numpy
from .colours import GROWTH_COLOURS
from .display import describe_axes, lines_sentence

__all__ = ["growth_plot"]


def growth_plot(
    sizes: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    ax: Axes | None = None,
    ylabel: str = "",
    xlabel: str = "sequence length N",
    title: str | None = None,
) -> dict[str, Any]:
    """Lesson 09: One line per entry of ``series`` (name -> one value per size) on log-log axes, each labelled
    with the slope of its least-squares line there: a cost that grows like ``N ** p`` is a straight line of slope
    ``p``. Returns ``{"lines": {name: Line2D}, "slopes": {name: fitted slope}}``.
    """
    x = np.asarray(sizes, dtype=np.float64)
    if x.ndim != 1 or len(x) < 2 or (x <= 0).any():
        raise ValueError(f"sizes must be at least two positive numbers, got {list(sizes)}")
    if not series:
        raise ValueError("series must name at least one line, got none")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 3.6))
    lines, slopes = {}, {}
    for i, (name, values) in enumerate(series.items()):
        y = to_numpy(values)
        if y.shape != x.shape or (y <= 0).any():
            raise ValueError(f"series[{name!r}] must hold {len(x)} positive values, one per size; "
                             f"got shape {list(y.shape)} with minimum {y.min() if y.size else 'none'}")
        slopes[name] = float(np.polyfit(np.log(x), np.log(y), 1)[0])
        lines[name], = ax.loglog(x, y, "o-", color=GROWTH_COLOURS[i % len(GROWTH_COLOURS)],
                                 label=f"{name} (slope {slopes[name]:.2f})")
    ax.set_xticks(x, [f"{v:g}" for v in x])
    ax.minorticks_off()
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    describe_axes(ax, lambda: lines_sentence(ax, "Log-log plot"))
    return {"lines": lines, "slopes": slopes}
