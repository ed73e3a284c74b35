"""Heatmaps of attention: one matrix with token labels, its values written in, and weight matrices with named
blocks of rows or columns. Each returns its artists instead of printing: a plotting cell's only output is its picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.colors import Colormap, Normalize

from .arrays import _check_labels, _matrix
from .colours import HEAD_COLOURS, SIGNED_CMAP, WEIGHTS_CMAP
from .display import describe_axes, matrix_sentence, number
from .labels import _axes_points, _cell_inches, _label_axes

__all__ = ["Cells", "cells", "heatmap", "annotate_cells", "block_heatmap"]


ANNOTATE_MAX = 12  # matrices up to this many rows and columns get their values written in


class Cells(QuadMesh):
    """Lessons 00-14 (every heatmap): a matrix ``(rows, cols)`` drawn as one coloured cell per value, centred on
    integer coordinates with row 0 at the top, as ``imshow(..., interpolation="nearest")`` draws it, and with the
    same pixels to 1/255 a channel (``tests/views/test_cells.py``). Agg fills the cells as one polygon mesh
    instead of resampling an image to the axes' pixels, so drawing it again after :meth:`set_data` (an
    explorer's every move) is 9 to 24 times cheaper: 8 x 8 and 32 x 32 cells in a 608-px panel
    (``python -m benchmarks.widgets --cells``). A ``QuadMesh``: ``get_array``, ``cmap``, ``norm``, a colour
    bar's mappable, as for an image."""

    def __init__(self, array: np.ndarray, *, cmap: Colormap | str, vmin: float, vmax: float) -> None:
        rows, cols = array.shape
        x, y = np.meshgrid(np.arange(cols + 1) - 0.5, np.arange(rows + 1) - 0.5)  # the cells' corners
        super().__init__(np.stack([x, y], axis=-1), antialiased=False, cmap=cmap, norm=Normalize(vmin, vmax))
        self.set_array(array)

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, cols)``: the matrix it draws."""
        rows, cols = self.get_coordinates().shape[:2]
        return rows - 1, cols - 1

    def set_data(self, values: Any) -> None:
        """Show ``values``: a matrix of the cells' shape, or a smaller one in the top-left cells with the rest blank
        (an explorer whose matrix changes width keeps cells as wide as the widest and moves the axis limits)."""
        array = np.asarray(values, dtype=np.float64)
        rows, cols = self.shape
        if array.ndim != 2 or array.shape[0] > rows or array.shape[1] > cols:
            raise ValueError(f"values must be a matrix of at most the cells' shape {[rows, cols]}, got "
                             f"{list(array.shape)}")
        # the cells beyond the matrix NaN, drawn in the colour map's "bad" colour
        self.set_array(np.pad(array, ((0, rows - array.shape[0]), (0, cols - array.shape[1])), constant_values=np.nan))


def cells(ax: Axes, array: np.ndarray, *, cmap: Colormap | str, vmin: float, vmax: float,
          aspect: str = "auto") -> Cells:
    """Draw ``array (rows, cols)`` on ``ax`` as :class:`Cells` over ``-0.5 ... cols - 0.5`` (x) and
    ``rows - 0.5 ... -0.5`` (y, row 0 at the top), as ``imshow`` does; returns them."""
    mesh = Cells(np.asarray(array), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.add_collection(mesh, autolim=False)
    rows, cols = mesh.shape
    ax.set(xlim=(-0.5, cols - 0.5), ylim=(rows - 0.5, -0.5), aspect=aspect)
    return mesh


def heatmap(
    values: Any,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "key",
    ylabel: str = "query",
    cmap: str | Colormap | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
    fmt: str = "{:.2f}",
    fontsize: float | None = None,
    colorbar_label: str | None = None,
    x_ticks: bool = True,
    y_ticks: bool = True,
    text_labels: bool = False,
) -> Cells:
    """Lessons 00-04, 07-12 and 14:
    Draw one matrix (e.g. attention weights ``(N_q, N_k)``) with token labels and a colour bar.

    ``x_labels`` label the columns (keys), ``y_labels`` the rows (queries; default: ``x_labels`` when square).
    ``annotate=None`` writes the values in when there are at most ``ANNOTATE_MAX`` rows and columns. Weights in
    [0, 1] use ``viridis`` from 0 to 1; signed values the diverging ``RdBu_r`` centred on zero. ``fontsize=None``
    shrinks the tick labels (down to ``MIN_FONTSIZE``) to fit. Returns the cells. A grid's inner panels pass
    ``x_ticks=False`` / ``y_ticks=False`` (each tick costs a few milliseconds to make and draw, and 32 tokens x 8
    panels add up); ``text_labels=True`` writes the labels as plain text instead of ticks (same places, much faster
    to lay out and draw: for explorers).
    """
    array = _matrix(values, "values")
    n_rows, n_cols = array.shape
    if y_labels is None and x_labels is not None and n_rows == n_cols:
        y_labels = x_labels
    _check_labels(x_labels, n_cols, "x_labels", array.shape)
    _check_labels(y_labels, n_rows, "y_labels", array.shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, _cell_inches(n_cols) * n_cols + 1.5),
                                      max(2.5, _cell_inches(n_rows) * 0.9 * n_rows + 1.0)))
    finite = array[np.isfinite(array)]
    is_weights = finite.size > 0 and finite.min() >= 0.0 and finite.max() <= 1.0 + 1e-6
    if cmap is None:
        cmap = WEIGHTS_CMAP if is_weights else SIGNED_CMAP
    if vmin is None and vmax is None:
        if is_weights:
            vmin, vmax = 0.0, 1.0
        else:
            bound = float(np.abs(finite).max()) if finite.size else 1.0
            vmin, vmax = -(bound or 1.0), bound or 1.0
    image = cells(ax, array, cmap=cmap, vmin=vmin, vmax=vmax)
    _label_axes(ax, x_labels, y_labels, n_cols, n_rows, xlabel, ylabel, fontsize, x_ticks=x_ticks, y_ticks=y_ticks,
                text_labels=text_labels)
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = n_rows <= ANNOTATE_MAX and n_cols <= ANNOTATE_MAX
    if annotate:
        annotate_cells(ax, array, image, fmt=fmt)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)
    describe_image(image, x_labels, y_labels, title=title, xlabel=xlabel, ylabel=ylabel)
    return image


def describe_image(image: Cells, x_labels: Sequence[str] | None, y_labels: Sequence[str] | None, *,
                   title: str | None, xlabel: str, ylabel: str, what: str = "Heatmap") -> None:
    """Describe ``image``'s panel from the matrix it shows when the figure is shown (so after ``set_data`` too)."""
    def sentence() -> str:
        array = np.ma.filled(np.ma.asarray(image.get_array(), dtype=np.float64), np.nan)
        square = array.shape[0] == array.shape[1]
        rows = y_labels if y_labels is not None else (x_labels if square else None)
        named = [labels if labels is not None and all(str(t) for t in labels) else None for labels in (x_labels, rows)]
        return matrix_sentence(array, *named, title=title, what=what, xlabel=xlabel or "key",
                               ylabel=ylabel or "query")
    describe_axes(image.axes, sentence)


def annotate_cells(ax: Axes, array: np.ndarray, image: Cells, *, fmt: str = "{:.2f}") -> list:
    """Write each value of ``array (N_q, N_k)`` in its cell, dark on light colours and light on dark, in a size
    fitted to the cells (at most 8 points). Returns the text artists."""
    n_rows, n_cols = array.shape
    width_pt, height_pt = _axes_points(ax)
    fontsize = float(np.clip(min(width_pt / max(n_cols, 1) / 3.2, height_pt / max(n_rows, 1) / 1.8), 4.0, 8.0))
    light = image.get_cmap()(image.norm(array))[..., :3] @ [0.299, 0.587, 0.114] > 0.5  # each cell's luminance
    return [ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=fontsize,
                    color="black" if light[i, j] else "white") for (i, j), value in np.ndenumerate(array)]


def block_heatmap(
    values: Any,
    *,
    row_blocks: Sequence[tuple[str, int]] | None = None,
    col_blocks: Sequence[tuple[str, int]] | None = None,
    block_colours: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
    colorbar: bool = True,
) -> Cells:
    """Lessons 05 and 06:
    A matrix ``(rows, cols)`` (e.g. a weight) as a signed heatmap with named groups of rows or columns.

    ``col_blocks`` (or ``row_blocks``): ``(label, size)`` pairs in order, sizes adding up to the number of columns
    (rows), e.g. ``[("head 0", 16), ("head 1", 16), ...]``. Black lines separate the blocks, each named on a strip
    of its colour (``block_colours``, default :data:`HEAD_COLOURS`) above the matrix (columns) or right of it (rows).
    """
    array = _matrix(values, "values")
    n_rows, n_cols = array.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12.0, 0.06 * n_cols + 3.0), min(8.0, 0.06 * n_rows + 2.0)))
    bound = float(np.abs(array).max()) or 1.0
    image = cells(ax, array, cmap=SIGNED_CMAP, vmin=-bound, vmax=bound)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    colours = list(block_colours) if block_colours is not None else None
    for blocks, along_cols in ((col_blocks, True), (row_blocks, False)):
        if not blocks:
            continue
        total = n_cols if along_cols else n_rows
        sizes = [int(size) for _, size in blocks]
        if any(size < 1 for size in sizes) or sum(sizes) != total:
            raise ValueError(f"{'col_blocks' if along_cols else 'row_blocks'} sizes {sizes} must be positive and add "
                             f"up to {total} for a matrix of shape {list(array.shape)}, but they add up to "
                             f"{sum(sizes)}")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        if colours is not None and len(colours) < len(blocks):
            raise ValueError(f"block_colours has {len(colours)} colours for {len(blocks)} blocks")
        # columns: lines across, strips above the matrix; rows: lines down, strips right of it (x and y swapped)
        line = ax.axvline if along_cols else ax.axhline
        transform = ax.get_xaxis_transform() if along_cols else ax.get_yaxis_transform()
        place = (lambda along, across: (along, across)) if along_cols else (lambda along, across: (across, along))
        for i, ((label, size), start) in enumerate(zip(blocks, starts)):
            colour = colours[i] if colours is not None else HEAD_COLOURS[i % len(HEAD_COLOURS)]
            if start:
                line(start - 0.5, color="black", linewidth=1.5)
            ax.add_patch(plt.Rectangle(place(start - 0.5, 1.01), *place(size, 0.07), transform=transform,
                                       facecolor=colour, edgecolor="white", clip_on=False))
            ax.text(*place(start - 0.5 + size / 2, 1.045), label, transform=transform, ha="center", va="center",
                    fontsize=8, rotation=0 if along_cols else 90, color="black" if colour != "#000000" else "white")
    if title:
        strip_points = 0.085 * ax.get_position().height * ax.figure.get_figheight() * 72  # strip + gap, in points
        ax.set_title(title, pad=6 + strip_points if col_blocks else 6)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.10 if row_blocks else 0.04)
    groups = [f"{'columns' if cols else 'rows'} in blocks " + ", ".join(f"{label} ({size})" for label, size in blocks)
              for blocks, cols in ((col_blocks, True), (row_blocks, False)) if blocks]
    describe_axes(ax, f"Signed heatmap{f' {title!r}' if title else ''} of a {n_rows} by {n_cols} matrix, values "
                      f"{number(array.min())} to {number(array.max())}"
                      + "".join(f"; {g}" for g in groups) + ".")
    return image
