"""Heatmaps of attention: one matrix with token labels, a grid of heads, a grid of layers x heads.

Imports matplotlib (the math never does). Colour-blind-safe colormaps: ``viridis`` for weights in
[0, 1] and the diverging ``PuOr`` for signed values (scores, projections). Every function accepts
tensors on any device and with grad, draws into a given ``ax`` when asked, and returns the artists
instead of printing anything, so a plotting cell's only output is its picture.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.image import AxesImage
from matplotlib.transforms import ScaledTranslation

__all__ = ["to_numpy", "heatmap", "annotate_cells", "head_grid", "LiveHeadGrid", "layer_head_grid", "pipeline_diagram",
           "cmap_with_nan", "convex_hull", "values_plot", "NAN_COLOUR", "WEIGHTS_CMAP", "SIGNED_CMAP",
           "HEAD_COLOURS", "block_heatmap", "origin_grid", "growth_plot"]

WEIGHTS_CMAP = "viridis"
SIGNED_CMAP = "PuOr"
ANNOTATE_MAX = 12  # matrices up to this many rows and columns get their values written in


def to_numpy(values: Any) -> np.ndarray:
    """A float numpy array from a tensor (any device, with or without grad), array or nested list."""
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


def _matrix(values: Any, name: str) -> np.ndarray:
    array = to_numpy(values)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix (N_q, N_k), got shape {list(array.shape)}; "
                         "select one batch element and one head first, e.g. weights[0, h]")
    return array


def _check_labels(labels: Sequence[str] | None, n: int, name: str, shape: Sequence[int]) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix of shape {list(shape)} needs {n}")


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
) -> AxesImage:
    """Draw one matrix (e.g. attention weights ``(N_q, N_k)``) with token labels and a colour bar.

    ``x_labels`` label the columns (keys), ``y_labels`` the rows (queries; default: ``x_labels``
    when the matrix is square). Values are written in each cell when the matrix is small
    (``annotate=None`` decides by size: at most ``ANNOTATE_MAX`` rows and columns). Weights in
    [0, 1] use ``viridis`` from 0 to 1; signed values use the diverging ``PuOr`` centred on zero.
    ``fontsize`` of the tick labels: ``None`` shrinks them (down to ``MIN_FONTSIZE``) when many
    tokens share the axes; column labels turn vertical only when they do not fit side by side.
    Returns the image artist. A grid's inner panels pass ``x_ticks=False`` / ``y_ticks=False`` (no
    ticks or labels on that axis); ``text_labels=True`` writes the labels as plain text instead of
    ticks (same places, much faster to lay out and draw: for explorers).
    """
    return _heatmap(values, x_labels, y_labels, ax=ax, title=title, xlabel=xlabel, ylabel=ylabel, cmap=cmap,
                    vmin=vmin, vmax=vmax, annotate=annotate, colorbar=colorbar, fmt=fmt, fontsize=fontsize,
                    colorbar_label=colorbar_label, x_ticks=x_ticks, y_ticks=y_ticks, text_labels=text_labels)


def _heatmap(values: Any, x_labels: Sequence[str] | None, y_labels: Sequence[str] | None, *, ax: Axes | None,
             title: str | None, xlabel: str, ylabel: str, cmap: str | Colormap | None, vmin: float | None,
             vmax: float | None, annotate: bool | None, colorbar: bool, fmt: str, fontsize: float | None,
             colorbar_label: str | None, x_ticks: bool = True, y_ticks: bool = True,
             text_labels: bool = False) -> AxesImage:
    """:func:`heatmap`; a grid's inner panels pass ``x_ticks=False`` / ``y_ticks=False`` (no ticks
    at all: each tick costs a few milliseconds to make and draw, and 32 tokens x 8 panels add up);
    ``text_labels=True``: see :func:`_label_axes`."""
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
    image = ax.imshow(array, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
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
    return image


# --------------------------------------------------------------------------------------------
# Sizes: labels stay readable (never overlapping) however many tokens share an axis
# --------------------------------------------------------------------------------------------

MIN_FONTSIZE = 5.0  # points: tick labels never shrink below this
_TICK_PAD = 3.5 + 3.5  # points: tick length + gap between tick and label (matplotlib's defaults)


def _cell_inches(n: int) -> float:
    """Side of one cell of a stand-alone heatmap: roomy for a short sentence, smaller for many tokens."""
    return float(np.clip(5.4 / max(n, 1), 0.22, 0.45))


def _panel_inches(n: int) -> float:
    """Side of one panel of a grid of heatmaps over ``n`` tokens: 2.4 inches, or 7.5 points per token
    (room for 6-point labels) up to 3.4 inches, reached at about 32 tokens."""
    return float(np.clip(n * 7.5 / 72.0, 2.4, 3.4))


@functools.lru_cache(maxsize=1)
def _measuring_renderer() -> Any:
    from matplotlib.backends.backend_agg import RendererAgg

    return RendererAgg(1, 1, 72)  # at 72 dpi one pixel is one point


def _text_width(texts: Sequence[str], fontsize: float) -> float:
    """The widest of ``texts`` in points at ``fontsize`` (as matplotlib's Agg renderer lays them out)."""
    return max((_one_text_width(str(t), float(fontsize)) for t in texts), default=0.0)


@functools.lru_cache(maxsize=4096)
def _one_text_width(text: str, fontsize: float) -> float:
    """One text's width in points (remembered: an explorer measures the same labels on every layout)."""
    prop = FontProperties(size=fontsize)
    return _measuring_renderer().get_text_width_height_descent(text, prop, ismath=False)[0]


def _points(size: Any) -> float:
    return FontProperties(size=size).get_size_in_points()


def _fit_fontsize(n: int, length_pt: float) -> float:
    """Tick-label size for ``n`` labels along ``length_pt`` points: the default, or smaller so each
    label keeps 80% of its slot, in half points, never below ``MIN_FONTSIZE``."""
    base = _points(plt.rcParams["xtick.labelsize"])
    if n <= 0 or length_pt <= 0:
        return base
    return float(min(base, max(MIN_FONTSIZE, np.floor(1.6 * length_pt / n) / 2)))


def _tick_texts(labels: Sequence[str] | None, n: int) -> list[str]:
    if labels is not None:
        return [str(t) for t in labels]
    return [str(i) for i in range(n)] if n <= 40 else ["00"]


def _vertical(label_width: float, length_pt: float, n: int) -> bool:
    """Whether ``n`` column labels at most ``label_width`` points wide need to stand upright to keep
    a visible gap between neighbours along ``length_pt`` points."""
    return n > 0 and label_width > 0.8 * length_pt / n


def _axes_points(ax: Axes) -> tuple[float, float]:
    """Width and height of ``ax`` in points, as currently placed in its figure."""
    bbox, dpi = ax.bbox, ax.figure.dpi  # display pixels at the figure's dpi
    return bbox.width * 72.0 / dpi, bbox.height * 72.0 / dpi


def _label_axes(ax: Axes, x_labels, y_labels, n_cols: int, n_rows: int, xlabel: str, ylabel: str,
                fontsize: float | None = None, *, x_ticks: bool = True, y_ticks: bool = True,
                text_labels: bool = False) -> float:
    """Ticks at every cell with the tokens' labels, sized to fit; returns the tick-label size.
    ``x_ticks=False`` / ``y_ticks=False`` leave that axis without ticks or labels.

    ``text_labels=True`` writes the same labels in the same places as plain text, without tick
    marks: matplotlib makes five artists per tick, so for a grid of 8 panels x 32 tokens this lays
    out and draws in well under half the time (for explorers that lay their grid out anew when a
    slider moves). Labels given as ``None`` are numbered, as the ticks would be."""
    width_pt, height_pt = _axes_points(ax)
    if fontsize is None:
        fontsize = min(_fit_fontsize(n_cols if n_cols <= 40 or x_labels is not None else 8, width_pt),
                       _fit_fontsize(n_rows if n_rows <= 40 or y_labels is not None else 8, height_pt))
    if text_labels:
        x_texts = _tick_texts(x_labels, n_cols) if x_ticks else []
        vertical = _vertical(_text_width(x_texts, fontsize), width_pt, n_cols)
        _write_labels(ax, x_texts, _tick_texts(y_labels, n_rows) if y_ticks else [], fontsize, vertical,
                      xlabel, ylabel)
        return fontsize
    ax.set_xticks(range(n_cols) if x_ticks else [])
    ax.set_yticks(range(n_rows) if y_ticks else [])
    if x_labels is not None and x_ticks:
        ax.set_xticklabels(x_labels)
    if y_labels is not None and y_ticks:
        ax.set_yticklabels(y_labels)
    # Column labels stand upright only when they would not fit side by side.
    vertical = x_ticks and _vertical(_text_width(_tick_texts(x_labels, n_cols), fontsize), width_pt, n_cols)
    many = max(n_rows, n_cols) > 16
    ax.tick_params(labelsize=fontsize, length=2.0 if many else 3.5)
    ax.tick_params(axis="x", labelrotation=90 if vertical else 0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if n_cols > 40 and x_labels is None and x_ticks:
        ax.xaxis.set_major_locator(plt.MaxNLocator(8, integer=True))
    if n_rows > 40 and y_labels is None and y_ticks:
        ax.yaxis.set_major_locator(plt.MaxNLocator(8, integer=True))
    return fontsize


def _write_labels(ax: Axes, x_texts: Sequence[str], y_texts: Sequence[str], fontsize: float, vertical: bool,
                  xlabel: str, ylabel: str) -> list:
    """Token labels as text artists where tick labels would stand (no ticks), and the axis labels
    just beyond them; ``[]`` leaves that side unlabelled. Returns the token labels' artists."""
    ax.set_xticks([])
    ax.set_yticks([])
    x_height = (_text_width(x_texts, fontsize) if vertical else 1.2 * fontsize) if x_texts else 0.0
    ax.set_xlabel(xlabel, labelpad=_TICK_PAD + x_height)
    ax.set_ylabel(ylabel, labelpad=_TICK_PAD + _text_width(y_texts, fontsize) + 4.0)  # 4: matplotlib's gap
    return _text_row(ax, x_texts, fontsize, vertical) + _text_column(ax, y_texts, fontsize)


def _text_row(ax: Axes, texts: Sequence[str], fontsize: float, vertical: bool) -> list:
    """Column labels under ``ax`` as text artists, one per cell, where tick labels would stand."""
    below = ax.get_xaxis_transform() + ScaledTranslation(0.0, -_TICK_PAD / 72.0, ax.figure.dpi_scale_trans)
    return [ax.text(i, 0.0, text, transform=below, fontsize=fontsize, ha="center", va="top",
                    rotation=90 if vertical else 0) for i, text in enumerate(texts)]


def _text_column(ax: Axes, texts: Sequence[str], fontsize: float) -> list:
    """Row labels left of ``ax`` as text artists, one per cell, where tick labels would stand."""
    left = ax.get_yaxis_transform() + ScaledTranslation(-_TICK_PAD / 72.0, 0.0, ax.figure.dpi_scale_trans)
    return [ax.text(0.0, i, text, transform=left, fontsize=fontsize, ha="right", va="center_baseline")
            for i, text in enumerate(texts)]


def annotate_cells(ax: Axes, array: np.ndarray, image: AxesImage, *, fmt: str = "{:.2f}",
                   fontsize: float | None = None) -> list:
    """Write each value of ``array (N_q, N_k)`` in its cell, dark on light colours and light on dark.

    ``fontsize=None`` fits the text to the cell size (at most 8 points). Returns the text artists.
    """
    n_rows, n_cols = array.shape
    if fontsize is None:
        width_pt, height_pt = _axes_points(ax)
        fontsize = float(np.clip(min(width_pt / max(n_cols, 1) / 3.2, height_pt / max(n_rows, 1) / 1.8), 4.0, 8.0))
    texts = []
    norm, cmap = image.norm, image.get_cmap()
    for (i, j), value in np.ndenumerate(array):
        r, g, b, _ = cmap(norm(value))
        colour = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        texts.append(ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=fontsize, color=colour))
    return texts


@dataclass(frozen=True)
class _GridGeometry:
    """Where the panels and the colour bar of a grid go, in points, and the figure's size in inches."""

    width: float  # inches
    height: float  # inches
    panel: float  # inches: a panel's side when the figure has exactly this size
    left: float  # points from the figure's edges to the panels
    right: float
    bottom: float
    top: float
    wspace: float  # points between neighbouring panels
    hspace: float
    fontsize: float  # the tick labels' size
    vertical: bool  # column labels stand upright
    bar_gap: float = 12.0
    bar_width: float = 10.0

    def panel_rect(self, row: int, col: int) -> tuple[float, float, float, float]:
        """``(x0, y0, width, height)`` of panel ``(row, col)`` in figure fractions (for this size)."""
        x0 = self.left / 72.0 + col * (self.panel + self.wspace / 72.0)
        y_top = self.height - self.top / 72.0 - row * (self.panel + self.hspace / 72.0)
        return x0 / self.width, (y_top - self.panel) / self.height, self.panel / self.width, self.panel / self.height

    def colorbar_rect(self) -> tuple[float, float, float, float]:
        return (1.0 - (self.right - self.bar_gap) / 72.0 / self.width, self.bottom / 72.0 / self.height,
                self.bar_width / 72.0 / self.width, 1.0 - (self.bottom + self.top) / 72.0 / self.height)


def _grid_geometry(nrows: int, ncols: int, *, n_q: int, n_k: int, x_labels: Sequence[str] | None,
                   y_labels: Sequence[str] | None, panel_size: float | None, fontsize: float | None,
                   ylabel_lines: int, titles_every_row: bool, suptitle: bool, titles: Sequence[str] = ()
                   ) -> _GridGeometry:
    """The margins of a grid of ``nrows x ncols`` panels plus one colour bar, measured in points from
    the labels they must hold (tick labels only on the outer panels), so nothing overlaps and no
    layout engine has to run at draw time."""
    panel = panel_size or _panel_inches(max(n_q, n_k))
    if fontsize is None:
        fontsize = min(_fit_fontsize(n_k, panel * 72.0), _fit_fontsize(n_q, panel * 72.0))
    x_texts, y_texts = _tick_texts(x_labels, n_k), _tick_texts(y_labels, n_q)
    x_width = _text_width(x_texts, fontsize)
    vertical = _vertical(x_width, panel * 72.0, n_k)
    x_height = x_width if vertical else 1.2 * fontsize
    label_pt = 1.2 * _points(plt.rcParams["axes.labelsize"])
    title_pt = 1.2 * _points(plt.rcParams["axes.titlesize"]) + 6.0  # the top row always has titles
    left = 6.0 + ylabel_lines * label_pt + 4.0 + _text_width(y_texts, fontsize) + _TICK_PAD
    bottom = 6.0 + label_pt + 4.0 + x_height + _TICK_PAD
    top = 6.0 + title_pt + (1.2 * _points(plt.rcParams["figure.titlesize"]) + 8.0 if suptitle else 0.0)
    hspace = (title_pt if titles_every_row else 0.0) + 8.0
    # Neighbouring titles wider than their panels each overhang by half the excess: keep them apart.
    wspace = max(10.0, _text_width(titles, _points(plt.rcParams["axes.titlesize"])) - panel * 72.0 + 10.0)
    bar_gap, bar_width = 12.0, 10.0
    right = bar_gap + bar_width + _TICK_PAD + _text_width(["0.0", "1.0"], _points(plt.rcParams["ytick.labelsize"])) \
        + 4.0 + label_pt + 6.0
    width = (left + right + (ncols - 1) * wspace) / 72.0 + ncols * panel
    height = (bottom + top + (nrows - 1) * hspace) / 72.0 + nrows * panel
    return _GridGeometry(width, height, panel, left, right, bottom, top, wspace, hspace, fontsize, vertical,
                         bar_gap, bar_width)


def _grid(
    figure: Figure | None,
    nrows: int,
    ncols: int,
    *,
    n_q: int,
    n_k: int,
    x_labels: Sequence[str] | None,
    y_labels: Sequence[str] | None,
    panel_size: float | None,
    fontsize: float | None,
    ylabel_lines: int,
    titles_every_row: bool,
    suptitle: bool,
    resize_figure: bool,
    titles: Sequence[str] = (),
) -> tuple[Figure, np.ndarray, Axes, float]:
    """Lay out ``nrows x ncols`` panels plus one colour bar (:func:`_grid_geometry`). Returns the
    figure, the axes, the colour bar's axes and the tick-label size."""
    g = _grid_geometry(nrows, ncols, n_q=n_q, n_k=n_k, x_labels=x_labels, y_labels=y_labels,
                       panel_size=panel_size, fontsize=fontsize, ylabel_lines=ylabel_lines,
                       titles_every_row=titles_every_row, suptitle=suptitle, titles=titles)
    width, height = g.width, g.height
    if figure is None:
        figure = plt.figure(figsize=(width, height))
    else:
        figure.clear()
        if resize_figure:
            figure.set_size_inches(width, height)
        width, height = (float(s) for s in figure.get_size_inches())
    panel_w = max((width - (g.left + g.right + (ncols - 1) * g.wspace) / 72.0) / ncols, 0.1)
    panel_h = max((height - (g.bottom + g.top + (nrows - 1) * g.hspace) / 72.0) / nrows, 0.1)
    axes = figure.subplots(nrows, ncols, squeeze=False, gridspec_kw=dict(
        left=g.left / 72.0 / width, right=1.0 - g.right / 72.0 / width,
        bottom=g.bottom / 72.0 / height, top=1.0 - g.top / 72.0 / height,
        wspace=g.wspace / 72.0 / panel_w, hspace=g.hspace / 72.0 / panel_h))
    cax = figure.add_axes((1.0 - (g.right - g.bar_gap) / 72.0 / width, g.bottom / 72.0 / height,
                           g.bar_width / 72.0 / width, 1.0 - (g.bottom + g.top) / 72.0 / height))
    return figure, axes, cax, g.fontsize


class LiveHeadGrid:
    """:func:`head_grid`'s picture for an explorer: made once, then laid out again in place.

    ``LiveHeadGrid(figure, max_heads)`` makes ``max_heads`` panels and the colour bar once;
    :meth:`layout` then moves, resizes and relabels the panels it needs (as :func:`head_grid` with
    ``text_labels=True`` would place them; the figure takes the grid's size) and hides the others,
    instead of making new axes: making matplotlib axes is most of the cost of a new grid, and an
    explorer lays its grid out again whenever the number of heads or tokens moves.
    """

    def __init__(self, figure: Figure, max_heads: int, *, ncols: int = 4) -> None:
        if max_heads < 1:
            raise ValueError(f"max_heads must be at least 1, got {max_heads}")
        self.figure, self.max_heads, self.ncols = figure, max_heads, ncols
        figure.clear()
        self.axes = [figure.add_axes((0.0, 0.0, 1.0, 1.0)) for _ in range(max_heads)]
        self.images = [ax.imshow(np.zeros((1, 1)), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0, aspect="auto",
                                 interpolation="nearest") for ax in self.axes]
        for ax in self.axes:
            ax.set_xticks([])
            ax.set_yticks([])
        self.cax = figure.add_axes((0.0, 0.0, 1.0, 1.0))
        figure.colorbar(self.images[0], cax=self.cax, label="attention weight")
        self._labels: list = []  # the token labels' text artists, replaced by every layout

    def layout(self, num_heads: int, labels: Sequence[str]) -> list[AxesImage]:
        """Show ``num_heads`` panels over ``labels`` (zeros until the caller sets the data); returns
        their image artists, head by head."""
        if not 1 <= num_heads <= self.max_heads:
            raise ValueError(f"num_heads must be in [1, {self.max_heads}], got {num_heads}")
        n = len(labels)
        ncols = min(num_heads, self.ncols)
        nrows = -(-num_heads // ncols)
        g = _grid_geometry(nrows, ncols, n_q=n, n_k=n, x_labels=labels, y_labels=labels, panel_size=None,
                           fontsize=None, ylabel_lines=1, titles_every_row=True, suptitle=False)
        self.figure.set_size_inches(g.width, g.height)
        for text in self._labels:
            text.remove()
        self._labels = []
        for h, (ax, image) in enumerate(zip(self.axes, self.images)):
            ax.set_visible(h < num_heads)
            if h >= num_heads:
                continue
            row, col = divmod(h, ncols)
            lowest = h + ncols >= num_heads  # no panel below this one: it carries the key labels
            ax.set_position(g.panel_rect(row, col))
            image.set_data(np.zeros((n, n)))
            image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
            ax.set_xlim(-0.5, n - 0.5)
            ax.set_ylim(n - 0.5, -0.5)
            ax.set_title(f"head {h}")
            texts = _tick_texts(labels, n)
            self._labels += _write_labels(ax, texts if lowest else [], texts if col == 0 else [], g.fontsize,
                                          g.vertical, "key" if lowest else "", "query" if col == 0 else "")
        self.cax.set_position(g.colorbar_rect())
        return self.images[:num_heads]


def head_grid(
    weights: Any,
    labels: Sequence[str] | None = None,
    *,
    ncols: int | None = None,
    titles: Sequence[str] | None = None,
    figure: Figure | None = None,
    panel_size: float | None = None,
    annotate: bool = False,
    suptitle: str | None = None,
    fontsize: float | None = None,
    resize_figure: bool = False,
    text_labels: bool = False,
) -> list[AxesImage]:
    """One heatmap per head from weights ``(H, N_q, N_k)``, sharing one colour scale and colour bar.

    ``labels`` name the tokens on the outer panels (keys along the bottom row, queries down the
    first column; for ``N_q != N_k`` they name the keys only). Panels are ``panel_size`` inches
    square (``None``: 2.4, larger for more than 16 tokens) and tick labels shrink to fit
    (``fontsize=None``). Draws into ``figure`` when given (cleared first; its size is kept unless
    ``resize_figure=True``), else a new figure. Returns one image artist per head, so a caller
    can update the data in place with ``image.set_data``. ``text_labels=True`` writes the token
    labels as plain text instead of tick labels (same places, no tick marks, much faster to lay out
    and draw: for explorers that redraw the grid when a slider moves).
    """
    array = to_numpy(weights)
    if array.ndim != 3:
        raise ValueError(f"weights must have shape (heads, N_q, N_k), got {list(array.shape)}; "
                         "select one batch element first, e.g. weights[0]")
    n_heads, n_rows, n_cols = array.shape
    if n_heads == 0:
        raise ValueError(f"weights must hold at least one head, got shape {list(array.shape)}")
    if titles is not None and len(titles) != n_heads:
        raise ValueError(f"titles has {len(titles)} entries for {n_heads} heads")
    _check_labels(labels, n_cols, "labels", array.shape[1:])
    y_labels = labels if n_rows == n_cols else None
    ncols = min(ncols or min(n_heads, 4), n_heads)
    nrows = -(-n_heads // ncols)
    figure, axes, cax, size = _grid(figure, nrows, ncols, n_q=n_rows, n_k=n_cols, x_labels=labels,
                                    y_labels=y_labels, panel_size=panel_size, fontsize=fontsize, ylabel_lines=1,
                                    titles_every_row=True, suptitle=bool(suptitle), resize_figure=resize_figure,
                                    titles=titles or ())
    images = []
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.set_visible(False)
            continue
        row, col = divmod(h, ncols)
        lowest = h + ncols >= n_heads  # no panel below this one: it carries the key labels
        title = titles[h] if titles is not None else f"head {h}"
        images.append(_heatmap(array[h], labels, y_labels, ax=ax, title=title, colorbar=False, annotate=annotate,
                               vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP, fontsize=size, fmt="{:.2f}",
                               colorbar_label=None, xlabel="key" if lowest else "",
                               ylabel="query" if col == 0 else "", x_ticks=lowest, y_ticks=col == 0,
                               text_labels=text_labels))
    figure.colorbar(images[0], cax=cax, label="attention weight")
    if suptitle:
        figure.suptitle(suptitle)
    return images


def layer_head_grid(
    weights: Any,
    labels: Sequence[str] | None = None,
    *,
    figure: Figure | None = None,
    panel_size: float | None = None,
    fontsize: float | None = None,
    resize_figure: bool = False,
) -> list[list[AxesImage]]:
    """Weights ``(L, H, N_q, N_k)`` as a grid: one row per layer, one column per head.

    Heads are named above the top row, layers left of the first column; ``labels`` name the
    tokens on the outer panels, as in :func:`head_grid`. Returns the image artists, ``[layer][head]``.
    """
    array = to_numpy(weights)
    if array.ndim != 4:
        raise ValueError(f"weights must have shape (layers, heads, N_q, N_k), got {list(array.shape)}")
    n_layers, n_heads, n_rows, n_cols = array.shape
    if n_layers == 0 or n_heads == 0:
        raise ValueError(f"weights must hold at least one layer and one head, got shape {list(array.shape)}")
    _check_labels(labels, n_cols, "labels", array.shape[2:])
    y_labels = labels if n_rows == n_cols else None
    figure, axes, cax, size = _grid(figure, n_layers, n_heads, n_q=n_rows, n_k=n_cols, x_labels=labels,
                                    y_labels=y_labels, panel_size=panel_size, fontsize=fontsize, ylabel_lines=2,
                                    titles_every_row=False, suptitle=False, resize_figure=resize_figure)
    images = []
    for layer in range(n_layers):
        row = []
        for h in range(n_heads):
            ax = axes[layer, h]
            bottom = layer == n_layers - 1
            row.append(_heatmap(array[layer, h], labels, y_labels, ax=ax, title=f"head {h}" if layer == 0 else None,
                                colorbar=False, annotate=False, vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP, fontsize=size,
                                fmt="{:.2f}", colorbar_label=None, xlabel="key" if bottom else "",
                                ylabel=f"layer {layer}\nquery" if h == 0 else "", x_ticks=bottom, y_ticks=h == 0))
        images.append(row)
    figure.colorbar(images[0][0], cax=cax, label="attention weight")
    return images


def pipeline_diagram(
    steps: Sequence[tuple[str, Sequence[int], str]], *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Draw a pipeline as a column of boxes, one per step, each with its shape and named axes.

    ``steps``: ``(name, shape, axes)`` triples in order, e.g. ``("q", [13, 4, 100, 16],
    "batch heads tokens head_dim")`` — typically built from a module's intermediates and ``AXES``.
    Returns the axes (drawn without ticks).
    """
    if not steps:
        raise ValueError("steps must contain at least one (name, shape, axes) triple, got none")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 0.55 * len(steps) + 0.5))
    n = len(steps)
    for i, (name, shape, axes) in enumerate(steps):
        y = n - 1 - i
        names = axes.split()
        if len(names) != len(shape):
            raise ValueError(f"step {name!r}: shape {list(shape)} has {len(shape)} dimensions but axes "
                             f"{axes!r} names {len(names)}")
        named = ", ".join(f"{a}={s}" for a, s in zip(names, shape))
        ax.text(0.0, y, name, ha="right", va="center", fontsize=10, fontweight="bold")
        box = ax.text(0.06, y, f"{list(shape)}", ha="left", va="center", fontsize=10, family="monospace",
                      bbox=dict(boxstyle="round,pad=0.3", facecolor="#e8eef7", edgecolor="#5b7fb5"))
        ax.annotate(named, xy=(1.0, 0.5), xycoords=box, xytext=(10, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=8.5, color="#404040")
        if i < n - 1:
            ax.annotate("", xy=(0.03, y - 0.72), xytext=(0.03, y - 0.28),
                        arrowprops=dict(arrowstyle="->", color="#5b7fb5"))
    ax.set_xlim(-0.3, 1.3)
    ax.set_ylim(-0.6, n - 0.4)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


# --------------------------------------------------------------------------------------------
# NaN-visible colormaps and the values picture (lessons 03 and 04)
# --------------------------------------------------------------------------------------------

NAN_COLOUR = "0.82"  # light grey: a NaN weight shows as "no number", not as a dark zero


def cmap_with_nan(name: str = WEIGHTS_CMAP, nan_colour: str = NAN_COLOUR) -> Colormap:
    """The colormap ``name`` with NaN and infinite cells painted ``nan_colour`` instead of left blank.

    Pass it as ``heatmap(..., cmap=cmap_with_nan(), vmin=0, vmax=1)`` to show a matrix that may
    hold NaN (a fully masked softmax row) or ``-inf`` (an additive mask): the cell is grey and its
    annotation, dark on grey, reads ``nan`` or ``-inf``. Values below ``vmin`` or above ``vmax``
    are grey too, so give a range that covers the finite values.
    """
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad=nan_colour, under=nan_colour, over=nan_colour)


def convex_hull(points: Any) -> np.ndarray:
    """Corners of the convex hull of 2-D points: ``(n, 2) -> (h, 2)``, counter-clockwise.

    Andrew's monotone chain; points on an edge are not corners; the first corner is not repeated.
    With fewer than three distinct points the distinct points themselves are returned.
    """
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
    """Value vectors ``(N_k, 2)`` as labelled dots inside their shaded convex hull, and attention
    outputs ``(N_q, 2)`` (optional) as crosses.

    Returns the artists by name: ``"values"`` and ``"outputs"`` (scatter collections, update with
    ``set_offsets``; ``"outputs"`` is None without outputs), ``"hull"`` (the polygon), ``"labels"`` (texts).
    """
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
    ax.set_xlim(v[:, 0].min() - pad, v[:, 0].max() + 2 * pad)
    ax.set_ylim(v[:, 1].min() - pad, v[:, 1].max() + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("value feature 0")
    ax.set_ylabel("value feature 1")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)  # outside: never hides a point
    if title:
        ax.set_title(title)
    return artists


# --------------------------------------------------------------------------------------------
# Which features belong to which head: weight matrices with head blocks, where split entries come from
# --------------------------------------------------------------------------------------------

# Okabe-Ito: a qualitative palette that colour-blind readers can tell apart, one colour per head.
HEAD_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#000000")


def _block_starts(blocks: Sequence[tuple[str, int]], total: int, name: str, shape: Sequence[int]) -> list[int]:
    sizes = [int(size) for _, size in blocks]
    if any(size < 1 for size in sizes) or sum(sizes) != total:
        raise ValueError(f"{name} sizes {sizes} must be positive and add up to {total} for a matrix of "
                         f"shape {list(shape)}, but they add up to {sum(sizes)}")
    return [sum(sizes[:i]) for i in range(len(sizes))]


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
) -> AxesImage:
    """A matrix ``(rows, cols)`` (e.g. a weight) as a signed heatmap with named groups of rows or columns.

    ``col_blocks`` (or ``row_blocks``): ``(label, size)`` pairs in order, whose sizes add up to the
    number of columns (rows); e.g. ``[("head 0", 16), ("head 1", 16), ...]``. Black lines separate
    the blocks, and each is named on a strip of its colour (``block_colours``, default
    :data:`HEAD_COLOURS` in turn) above the matrix (columns) or to its right (rows). Returns the image.
    """
    array = _matrix(values, "values")
    n_rows, n_cols = array.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12.0, 0.06 * n_cols + 3.0), min(8.0, 0.06 * n_rows + 2.0)))
    bound = float(np.abs(array).max()) or 1.0
    image = ax.imshow(array, cmap=SIGNED_CMAP, vmin=-bound, vmax=bound, aspect="auto", interpolation="nearest")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    colours = list(block_colours) if block_colours is not None else None
    for blocks, along_cols in ((col_blocks, True), (row_blocks, False)):
        if not blocks:
            continue
        total = n_cols if along_cols else n_rows
        starts = _block_starts(blocks, total, "col_blocks" if along_cols else "row_blocks", array.shape)
        if colours is not None and len(colours) < len(blocks):
            raise ValueError(f"block_colours has {len(colours)} colours for {len(blocks)} blocks")
        for i, ((label, size), start) in enumerate(zip(blocks, starts)):
            colour = colours[i] if colours is not None else HEAD_COLOURS[i % len(HEAD_COLOURS)]
            if along_cols:
                if start:
                    ax.axvline(start - 0.5, color="black", linewidth=1.5)
                strip = plt.Rectangle((start - 0.5, 1.01), size, 0.07, transform=ax.get_xaxis_transform(),
                                      facecolor=colour, edgecolor="white", clip_on=False)
                ax.text(start - 0.5 + size / 2, 1.045, label, transform=ax.get_xaxis_transform(), ha="center",
                        va="center", fontsize=8, color="black" if colour != "#000000" else "white")
            else:
                if start:
                    ax.axhline(start - 0.5, color="black", linewidth=1.5)
                strip = plt.Rectangle((1.01, start - 0.5), 0.07, size, transform=ax.get_yaxis_transform(),
                                      facecolor=colour, edgecolor="white", clip_on=False)
                ax.text(1.045, start - 0.5 + size / 2, label, transform=ax.get_yaxis_transform(), ha="center",
                        va="center", fontsize=8, rotation=90, color="black" if colour != "#000000" else "white")
            ax.add_patch(strip)
    if title:
        strip_points = 0.085 * ax.get_position().height * ax.figure.get_figheight() * 72  # strip + gap, in points
        ax.set_title(title, pad=6 + strip_points if col_blocks else 6)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.10 if row_blocks else 0.04)
    return image


def origin_grid(
    splits: Mapping[str, Any],
    chan: int,
    *,
    token_labels: Sequence[str] | None = None,
    figure: Figure | None = None,
    panel_size: float = 1.9,
) -> Figure:
    """Where every entry of a split into heads came from: one row of panels per split, one panel per head.

    ``splits``: name -> tensor ``(H, N, head_dim)`` whose entries are *flat indices*
    ``token * chan + feature`` into the ``(N, chan)`` matrix that was split (build that matrix with
    ``torch.arange(N * chan).reshape(N, chan)`` and split it the way you want to inspect). Each cell
    is coloured by its source token and labelled with its source feature (``f3``), so a head that
    received features of several tokens in one row shows several colours. Returns the figure.
    """
    if not splits:
        raise ValueError("splits must contain at least one name -> (H, N, head_dim) tensor, got none")
    arrays = {name: to_numpy(t) for name, t in splits.items()}
    shapes = {name: list(a.shape) for name, a in arrays.items()}
    for name, a in arrays.items():
        if a.ndim != 3:
            raise ValueError(f"splits[{name!r}] must have shape (H, N, head_dim), got {shapes[name]}")
    if len({tuple(s) for s in shapes.values()}) != 1:
        raise ValueError(f"every split must have the same shape (H, N, head_dim), got {shapes}")
    n_heads, n_tokens, head_dim = next(iter(arrays.values())).shape
    if chan != n_heads * head_dim:
        raise ValueError(f"chan={chan} does not match splits of shape {[n_heads, n_tokens, head_dim]}: "
                         f"chan must be H * head_dim = {n_heads * head_dim}")
    for name, a in arrays.items():
        if a.min() < 0 or a.max() >= n_tokens * chan or not np.all(a == np.round(a)):
            raise ValueError(f"splits[{name!r}] must hold whole flat indices token * chan + feature in "
                             f"[0, {n_tokens * chan}), got values from {a.min():g} to {a.max():g}")
    _check_labels(token_labels, n_tokens, "token_labels", [n_tokens, chan])
    labels = list(token_labels) if token_labels is not None else [f"token {n}" for n in range(n_tokens)]
    palette = plt.get_cmap("Pastel1").colors
    if figure is None:
        figure = plt.figure(figsize=(panel_size * n_heads * head_dim / 4 + 1.6, panel_size * len(arrays) + 0.6))
    else:
        figure.clear()
    axes = figure.subplots(len(arrays), n_heads, squeeze=False)
    for row, (name, a) in enumerate(arrays.items()):
        tokens, features = np.divmod(a.astype(np.int64), chan)
        for h in range(n_heads):
            ax = axes[row, h]
            colours = np.array([[palette[t % len(palette)] for t in line] for line in tokens[h]])
            ax.imshow(colours, aspect="auto", interpolation="nearest")
            for (i, j), f in np.ndenumerate(features[h]):
                ax.text(j, i, f"f{f}", ha="center", va="center", fontsize=8)
            ax.set_xticks(range(head_dim))
            ax.set_yticks(range(n_tokens))
            ax.set_yticklabels([f"row {i}" for i in range(n_tokens)] if h == 0 else [])
            ax.set_title(f"head {h}", fontsize=9)
            if h == 0:
                ax.text(-0.35, 1.32, name, transform=ax.transAxes, fontsize=10, fontweight="bold", ha="left")
            if row == len(arrays) - 1:
                ax.set_xlabel("head_dim position")
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=palette[t % len(palette)], edgecolor="grey") for t in range(n_tokens)]
    figure.legend(handles, labels, loc="center right", title="came from", fontsize=8, title_fontsize=8, frameon=False)
    figure.subplots_adjust(right=0.84, hspace=0.75, wspace=0.25)
    return figure


# --------------------------------------------------------------------------------------------
# How a cost grows with the sequence length (lesson 09): log-log lines with their fitted slopes
# --------------------------------------------------------------------------------------------

GROWTH_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")  # Okabe-Ito, colour-blind safe


def growth_plot(
    sizes: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    ax: Axes | None = None,
    ylabel: str = "",
    xlabel: str = "sequence length N",
    title: str | None = None,
) -> dict[str, Any]:
    """One line per entry of ``series`` (name -> one value per size, ``len(sizes)`` each) on log-log
    axes, each labelled with the slope of its least-squares line in log-log space: a cost that grows
    like ``N ** p`` is a straight line of slope ``p`` (2 quadruples per doubling, 1 doubles).

    Returns the artists by name: ``"lines"`` (name -> Line2D) and ``"slopes"`` (name -> fitted slope).
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
                                 label=f"{name} (slope {slopes[name]:.1f})")
    ax.set_xticks(x, [f"{v:g}" for v in x])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return {"lines": lines, "slopes": slopes}
