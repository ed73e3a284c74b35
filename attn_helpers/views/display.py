"""How a figure is shown in a notebook: sharp on high-density screens, with a description for screen readers.

The description is written where the picture is drawn: each ``views`` function describes its panel from the
numbers it draws (:func:`describe_axes`), and a lesson cell that draws its own figure says what it shows with
:func:`describe_figure`. A figure with neither gets :data:`UNDESCRIBED` and its titles; the series' tests refuse it.
"""

from __future__ import annotations

import base64
import builtins
import html
import importlib
import io
import struct
import weakref
from collections.abc import Callable
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase

__all__ = ["describe_figure", "describe_axes", "figure_description", "figure_html", "show_figures_sharp",
           "UNDESCRIBED"]

#: The start of the ``alt`` text of a figure nothing described (followed by its titles).
UNDESCRIBED = "A figure without a description"

_FIGURES: weakref.WeakKeyDictionary[Figure, str] = weakref.WeakKeyDictionary()
_AXES: weakref.WeakKeyDictionary[Axes, Callable[[], str]] = weakref.WeakKeyDictionary()


def describe_figure(fig: Figure | Axes, text: str) -> None:
    """Lessons 01, 02, 06, 09 and 12:
    Say what the figure ``fig`` shows (its ``alt`` text), with the numbers that matter, not its title again.

    It comes first in the description; the panels drawn by ``views`` functions add theirs after it."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must be a non-empty sentence saying what the figure shows, got {text!r}")
    if not isinstance(fig, (FigureBase, Axes)):
        raise TypeError(f"fig must be a matplotlib Figure or Axes, got {type(fig).__name__}")
    _FIGURES[fig.get_figure(root=True)] = " ".join(text.split())  # a subfigure's or an axes' whole figure


def describe_axes(ax: Axes, text: str | Callable[[], str]) -> None:
    """Describe one panel ``ax`` of a figure: a sentence, or a function that writes it when the figure is shown
    (so a picture redrawn many times, e.g. by an explorer, never pays for it). Drawing the panel again replaces it."""
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    _AXES[ax] = text if callable(text) else (lambda: text)


def figure_description(fig: Figure) -> str | None:
    """The description of ``fig``: the lesson's sentence, then each described panel's, in the figure's order."""
    parts = [_FIGURES[fig]] if fig in _FIGURES else []
    for ax in fig.get_axes():
        if ax in _AXES:
            parts.append(_AXES[ax]())
    return " ".join(" ".join(p.split()) for p in parts if p) or None


def figure_html(fig: Figure) -> str | None:
    """``fig`` as one ``<img>``: a PNG at twice its dpi, shown at its size at 1x (``width``/``height``), with ``alt``."""
    if not fig.axes and not fig.lines:  # a figure with nothing to draw: no output (as IPython's print_figure)
        return None
    buffer = io.BytesIO()
    # IPython's print_figure(fig, fmt="retina"), which the inline backend's retina format uses
    fig.canvas.print_figure(buffer, format="png", dpi=2 * fig.dpi, bbox_inches="tight",
                            facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    png = buffer.getvalue()
    width, height = struct.unpack(">II", png[16:24])  # from the PNG's header
    alt = figure_description(fig)
    if alt is None:
        titles = [t for t in (fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)) if t]
        alt = UNDESCRIBED + (f" (its titles: {'; '.join(titles)})" if titles else "")
    data = base64.b64encode(png).decode("ascii")
    return (f'<img src="data:image/png;base64,{data}" width="{width // 2}" height="{height // 2}" '
            f'alt="{html.escape(alt, quote=True)}"/>')


def show_figures_sharp(shell: Any = None) -> bool:
    """Show every figure of the IPython ``shell`` (default: the running one) as one ``text/html`` output,
    :func:`figure_html` (a screen with two device pixels per CSS pixel draws every pixel), instead of the inline
    backend's ``image/png`` (removed: the same picture again). Returns False outside IPython. Running the inline
    backend's set-up again (``%matplotlib inline`` after another backend, ``%config InlineBackend.figure_formats``)
    brings its own PNG back; calling this again restores the sharp one."""
    if shell is None:
        shell = getattr(builtins, "get_ipython", lambda: None)()  # IPython puts get_ipython into builtins
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "text/html" not in formatters:
        return False
    if matplotlib.get_backend() in ("inline", "module://matplotlib_inline.backend_inline"):
        # The inline backend sets its figure formats (removing every other formatter of figures) when its module is
        # first imported, which pyplot does only when the first figure is made: import it now, so that it comes first.
        importlib.import_module("matplotlib_inline.backend_inline")
    for mime in ("image/png", "image/jpeg", "image/svg+xml", "application/pdf"):
        if mime in formatters:
            formatters[mime].pop(Figure, None)
    formatters["text/html"].for_type(Figure, figure_html)
    return True


def number(value: float) -> str:
    """A value as a description prints it: two decimals (few digits: the same at any thread count), whole above 1000."""
    value = float(value)
    if value != value:
        return "NaN"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{round(value, 2) + 0.0:.2f}"  # + 0.0: no "-0.00"


def _on_x(value: float) -> str:
    """A place on an x axis (a step, a size): whole numbers whole, others as :func:`number`."""
    return f"{float(value):,.0f}" if float(value).is_integer() else number(value)


def _label(labels: Any, i: int, axis: str) -> str:
    return f"'{labels[i]}'" if labels is not None else f"{axis} {i}"


def matrix_sentence(array: Any, x_labels: Any = None, y_labels: Any = None, *, title: str | None = None,
                    what: str = "Heatmap", xlabel: str = "key", ylabel: str = "query") -> str:
    """One sentence on a matrix ``(rows, cols)`` as a heatmap draws it: its size, its range, its blank cells
    (NaN or -inf), and where each row is largest (for a matrix of two values, a mask: how many cells of each row
    hold the larger): row by row for up to 8 rows, else as a pattern (how many rows
    are largest on the diagonal, one to the left, in the first column) for a square matrix, else the largest cell."""
    a = np.asarray(array, dtype=np.float64)
    n_rows, n_cols = a.shape
    row_name, col_name = ylabel or "row", xlabel or "column"
    name = f"{what} '{title}'" if title else what
    text = f"{name}: {n_rows} {row_name} rows by {n_cols} {col_name} columns"
    finite = np.isfinite(a)
    if not finite.any():
        return text + ", no finite value."
    text += f", values {number(a[finite].min())} to {number(a[finite].max())}"
    if not finite.all():
        text += f", {int((~finite).sum())} cells blank"
    if np.unique(a[finite]).size <= 2:  # a mask (0 and 1, or 0 and -inf): how many cells of each row are on
        top = a[finite].max()
        return text + f"; cells at {number(top)} in each row: " + ", ".join(
            str(int((a[i] == top).sum())) for i in range(n_rows)) + "."
    filled = np.where(finite, a, -np.inf)
    best = filled.argmax(axis=1)
    rows_with_values = [i for i in range(n_rows) if finite[i].any()]
    if n_rows <= 8:
        pairs = [f"{_label(y_labels, i, row_name)} to {_label(x_labels, best[i], col_name)} ({number(a[i, best[i]])})"
                 for i in rows_with_values]
        return text + "; largest in each row: " + ", ".join(pairs) + "."
    if n_rows == n_cols:
        counts = {"on the diagonal": sum(best[i] == i for i in rows_with_values),
                  "one column to the left of it": sum(best[i] == i - 1 for i in rows_with_values),
                  "in the first column": sum(best[i] == 0 and i not in (0, 1) for i in rows_with_values)}
        found = [f"{k} in {v}" for k, v in counts.items() if v]
        rest = len(rows_with_values) - sum(counts.values())
        if found and rest:
            found.append(f"elsewhere in {rest}")
        if found:
            return text + f"; of the {len(rows_with_values)} rows, the largest value is " + ", ".join(found) + "."
    i, j = np.unravel_index(filled.argmax(), a.shape)
    return text + f"; largest {number(a[i, j])} at {_label(y_labels, i, row_name)}, {_label(x_labels, j, col_name)}."


def lines_sentence(ax: Axes, what: str = "Line plot") -> str:
    """One sentence on the lines of ``ax``: each labelled line's first and last value, its lowest and highest."""
    title = ax.get_title()
    parts = []
    for line in ax.get_lines():
        label = line.get_label()
        x, y = (np.asarray(v, dtype=np.float64) for v in line.get_data())
        if label.startswith("_") or y.size < 2 or x.size != y.size:
            continue
        if line.get_transform() != ax.transData:  # axhline / axvline: a reference line across the axes
            if np.all(y == y[0]):
                parts.append(f"{label}: a horizontal line at {number(y[0])}")
            elif np.all(x == x[0]):
                parts.append(f"{label}: a vertical line at {_on_x(x[0])}")
            continue
        at = [_on_x(v) for v in (x[0], x[-1])]
        parts.append(f"{label}: {number(y[0])} at {at[0]} to {number(y[-1])} at {at[1]} "
                     f"(lowest {number(np.nanmin(y))}, highest {number(np.nanmax(y))})")
    head = f"{what} '{title}'" if title else what
    axes = f" of {ax.get_ylabel() or 'value'} against {ax.get_xlabel() or 'x'}"
    return head + axes + (": " + "; ".join(parts) if parts else "") + "."
