"""Fast redraws for explorers whose updates change a few artists: matplotlib's blitting, to PNG.

A full ``print_png`` lays out and rasterises every tick label, title and colour bar on each move
(most of the time goes into text). :class:`BlitExplorer` renders the figure once *without* the
artists an update changes (they are marked ``animated``), keeps that picture, and on each move
only pastes it back, draws the changed artists on top, and encodes the pixels as PNG.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

import ipywidgets as W
import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from PIL import Image

from ._base import Explorer

__all__: list[str] = []  # private: subclassed by the topic modules


class BlitExplorer(Explorer):
    """An :class:`Explorer` whose ``draw`` registers the artists ``update`` changes with :meth:`dynamic`.

    Everything else in the figure must stay as ``draw`` left it (no rescaling axes, no new artists
    in ``update``); registered artists may change data, text, colour, size and visibility. When the
    layout changes (``needs_redraw``), the figure is drawn anew and the artists registered before
    are forgotten with the old picture.
    """

    def __init__(self, controls: Mapping[str, W.ValueWidget], **figure: Any) -> None:
        self._dynamic: list[Artist] = []
        self._background: Any = None  # the kept picture: everything but the dynamic artists
        super().__init__(controls, **figure)

    def dynamic(self, artists: Iterable[Artist]) -> None:
        """Mark ``artists`` as redrawn on every update (and leave them out of the kept picture)."""
        for artist in artists:
            artist.set_animated(True)
            self._dynamic.append(artist)
        self._background = None

    def rebuild(self) -> None:
        self._dynamic = []
        self._background = None
        super().rebuild()

    def draw(self, figure: Figure) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def render_png(self) -> bytes:
        """The figure as PNG bytes: the kept picture plus the dynamic artists in their current state."""
        if self._background is None:
            self.canvas.draw()  # animated artists are left out of a full draw
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        else:
            self.canvas.restore_region(self._background)
        for artist in self._dynamic:
            self.figure.draw_artist(artist)
        pixels = np.asarray(self.canvas.buffer_rgba())[..., :3]  # (height, width, 3)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="png", compress_level=1)
        return buffer.getvalue()
