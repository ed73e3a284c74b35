"""Grids of heatmaps: every head of a layer, every layer and head of a model in one image, and where the entries
of a split into heads came from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

from .arrays import _check_labels, to_numpy
from .colours import WEIGHTS_CMAP, cmap_with_nan
from .display import describe_axes
from .heatmaps import Cells, cells, describe_image, heatmap
from .labels import (MIN_FONTSIZE, _fit_fontsize, _panel_inches, _points, _relabel, _TICK_PAD, _text_width, _tick_texts,
                     _vertical)

__all__ = ["head_grid", "LiveHeadGrid", "origin_grid", "plot_all_heads"]


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
                   y_labels: Sequence[str] | None, panel_size: float | None, suptitle: bool = False,
                   titles: Sequence[str] = (), label_room: tuple[float, float] | None = None) -> _GridGeometry:
    """The margins of a grid of ``nrows x ncols`` panels (titled, each row) plus one colour bar, measured in
    points from the labels they must hold (tick labels only on the outer panels), so nothing overlaps.
    ``label_room``: ``(height under the panels, width left of them)`` in points to keep for token labels, instead
    of the room ``x_labels`` and ``y_labels`` take."""
    panel = panel_size or _panel_inches(max(n_q, n_k))
    fontsize = min(_fit_fontsize(n_k, panel * 72.0), _fit_fontsize(n_q, panel * 72.0))
    x_texts, y_texts = _tick_texts(x_labels, n_k), _tick_texts(y_labels, n_q)
    x_width = _text_width(x_texts, fontsize)
    vertical = _vertical(x_width, panel * 72.0, n_k)
    x_height, y_width = label_room or (x_width if vertical else 1.2 * fontsize, _text_width(y_texts, fontsize))
    label_pt = 1.2 * _points(plt.rcParams["axes.labelsize"])
    title_pt = 1.2 * _points(plt.rcParams["axes.titlesize"]) + 6.0  # the top row always has titles
    left = 6.0 + label_pt + 4.0 + y_width + _TICK_PAD
    bottom = 6.0 + label_pt + 4.0 + x_height + _TICK_PAD
    top = 6.0 + title_pt + (1.2 * _points(plt.rcParams["figure.titlesize"]) + 8.0 if suptitle else 0.0)
    hspace = title_pt + 8.0
    # Neighbouring titles wider than their panels each overhang by half the excess: keep them apart.
    wspace = max(10.0, _text_width(titles, _points(plt.rcParams["axes.titlesize"])) - panel * 72.0 + 10.0)
    bar_ticks = _text_width(["0.0", "1.0"], _points(plt.rcParams["ytick.labelsize"]))
    right = _GridGeometry.bar_gap + _GridGeometry.bar_width + _TICK_PAD + bar_ticks + 4.0 + label_pt + 6.0
    width = (left + right + (ncols - 1) * wspace) / 72.0 + ncols * panel
    height = (bottom + top + (nrows - 1) * hspace) / 72.0 + nrows * panel
    return _GridGeometry(width, height, panel, left, right, bottom, top, wspace, hspace, fontsize, vertical)


class LiveHeadGrid:
    """:func:`head_grid`'s picture for an explorer over the first ``n`` of ``words``: ``num_heads`` panels and the
    colour bar laid out once, with room for the token labels of every ``n``, so the frame stands still on the page
    when ``n`` changes. :meth:`show` changes only ``images`` (each panel's cells, and its axis limits) and, when ``n``
    changes, ``labels`` (the token labels and the axis names beside them: ``axis_names``, each panel's
    ``(key, query)`` texts or ``None``): an explorer redraws the one on every move and the other when it changes
    (``Explorer.dynamic``).

    Each panel holds ``len(words)`` x ``len(words)`` cells, of which :meth:`show` fills the first ``n`` and the axis
    limits show those. Token labels stand on the first column's panels only (``key_labels`` / ``query_labels``: each
    panel's shown ones), at most ``MAX_LABELS`` a side: every text is laid out anew each time it is drawn (about
    0.5 ms a word on a 2-core CPU). "key" and "query" stand just beyond them, where matplotlib puts an axis label.
    ``max_width`` (inches, ``None``: no limit) narrows the panels until the figure fits, so a page never shrinks the
    picture (and its text); where the labels would be smaller than ``min_fontsize`` (points), or more than
    ``MAX_LABELS``, only every second (third, ...: ``every``) token is labelled, at a size that fits its slot.
    """

    MAX_LABELS = 16

    def __init__(self, figure: Figure, num_heads: int, words: Sequence[str], *, ncols: int = 4,
                 max_width: float | None = None, min_fontsize: float = MIN_FONTSIZE) -> None:
        if num_heads < 1:
            raise ValueError(f"num_heads must be at least 1, got {num_heads}")
        if not words:
            raise ValueError("words must hold at least one word, got none")
        if max_width is not None and max_width <= 0:
            raise ValueError(f"max_width must be positive (inches), got {max_width}")
        self.figure, self.num_heads, self.words = figure, num_heads, [str(w) for w in words]
        self.min_fontsize, self.every = float(min_fontsize), 1
        ncols = min(num_heads, ncols)
        nrows = -(-num_heads // ncols)
        g = self._geometry(nrows, ncols, _panel_inches(len(words)), max_width)
        figure.clear()
        figure.set_size_inches(g.width, g.height)
        self.axes, self.images, self.labels = [], [], []
        self.n: int | None = None  # how many words show() showed last
        self._pools: list[tuple[list, list]] = []  # each panel's text artists for keys and for queries
        self.axis_names: list[tuple[Any, Any]] = []  # each panel's "key" and "query" (None where it has none)
        names = {"fontsize": plt.rcParams["axes.labelsize"], "color": plt.rcParams["axes.labelcolor"],
                 "fontweight": plt.rcParams["axes.labelweight"]}
        for h in range(num_heads):
            row, col = divmod(h, ncols)
            lowest = col == 0 and h + ncols >= num_heads  # the first column's lowest panel carries the key labels
            ax = figure.add_axes(g.panel_rect(row, col))
            self.images.append(cells(ax, np.zeros((len(words), len(words))), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0))
            # y given: matplotlib then skips its search for tick labels above the panel (there are none), ~2 ms a title
            ax.set_title(f"head {h}", y=1.0)
            ax.set(xticks=[], yticks=[])
            ax.xaxis.set_visible(False)  # no ticks, no label: it would draw nothing, but cost its layout
            ax.yaxis.set_visible(False)
            pools = tuple(_relabel(ax, [], side, ["."] * self.MAX_LABELS if carries else [], self.min_fontsize)
                          for side, carries in (("x", lowest), ("y", col == 0)))
            # as matplotlib sets an axis label: centred on the panel, its top (upright: its bottom) labelpad away
            key = ax.text(0.5, 0.0, "key", ha="center", va="top", **names) if lowest else None
            query = ax.text(0.0, 0.5, "query", ha="center", va="bottom", rotation=90.0, rotation_mode="anchor",
                            **names) if col == 0 else None
            self._pools.append(pools)
            self.axis_names.append((key, query))
            self.axes.append(ax)
            self.labels += [*pools[0], *pools[1], *(t for t in (key, query) if t is not None)]
        self.cax = figure.add_axes(g.colorbar_rect())
        figure.colorbar(self.images[0], cax=self.cax, label="attention weight")
        self.key_labels: list[list] = [[] for _ in self.axes]
        self.query_labels: list[list] = [[] for _ in self.axes]

    def show(self, weights: Any) -> bool:
        """Draw ``weights (num_heads, n, n)``, the attention among the first ``n`` words; returns whether ``labels``
        changed (``n`` is not the last one shown)."""
        array = to_numpy(weights)
        if array.ndim != 3 or array.shape[0] != self.num_heads or not 1 <= array.shape[1] == array.shape[2] <= len(
                self.words):
            raise ValueError(f"weights must have shape ({self.num_heads}, n, n) with n in [1, {len(self.words)}], "
                             f"got {list(array.shape)}")
        n = array.shape[1]
        for image, head in zip(self.images, array):
            image.set_data(head)  # (n, n) in the top-left cells
        if n == self.n:
            return False
        self.n = n
        self.every, fontsize, vertical, shown = self._labelling[n - 1]
        x_room, y_room = self._rooms[n - 1]
        inches = self.figure.dpi_scale_trans
        for h, (ax, (keys, queries), (key, query)) in enumerate(zip(self.axes, self._pools, self.axis_names)):
            ax.set(xlim=(-0.5, n - 0.5), ylim=(n - 0.5, -0.5))
            self.key_labels[h] = _relabel(ax, keys, "x", shown, fontsize, vertical) if keys else []
            self.query_labels[h] = _relabel(ax, queries, "y", shown, fontsize) if queries else []
            # the labelpads views.labels._name_axes gives matplotlib's axis labels (points)
            if key is not None:
                key.set_transform(ax.transAxes + ScaledTranslation(0.0, -(_TICK_PAD + x_room) / 72.0, inches))
            if query is not None:
                query.set_transform(ax.transAxes + ScaledTranslation(-(_TICK_PAD + y_room + 4.0) / 72.0, 0.0, inches))
        return True

    def _geometry(self, nrows: int, ncols: int, panel: float, max_width: float | None) -> _GridGeometry:
        """The grid's geometry, its panels narrowed to ``max_width``; sets how each ``n`` is labelled."""
        for _ in range(3):  # the margins follow the labels' size, which follows the panel: settles in two rounds
            self._labelling = [self._labels(n, panel) for n in range(1, len(self.words) + 1)]
            # (height under a panel, width left of it) the labels of each n take; the grid keeps the largest
            self._rooms = [(_text_width(shown, size) if vertical else 1.2 * size, _text_width(shown, size))
                           for _, size, vertical, shown in self._labelling]
            room = (max(x for x, _ in self._rooms), max(y for _, y in self._rooms))
            g = _grid_geometry(nrows, ncols, n_q=1, n_k=1, x_labels=[], y_labels=[], panel_size=panel,
                               label_room=room)
            if max_width is None or g.width <= max_width + 1e-9:
                break
            panel -= (g.width - max_width) / ncols
        return g

    def _labels(self, n: int, panel: float) -> tuple[int, float, bool, list[str]]:
        """How the first ``n`` words are labelled on a ``panel``-inch side: ``(every, fontsize, vertical, shown)``,
        ``shown`` one text per cell, blank where no label stands."""
        every = 1
        while every < n and (_fit_fontsize(-(-n // every), panel * 72.0) < self.min_fontsize
                             or -(-n // every) > self.MAX_LABELS):
            every += 1
        slots = -(-n // every)
        fontsize = _fit_fontsize(slots, panel * 72.0)
        shown = [t if i % every == 0 else "" for i, t in enumerate(self.words[:n])]
        return every, fontsize, _vertical(_text_width(shown, fontsize), panel * 72.0, slots), shown


def head_grid(
    weights: Any,
    labels: Sequence[str] | None = None,
    *,
    ncols: int | None = None,
    titles: Sequence[str] | None = None,
    panel_size: float | None = None,
    annotate: bool = False,
    suptitle: str | None = None,
) -> list[Cells]:
    """Lessons 03, 05 and 11:
    One heatmap per head from weights ``(H, N_q, N_k)``, sharing one colour scale and colour bar.

    ``labels`` name the tokens on the outer panels (keys along the bottom row, queries down the first column;
    for ``N_q != N_k`` the keys only). Panels are ``panel_size`` inches square (``None``: 2.4, larger for more
    than 16 tokens); tick labels shrink to fit. Returns one :class:`Cells` per head.
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
    # margins measured from the labels they hold (_grid_geometry), so no layout engine runs at draw time
    g = _grid_geometry(nrows, ncols, n_q=n_rows, n_k=n_cols, x_labels=labels, y_labels=y_labels,
                       panel_size=panel_size, titles=titles or (), suptitle=bool(suptitle))
    figure = plt.figure(figsize=(g.width, g.height))
    axes = figure.subplots(nrows, ncols, squeeze=False, gridspec_kw=dict(
        left=g.left / 72.0 / g.width, right=1.0 - g.right / 72.0 / g.width,
        bottom=g.bottom / 72.0 / g.height, top=1.0 - g.top / 72.0 / g.height,
        wspace=g.wspace / 72.0 / g.panel, hspace=g.hspace / 72.0 / g.panel))
    cax = figure.add_axes(g.colorbar_rect())
    images = []
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.set_visible(False)
            continue
        row, col = divmod(h, ncols)
        lowest = h + ncols >= n_heads  # no panel below this one: it carries the key labels
        title = titles[h] if titles is not None else f"head {h}"
        images.append(heatmap(array[h], labels, y_labels, ax=ax, title=title, colorbar=False, annotate=annotate,
                              vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP, fontsize=g.fontsize,
                              xlabel="key" if lowest else "", ylabel="query" if col == 0 else "",
                              x_ticks=lowest, y_ticks=col == 0))
        describe_image(images[-1], labels, y_labels, title=title, xlabel="key", ylabel="query", what="Panel")
    figure.colorbar(images[0], cax=cax, label="attention weight")
    if suptitle:
        figure.suptitle(suptitle)
    return images


def origin_grid(
    splits: Mapping[str, Any],
    chan: int,
    *,
    token_labels: Sequence[str] | None = None,
) -> Figure:
    """Lesson 05: Where every entry of a split into heads came from: one row of panels per split, one panel per head.

    ``splits``: name -> tensor ``(H, N, head_dim)`` whose entries are *flat indices* ``token * chan + feature``
    into the ``(N, chan)`` matrix that was split (``torch.arange(N * chan).reshape(N, chan)``, split the way you
    want to inspect). Each cell is coloured by its source token and labelled with its source feature (``f3``), so
    a head that received features of several tokens in one row shows several colours. Returns the figure.
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
    figure = plt.figure(figsize=(1.9 * n_heads * head_dim / 4 + 1.6, 1.9 * len(arrays) + 0.6))
    axes = figure.subplots(len(arrays), n_heads, squeeze=False)
    for row, (name, a) in enumerate(arrays.items()):
        tokens, features = np.divmod(a.astype(np.int64), chan)
        for h in range(n_heads):
            ax = axes[row, h]
            colours = np.array([[palette[t % len(palette)] for t in line] for line in tokens[h]])
            ax.imshow(colours, aspect="auto", interpolation="nearest")
            for (i, j), f in np.ndenumerate(features[h]):
                ax.text(j, i, f"f{f}", ha="center", va="center", fontsize=8)
            ax.set(xticks=range(head_dim), yticks=range(n_tokens),
                   yticklabels=[f"row {i}" for i in range(n_tokens)] if h == 0 else [])
            ax.set_title(f"head {h}", fontsize=9)
            if h == 0:
                ax.text(-0.35, 1.32, name, transform=ax.transAxes, fontsize=10, fontweight="bold", ha="left")
            if row == len(arrays) - 1:
                ax.set_xlabel("head_dim position")
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=palette[t % len(palette)], edgecolor="grey") for t in range(n_tokens)]
    figure.legend(handles, labels, loc="center right", title="came from", fontsize=8, title_fontsize=8, frameon=False)
    figure.subplots_adjust(right=0.84, hspace=0.75, wspace=0.25)
    describe_axes(axes[0, 0], lambda: origin_sentence(arrays, chan, labels))
    return figure


def origin_sentence(arrays: Mapping[str, np.ndarray], chan: int, labels: Sequence[str]) -> str:
    """Where each row of each head of each split came from (:func:`origin_grid`'s description)."""
    parts = []
    for name, a in arrays.items():
        tokens, features = np.divmod(a.astype(np.int64), chan)
        for h in range(a.shape[0]):
            rows = [f"row {r} from {' and '.join(repr(labels[t]) for t in np.unique(line))}"
                    for r, line in enumerate(tokens[h])]
            parts.append(f"{name}, head {h} (features f{features[h].min()} to f{features[h].max()}): "
                         + ", ".join(rows))
    return "Where each entry of a split into heads came from, one panel per head, cells coloured by source token: " \
        + "; ".join(parts) + "."


def head_patterns(array: np.ndarray, first_layer: int = 0) -> str:
    """Which heads of ``array (L, H, N, N)`` put most rows' largest weight on the first token, the token itself,
    the previous or the next token (rows 2 onwards: the first rows cannot tell these apart)."""
    L, H, n, _ = array.shape
    rows = np.arange(2, n)
    kinds = {"the first token": np.zeros_like(rows), "the token itself": rows, "the previous token": rows - 1,
             "the next token": np.minimum(rows + 1, n - 1)}
    found: dict[str, list[str]] = {k: [] for k in [*kinds, "no one place"]}
    for layer, head in np.ndindex(L, H):
        best = array[layer, head, rows].argmax(axis=-1)
        share = {k: float(np.mean(best == target)) for k, target in kinds.items()}
        kind = max(share, key=share.get)
        found[kind if share[kind] > 0.5 else "no one place"].append(f"L{first_layer + layer}H{head}")
    return "; ".join(f"{k} in {len(v)} ({', '.join(v)})" for k, v in found.items() if v)



def plot_all_heads(weights: Any, *, gap: int = 2, figsize: tuple[float, float] = (14.0, 7.6),
                   title: str | None = None, first_layer: int = 0, fontsize: float = 10.0) -> Figure:
    """Lesson 11: Every head of every layer, ``weights (L, H, N, N)``, as one picture: a row of panels per layer,
    a column per head, queries down and keys across; ``first_layer`` numbers the rows. Returns the figure.

    One image with white gaps between the panels instead of ``L x H`` axes: 72 labelled axes take
    seconds to draw, one image a fraction of that.
    """
    array = to_numpy(weights)
    if array.ndim != 4 or array.shape[-1] != array.shape[-2]:
        raise ValueError(f"weights must have shape (layers, heads, N, N), got {list(array.shape)}")
    L, H, n, _ = array.shape
    step = n + gap
    padded = np.pad(array, ((0, 0), (0, 0), (0, gap), (0, gap)), constant_values=np.nan)  # NaN = the gaps, drawn white
    canvas = padded.transpose(0, 2, 1, 3).reshape(L * step, H * step)[:L * step - gap, :H * step - gap]
    figure, ax = plt.subplots(figsize=figsize)
    image = cells(ax, canvas, cmap=cmap_with_nan(WEIGHTS_CMAP, "white"), vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks([h * step + (n - 1) / 2 for h in range(H)], [f"head {h}" for h in range(H)], fontsize=fontsize)
    ax.set_yticks([layer * step + (n - 1) / 2 for layer in range(L)],
                  [f"layer {first_layer + layer}" for layer in range(L)], fontsize=fontsize)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel(f"each panel: {n} queries down, {n} keys across, in the sentence's order", fontsize=fontsize)
    bar = figure.colorbar(image, ax=ax, fraction=0.025, pad=0.02)
    bar.set_label("attention weight", fontsize=fontsize)
    bar.ax.tick_params(labelsize=fontsize)
    if title:
        ax.set_title(title, pad=8 + 1.6 * fontsize, fontsize=fontsize + 1)
    layers = f"layers {first_layer} to {first_layer + L - 1}" if L > 1 else f"layer {first_layer}"
    describe_axes(ax, lambda: f"Attention weights of {layers}, {H} heads each, on {n} tokens, one panel per head "
                              f"(0 to 1). Where most rows put their largest weight: "
                              f"{head_patterns(array, first_layer)}.")
    return figure
