"""Heatmaps of attention: one matrix with token labels, a grid of heads, a grid of layers x heads.

Imports matplotlib (the math never does). Colour-blind-safe colormaps: ``viridis`` for weights in
[0, 1] and the diverging ``PuOr`` for signed values (scores, projections). Every function accepts
tensors on any device and with grad, draws into a given ``ax`` when asked, and returns the artists
instead of printing anything, so a plotting cell's only output is its picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

__all__ = ["to_numpy", "heatmap", "annotate_cells", "head_grid", "layer_head_grid", "WEIGHTS_CMAP", "SIGNED_CMAP"]

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
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
    fmt: str = "{:.2f}",
) -> AxesImage:
    """Draw one matrix (e.g. attention weights ``(N_q, N_k)``) with token labels and a colour bar.

    ``x_labels`` label the columns (keys), ``y_labels`` the rows (queries; default: ``x_labels``
    when the matrix is square). Values are written in each cell when the matrix is small
    (``annotate=None`` decides by size). Weights in [0, 1] use ``viridis`` from 0 to 1; signed
    values use the diverging ``PuOr`` centred on zero. Returns the image artist.
    """
    array = _matrix(values, "values")
    n_rows, n_cols = array.shape
    if y_labels is None and x_labels is not None and n_rows == n_cols:
        y_labels = x_labels
    _check_labels(x_labels, n_cols, "x_labels", array.shape)
    _check_labels(y_labels, n_rows, "y_labels", array.shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.45 * n_cols + 1.5), max(2.5, 0.4 * n_rows + 1.0)))
    is_weights = array.size > 0 and array.min() >= 0.0 and array.max() <= 1.0 + 1e-6
    if cmap is None:
        cmap = WEIGHTS_CMAP if is_weights else SIGNED_CMAP
    if vmin is None and vmax is None:
        if is_weights:
            vmin, vmax = 0.0, 1.0
        else:
            bound = float(np.abs(array).max()) or 1.0
            vmin, vmax = -bound, bound
    image = ax.imshow(array, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    _label_axes(ax, x_labels, y_labels, n_cols, n_rows, xlabel, ylabel)
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = n_rows <= ANNOTATE_MAX and n_cols <= ANNOTATE_MAX
    if annotate:
        annotate_cells(ax, array, image, fmt=fmt)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def _label_axes(ax: Axes, x_labels, y_labels, n_cols: int, n_rows: int, xlabel: str, ylabel: str) -> None:
    ax.set_xticks(range(n_cols))
    ax.set_yticks(range(n_rows))
    if x_labels is not None:
        ax.set_xticklabels(x_labels, rotation=90)
    if y_labels is not None:
        ax.set_yticklabels(y_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if n_cols > 40 and x_labels is None:
        ax.xaxis.set_major_locator(plt.MaxNLocator(8, integer=True))
    if n_rows > 40 and y_labels is None:
        ax.yaxis.set_major_locator(plt.MaxNLocator(8, integer=True))


def annotate_cells(ax: Axes, array: np.ndarray, image: AxesImage, *, fmt: str = "{:.2f}") -> list:
    """Write each value in its cell, dark on light colours and light on dark. Returns the texts."""
    texts = []
    norm, cmap = image.norm, image.get_cmap()
    for (i, j), value in np.ndenumerate(array):
        r, g, b, _ = cmap(norm(value))
        colour = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        texts.append(ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=7, color=colour))
    return texts


def head_grid(
    weights: Any,
    labels: Sequence[str] | None = None,
    *,
    ncols: int | None = None,
    titles: Sequence[str] | None = None,
    figure: Figure | None = None,
    panel_size: float = 2.4,
    annotate: bool = False,
    suptitle: str | None = None,
) -> list[AxesImage]:
    """One heatmap per head from weights ``(H, N_q, N_k)``, sharing one colour scale and colour bar.

    ``labels`` name the tokens on every panel (queries and keys for self-attention). Draws into
    ``figure`` when given (cleared first), else a new figure. Returns one image artist per head,
    so a caller can update the data in place with ``image.set_data``.
    """
    array = to_numpy(weights)
    if array.ndim != 3:
        raise ValueError(f"weights must have shape (heads, N_q, N_k), got {list(array.shape)}; "
                         "select one batch element first, e.g. weights[0]")
    n_heads, n_rows, n_cols = array.shape
    if titles is not None and len(titles) != n_heads:
        raise ValueError(f"titles has {len(titles)} entries for {n_heads} heads")
    ncols = ncols or min(n_heads, 4)
    nrows = -(-n_heads // ncols)
    if figure is None:
        figure = plt.figure(figsize=(panel_size * ncols + 1.0, panel_size * nrows + 0.4))
    else:
        figure.clear()
    axes = figure.subplots(nrows, ncols, squeeze=False)
    images = []
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.set_visible(False)
            continue
        title = titles[h] if titles is not None else f"head {h}"
        images.append(heatmap(array[h], labels, ax=ax, title=title, colorbar=False, annotate=annotate,
                              vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP,
                              xlabel="key" if h // ncols == nrows - 1 else "",
                              ylabel="query" if h % ncols == 0 else ""))
        if h % ncols:
            ax.set_yticklabels([])
    figure.colorbar(images[0], ax=axes.ravel().tolist(), fraction=0.02, pad=0.02, label="attention weight")
    if suptitle:
        figure.suptitle(suptitle)
    return images


def layer_head_grid(
    weights: Any, labels: Sequence[str] | None = None, *, figure: Figure | None = None, panel_size: float = 2.2
) -> list[list[AxesImage]]:
    """Weights ``(L, H, N_q, N_k)`` as a grid: one row per layer, one column per head."""
    array = to_numpy(weights)
    if array.ndim != 4:
        raise ValueError(f"weights must have shape (layers, heads, N_q, N_k), got {list(array.shape)}")
    n_layers, n_heads = array.shape[:2]
    if figure is None:
        figure = plt.figure(figsize=(panel_size * n_heads + 1.0, panel_size * n_layers + 0.4))
    else:
        figure.clear()
    axes = figure.subplots(n_layers, n_heads, squeeze=False)
    images = []
    for layer in range(n_layers):
        row = []
        for h in range(n_heads):
            ax = axes[layer, h]
            row.append(heatmap(array[layer, h], labels, ax=ax, title=f"layer {layer}, head {h}", colorbar=False,
                               annotate=False, vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP,
                               xlabel="key" if layer == n_layers - 1 else "", ylabel="query" if h == 0 else ""))
            if h:
                ax.set_yticklabels([])
        images.append(row)
    figure.colorbar(images[0][0], ax=axes.ravel().tolist(), fraction=0.02, pad=0.02, label="attention weight")
    return images
