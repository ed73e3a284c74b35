"""Shared helpers for the explorer tests (``tests/widgets/test_widgets_*.py``): decoding PNGs, comparing renders."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_pixels(png: bytes) -> np.ndarray:
    """The RGB pixels ``(height, width, 3)`` of PNG bytes (as an explorer sends them to the browser)."""
    png = bytes(png)  # ipywidgets.Image may hold a memoryview
    assert png.startswith(PNG_SIGNATURE), "not a PNG"
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def full_render_differs(explorer) -> float:
    """The fraction of pixels where a blitting explorer's fast PNG (kept picture + redrawn artists, see
    ``attn_helpers.widgets.Explorer``) differs visibly from matplotlib's own full render of the figure."""
    fast = png_pixels(explorer.image.value).astype(int)
    for artist in explorer._dynamic + explorer._kept:
        artist.set_animated(False)  # a full render skips animated artists
    try:
        buffer = io.BytesIO()
        explorer.canvas.print_png(buffer)
    finally:
        for artist in explorer._dynamic + explorer._kept:
            artist.set_animated(True)
    full = png_pixels(buffer.getvalue()).astype(int)
    assert fast.shape == full.shape
    return float((np.abs(fast - full).max(axis=-1) > 40).mean())


def assert_move_redraws(explorer, change: dict, expected: str) -> None:
    """Moving the controls in ``change`` keeps the explorer valid, changes its picture and puts ``expected`` in its
    status line (the parametrised control test of the explorers whose every control redraws)."""
    before = explorer.image.value
    explorer.set(**change)
    assert explorer.valid, explorer.last_status
    assert explorer.image.value != before, f"{change}: the picture did not change"
    assert expected in explorer.last_status, explorer.last_status
