"""Lesson 04's picture: value vectors as points in their convex hull, outputs as crosses among them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .display import describe_axes, number
from .arrays import _check_labels, to_numpy

__all__ = ["convex_hull", "values_plot"]


def convex_hull(points: Any) -> np.ndarray:
    """Lesson 04: Corners of the convex hull of 2-D points: ``(n, 2) -> (h, 2)``, counter-clockwise (Andrew's
    monotone chain: points on an edge are not corners, the first is not repeated; fewer than three distinct
    points: those points)."""
    array = to_numpy(points)
    if array.ndim != 2 or array.shape[-1] != 2:
        raise ValueError(f"points must have shape (n, 2), got {list(array.shape)}")
    pts = sorted(set(map(tuple, array.tolist())))
    if len(pts) < 3:
        return np.array(pts, dtype=np.float64).reshape(-1, 2)

    def turn(o: tuple, a: tuple, b: tuple) -> float:  # > 0 for a left (counter-clockwise) turn
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple] = []
    upper: list[tuple] = []
    for chain, ordered in ((lower, pts), (upper, pts[::-1])):
        for p in ordered:
            while len(chain) >= 2 and turn(chain[-2], chain[-1], p) <= 0:
                chain.pop()
            chain.append(p)
    return np.array(lower[:-1] + upper[:-1], dtype=np.float64)


def values_plot(
    values: Any,
    outputs: Any | None = None,
    labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """Lesson 04: Value vectors ``(N_k, 2)`` as labelled dots inside their shaded convex hull, and attention
    outputs ``(N_q, 2)`` (optional) as crosses. Returns the artists by name: ``"values"``, ``"outputs"`` (None
    without outputs), ``"hull"``, ``"labels"``."""
    v = to_numpy(values)
    if v.ndim != 2 or v.shape[-1] != 2:
        raise ValueError(f"values must have shape (N_k, 2) (two-dimensional value vectors), got {list(v.shape)}")
    _check_labels(labels, v.shape[0], "labels", v.shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 4.2))
    artists: dict[str, Any] = {}
    corners = convex_hull(v)
    artists["hull"] = ax.fill(corners[:, 0], corners[:, 1], facecolor="#cfe0f3", edgecolor="#5b7fb5",
                              linewidth=1.2, zorder=0, label="convex hull of the values")[0]
    artists["values"] = ax.scatter(v[:, 0], v[:, 1], s=45, color="#1f5fa8", zorder=3, label="values v")
    artists["labels"] = [ax.annotate(text, (x, y), xytext=(5, 4), textcoords="offset points", fontsize=9,
                                     color="#1f5fa8", zorder=6) for text, (x, y) in zip(labels or [], v)]
    artists["outputs"] = None
    if outputs is not None:
        o = to_numpy(outputs)
        if o.ndim != 2 or o.shape[-1] != 2:
            raise ValueError(f"outputs must have shape (N_q, 2), got {list(o.shape)}")
        artists["outputs"] = ax.scatter(o[:, 0], o[:, 1], s=60, marker="X", color="#e08214", edgecolor="black",
                                        linewidth=0.5, zorder=4, label="outputs weights @ v")
    pad = 0.15 * max(float(np.ptp(v[:, 0])), float(np.ptp(v[:, 1])), 1e-6)
    ax.set(xlim=(v[:, 0].min() - pad, v[:, 0].max() + 2 * pad), ylim=(v[:, 1].min() - pad, v[:, 1].max() + pad),
           xlabel="value feature 0", ylabel="value feature 1")
    ax.set_aspect("equal", adjustable="box")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)  # outside: never hides a point
    if title:
        ax.set_title(title)
    describe_axes(ax, lambda: values_sentence(artists, labels))
    return artists


def values_sentence(artists: dict[str, Any], labels: Sequence[str] | None) -> str:
    """Where :func:`values_plot`'s dots and crosses are (read from its artists, so after ``set_offsets`` too)."""
    points = np.asarray(artists["values"].get_offsets())
    names = list(labels) if labels is not None else [f"value {i}" for i in range(len(points))]
    text = ("Value vectors as dots in the plane of value features 0 and 1, inside their shaded convex hull: "
            + ", ".join(f"{n} ({number(x)}, {number(y)})" for n, (x, y) in zip(names, points)))
    if artists["outputs"] is not None:
        outputs = np.asarray(artists["outputs"].get_offsets())
        text += "; outputs weights @ v as crosses: " + ", ".join(f"({number(x)}, {number(y)})" for x, y in outputs)
    return text + "."
