"""Token labels that stay readable (never overlapping) however many tokens share an axis, private to this room.
Sizes are measured in points with matplotlib's Agg renderer, so no layout engine runs at draw time.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.transforms import ScaledTranslation

__all__: list[str] = []  # private to this room


MIN_FONTSIZE = 5.0  # points: tick labels never shrink below this
_TICK_PAD = 3.5 + 3.5  # points: tick length + gap between tick and label (matplotlib's defaults)
_MEASURING = RendererAgg(1, 1, 72)  # at 72 dpi one pixel is one point


def _cell_inches(n: int) -> float:
    """Side of one cell of a stand-alone heatmap: roomy for a short sentence, smaller for many tokens."""
    return float(np.clip(5.4 / max(n, 1), 0.22, 0.45))


def _panel_inches(n: int) -> float:
    """Side of one panel of a grid of heatmaps over ``n`` tokens: 2.4 inches, or 7.5 points per token
    (room for 6-point labels) up to 3.4 inches, reached at about 32 tokens."""
    return float(np.clip(n * 7.5 / 72.0, 2.4, 3.4))


def _text_width(texts: Sequence[str], fontsize: float) -> float:
    """The widest of ``texts`` in points at ``fontsize`` (as matplotlib's Agg renderer lays them out)."""
    return max((_one_text_width(str(t), float(fontsize)) for t in texts), default=0.0)


@functools.lru_cache(maxsize=4096)
def _one_text_width(text: str, fontsize: float) -> float:
    """One text's width in points (remembered: an explorer measures the same labels on every layout)."""
    return _MEASURING.get_text_width_height_descent(text, FontProperties(size=fontsize), ismath=False)[0]


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
    """Ticks at every cell with the tokens' labels (``None``: numbered), sized to fit; returns their size.
    ``text_labels=True`` writes them in the same places as plain text, without tick marks: matplotlib makes five
    artists per tick, so a grid of 8 panels x 32 tokens lays out and draws in well under half the time."""
    width_pt, height_pt = _axes_points(ax)
    if fontsize is None:
        fontsize = min(_fit_fontsize(n_cols if n_cols <= 40 or x_labels is not None else 8, width_pt),
                       _fit_fontsize(n_rows if n_rows <= 40 or y_labels is not None else 8, height_pt))
    if text_labels:
        x_texts = _tick_texts(x_labels, n_cols) if x_ticks else []
        vertical = _vertical(_text_width(x_texts, fontsize), width_pt, n_cols)
        y_texts = _tick_texts(y_labels, n_rows) if y_ticks else []
        _name_axes(ax, x_texts, y_texts, fontsize, vertical, xlabel, ylabel)
        _relabel(ax, [], "x", x_texts, fontsize, vertical)
        _relabel(ax, [], "y", y_texts, fontsize)
        return fontsize
    for axis, n, labels, ticks in ((ax.xaxis, n_cols, x_labels, x_ticks), (ax.yaxis, n_rows, y_labels, y_ticks)):
        axis.set_ticks(range(n) if ticks else [], labels if ticks else None)
        if n > 40 and labels is None and ticks:  # numbered cells: at most 8 numbers
            axis.set_major_locator(plt.MaxNLocator(8, integer=True))
    # Column labels stand upright only when they would not fit side by side.
    vertical = x_ticks and _vertical(_text_width(_tick_texts(x_labels, n_cols), fontsize), width_pt, n_cols)
    ax.tick_params(labelsize=fontsize, length=2.0 if max(n_rows, n_cols) > 16 else 3.5)  # shorter ticks for many
    ax.tick_params(axis="x", labelrotation=90 if vertical else 0)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    return fontsize


def _name_axes(ax: Axes, x_texts: Sequence[str], y_texts: Sequence[str], fontsize: float, vertical: bool,
               xlabel: str, ylabel: str) -> None:
    """No ticks; the axis labels just beyond where the token labels ``x_texts`` / ``y_texts`` stand."""
    ax.set(xticks=[], yticks=[])
    x_height = (_text_width(x_texts, fontsize) if vertical else 1.2 * fontsize) if x_texts else 0.0
    ax.set_xlabel(xlabel, labelpad=_TICK_PAD + x_height)
    ax.set_ylabel(ylabel, labelpad=_TICK_PAD + _text_width(y_texts, fontsize) + 4.0)  # 4: matplotlib's gap


def _relabel(ax: Axes, kept: list, side: str, texts: Sequence[str], fontsize: float, vertical: bool = False) -> list:
    """Show the non-blank of ``texts`` (one per cell) where tick labels would stand, under ``ax`` (``side="x"``,
    upright when ``vertical``) or left of it (``"y"``), in the artists of ``kept`` (made on first need: making a text
    artist costs more than changing one; those left over blanked); returns the artists showing them."""
    pad = -_TICK_PAD / 72.0  # inches: just beyond the tick marks' length
    if side == "x":
        rotation, ha, va = (90.0 if vertical else 0.0), "center", "top"
        place = ax.get_xaxis_transform() + ScaledTranslation(0.0, pad, ax.figure.dpi_scale_trans)
    else:
        rotation, ha, va = 0.0, "right", "center_baseline"
        place = ax.get_yaxis_transform() + ScaledTranslation(pad, 0.0, ax.figure.dpi_scale_trans)
    shown = [(cell, str(text)) for cell, text in enumerate(texts) if str(text).strip()]
    while len(kept) < len(shown):
        kept.append(ax.text(0.0, 0.0, "", transform=place, ha=ha, va=va))
    for i, artist in enumerate(kept):
        cell, text = shown[i] if i < len(shown) else (0, "")
        artist.set(text=text, position=(cell, 0.0) if side == "x" else (0.0, cell), fontsize=fontsize,
                   rotation=rotation)
    return kept[:len(shown)]
