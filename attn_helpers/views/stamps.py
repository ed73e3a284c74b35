"""Text drawn once and pasted after: for pictures an explorer redraws while a slider moves.

matplotlib 3.11's Agg renderer lays out and rasterises every glyph of a text anew on each draw, one glyph at a
time (about 0.1 ms a glyph on a 2-core CPU: a 70-character title costs 8 ms, a grid's 192 token labels 150 ms).
Here each distinct text is drawn once by matplotlib's own text code on a transparent canvas, cropped to its ink
and kept (:func:`text_stamp`); every later draw pastes the kept pixels with the text's anchor on a whole pixel
(:func:`paste_text`). A pasted text thus stands within a pixel of where matplotlib draws it, in the same glyphs.

The kept picture is keyed on everything its pixels depend on: the words, the font, size, colour, alpha,
rotation, alignment and line spacing, the figure's dpi and the rc text style (:func:`text_style`), so a text
is never pasted in another style than it would be drawn in.

Used by :class:`StampedText` (a text artist drawn this way: an explorer's title or note) and by
:class:`~attn_helpers.views.labels.TokenLabels` (a panel side's token labels).
"""

from __future__ import annotations

import functools
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import to_rgba
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from matplotlib.transforms import IdentityTransform, ScaledTranslation

__all__ = ["StampedText", "stamped_suptitle", "stamped_title", "text_width"]  # and, for this room, paste_text, text_stamp, text_style

_STYLE_PARAMS = ("font.family", "font.sans-serif", "font.serif", "font.monospace", "font.weight", "font.style",
                 "text.antialiased", "text.hinting", "text.hinting_factor", "mathtext.fontset")
_SPILL = 4  # pixels: how far antialiased ink may reach beyond a text's layout box
_DEFAULT_LINESPACING = Text()._linespacing  # "normal" in matplotlib 3.11, 1.2 before


def text_style() -> tuple:
    """The rc settings a text's pixels depend on beyond its own properties, as a key (:func:`text_stamp`)."""
    return tuple((name, str(plt.rcParams[name])) for name in _STYLE_PARAMS if name in plt.rcParams)


@functools.lru_cache(maxsize=1)
def _measuring_renderer() -> RendererAgg:
    return RendererAgg(1, 1, 72)  # at 72 dpi one pixel is one point


def text_width(text: str, prop: FontProperties) -> float:
    """``text``'s width in points in the font ``prop``, as matplotlib's Agg renderer lays it out (one line)."""
    return _measuring_renderer().get_text_width_height_descent(text, prop, ismath=False)[0]


@functools.lru_cache(maxsize=1)
def _stamp_canvas() -> tuple[Any, Text]:
    """A transparent figure holding one text artist, on which :func:`text_stamp` draws each text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.0, 1.0))
    figure.patch.set_alpha(0.0)
    return FigureCanvasAgg(figure), figure.text(0.0, 0.0, "", transform=IdentityTransform())


@functools.lru_cache(maxsize=4096)
def text_stamp(text: str, prop: FontProperties, dpi: float, *, color: tuple = (0.0, 0.0, 0.0, 1.0),
               rotation: float = 0.0, ha: str = "left", va: str = "baseline", ma: str | None = None,
               linespacing: float | str | None = None, antialiased: bool | None = None, parse_math: bool = True,
               style: tuple = ()) -> tuple[np.ndarray, int, int]:
    """``text`` as matplotlib's Agg renderer draws it at ``dpi`` (under the rc ``style``, see :func:`text_style`),
    on a transparent ground, cropped to its ink: ``(rgba, dx, dy)``, the picture's rows bottom first (as
    ``draw_image`` takes them) and its bottom-left corner's offset in whole pixels from the text's anchor (the point
    ``ha`` / ``va`` align to). ``ma``, ``linespacing`` and ``antialiased`` ``None`` are matplotlib's defaults. A
    text with no ink gives an empty picture. ``prop`` must not change afterwards (it is part of the key: pass a
    copy)."""
    canvas, artist = _stamp_canvas()
    figure = canvas.figure
    if figure.dpi != dpi:
        figure.set_dpi(dpi)
    artist.set(text=text, fontproperties=prop, color=color, rotation=rotation, ha=ha, va=va, parse_math=parse_math,
               linespacing=_DEFAULT_LINESPACING if linespacing is None else linespacing, position=(0.0, 0.0))
    artist._multialignment = ma  # None (follow ha) cannot be set through set_multialignment
    if hasattr(artist, "set_antialiased"):  # matplotlib >= 3.8 keeps it per text, read from rc when made
        artist.set_antialiased(plt.rcParams["text.antialiased"] if antialiased is None else antialiased)
    renderer = canvas.get_renderer()
    (x0, y0), (x1, y1) = artist.get_window_extent(renderer).get_points()  # the layout's box around (0, 0), pixels
    reach = int(np.ceil(max(abs(x0), abs(x1), abs(y0), abs(y1)))) + _SPILL
    size = max(2 * reach, *canvas.get_width_height())  # the canvas only grows: one renderer is reused
    if canvas.get_width_height() != (size, size):
        figure.set_size_inches((size + 0.5) / dpi, (size + 0.5) / dpi)  # + 0.5: whole pixels, never one short
        renderer = canvas.get_renderer()
    anchor = size // 2  # a whole pixel in the middle of the canvas
    artist.set_position((anchor, anchor))
    renderer.clear()  # transparent
    artist.draw(renderer)  # the text alone: nothing else in the figure is drawn
    # only the layout's box (and the antialiasing's spill) can hold ink; the buffer's rows run top first
    row0, col0 = max(size - anchor - int(np.ceil(y1)) - _SPILL, 0), max(anchor + int(np.floor(x0)) - _SPILL, 0)
    window = np.asarray(renderer.buffer_rgba())[row0:size - anchor - int(np.floor(y0)) + _SPILL,
                                                col0:anchor + int(np.ceil(x1)) + _SPILL]
    alpha = window[..., 3]
    rows, cols = alpha.any(axis=1), alpha.any(axis=0)
    if not rows.any():
        return np.zeros((0, 0, 4), np.uint8), 0, 0
    top, bottom = int(rows.argmax()), len(rows) - int(rows[::-1].argmax())
    left, right = int(cols.argmax()), len(cols) - int(cols[::-1].argmax())
    # offsets of the ink's bottom-left corner from the anchor; Agg's draw_image takes the picture's rows bottom first
    return window[top:bottom, left:right][::-1].copy(), col0 + left - anchor, (size - anchor - row0) - bottom


def paste_text(renderer: Any, x: float, y: float, text: str, prop: FontProperties, *, color: Any = None,
               alpha: float | None = None, **layout: Any) -> None:
    """Draw ``text`` on an Agg ``renderer`` with its anchor at display pixel ``(x, y)`` (rounded to a whole
    pixel), as :func:`text_stamp` drew it once; ``color`` ``None`` is the rc ``text.color``; ``layout``:
    :func:`text_stamp`'s ``rotation``, ``ha``, ``va``, ``ma``, ``linespacing``, ``antialiased``, ``parse_math``."""
    rgba = to_rgba(plt.rcParams["text.color"] if color is None else color, alpha)
    stamp, dx, dy = text_stamp(text, prop.copy(), float(renderer.dpi), color=rgba, style=text_style(), **layout)
    if stamp.size:
        gc = renderer.new_gc()
        renderer.draw_image(gc, round(x) + dx, round(y) + dy, stamp)
        gc.restore()


class StampedText(Text):
    """A text artist drawn from a kept picture of itself (:func:`paste_text`): for a title or a note an explorer
    changes on every move, which then costs about as little the second time a state is shown as any line.

    It is made and set like :class:`matplotlib.text.Text`. On a renderer other than Agg (a PDF or SVG), with a
    box, with wrapping, or with ``rotation_mode="anchor"`` it is drawn as a plain text artist; a pasted text is
    not clipped."""

    def draw(self, renderer: Any) -> None:
        if renderer is not None:
            self._renderer = renderer
        if not self.get_visible() or not self.get_text():
            return
        if (not isinstance(renderer, RendererAgg) or self.get_bbox_patch() is not None or self.get_wrap()
                or self.get_rotation_mode() == "anchor"):
            super().draw(renderer)
            return
        x, y = self.get_transform().transform(self.get_unitless_position())
        paste_text(renderer, x, y, self.get_text(), self.get_fontproperties(), color=self.get_color(),
                   alpha=self.get_alpha(), rotation=float(self.get_rotation()), ha=self.get_horizontalalignment(),
                   va=self.get_verticalalignment(), ma=self._multialignment, linespacing=self._linespacing,
                   antialiased=getattr(self, "_antialiased", None), parse_math=self.get_parse_math())
        self.stale = False


def stamped_title(ax: Any) -> StampedText:
    """A :class:`StampedText` taking the place of ``ax``'s title (centred, ``axes.titlepad`` above the axes, in
    the title's font, colour and words, which ``ax.title`` then no longer shows), added to ``ax``; set its words
    with ``set_text``."""
    pad = ScaledTranslation(0.0, plt.rcParams["axes.titlepad"] / 72.0, ax.figure.dpi_scale_trans)
    title = StampedText(0.5, 1.0, ax.title.get_text(), transform=ax.transAxes + pad, ha="center", va="baseline")
    title.update_from(ax.title)  # font, size, weight and colour as matplotlib gives its own title
    title.set_clip_on(False)
    ax.title.set_text("")
    ax.add_artist(title)
    return title


def stamped_suptitle(figure: Any, fontsize: float) -> StampedText:
    """A :class:`StampedText` where ``figure.suptitle`` puts a title (centred at the top), added to ``figure``."""
    return figure.add_artist(StampedText(0.5, 0.98, "", fontsize=fontsize, ha="center", va="top",
                                         transform=figure.transFigure))
