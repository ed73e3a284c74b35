"""The multi-head lesson's explorer: how many heads, how wide, how many tokens, and what each head looks at.

Sliders for ``num_heads`` (1 to 8), ``chan`` (8 to 128 in steps of 8) and ``tokens`` (4 to 32)
over one running sentence. The picture shows every head's attention weights for the first
``tokens`` words (one heatmap per head, token labels, one colour bar); under it a table lists the
shape of every step of :class:`attn_helpers.Attention` for the current values.

Speed: matplotlib draws the grid of labelled heatmaps once per layout (number of heads and
tokens). A move that keeps the layout (``chan``) only changes the heatmaps' data; their cells are
then painted straight into a kept copy of the rendered picture and encoded as PNG, so the update
stays under 100 ms (``make bench`` measures it against redrawing everything, as ``interact`` would).
"""

from __future__ import annotations

import html
import struct
import zlib
from collections.abc import Mapping, Sequence

import ipywidgets as W
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor

from ..attention import Attention
from ..plotting import head_grid, to_numpy
from ._base import Explorer, InvalidCombination

__all__ = ["HeadsExplorer"]

SENTENCE = tuple(
    "the cat sat on the mat because it was warm and the dog slept by the door while rain fell "
    "on the old roof of the quiet house near the river bank".split()
)  # 32 words; the explorer shows the first `tokens` of them
MAX_HEADS = 8
CHAN_MIN, CHAN_MAX, CHAN_STEP = 8, 128, 8
TOKENS_MIN, TOKENS_MAX = 4, len(SENTENCE)
EMBED_STD = 2.5  # token vectors' spread: with 1.0 every random head's weights sit near 1 / tokens

# The pipeline's steps as the table lists them: (name(s), key in Attention's intermediates, what happens).
STEPS = (
    ("x", "x", "token vectors, one row per word"),
    ("qkv", "qkv", "one Linear(dim, 3·chan) makes q, k and v at once"),
    ("q, k, v", "q", "reshape(B, N, 3, H, head_dim).permute(2, 0, 3, 1, 4), then unbind: each head gets head_dim features"),
    ("scores", "scores", "q @ kᵀ · head_dim<sup>−½</sup>: one N × N matrix per head"),
    ("weights", "weights", "softmax over the keys: the pictures above"),
    ("heads", "heads", "weights @ v: each head's output"),
    ("merged", "merged", "heads side by side again: transpose(1, 2).reshape(B, N, chan)"),
    ("out", "out", "proj(merged) + v with its heads merged: the skip goes through v, which is chan wide like out"),
)


def _sentence_vectors(tokens: Sequence[str], dim: int, seed: int) -> Tensor:
    """Token vectors ``(1, N, dim)``: equal words get equal vectors; the global RNG is left alone."""
    vocab = list(dict.fromkeys(SENTENCE))  # every word of the running sentence, first-seen order
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(len(vocab), dim, generator=generator) * EMBED_STD  # (vocab, dim)
    ids = torch.tensor([vocab.index(t) for t in tokens])  # (N,)
    return table[ids][None]  # (1, N, dim)


def _intermediates(num_heads: int, chan: int, tokens: int, dim: int, seed: int) -> dict[str, Tensor]:
    """One forward pass of a seeded ``Attention(dim, chan, num_heads)`` over the first ``tokens`` words.

    Same arguments, same numbers. The weights depend on ``chan`` but not on ``num_heads`` (the
    Linear layers have the same shapes), so moving ``num_heads`` only changes how the same q, k
    and v are cut into heads. Runs on one CPU thread: for tensors this small, waking a second
    thread costs more than it saves (ten times more on a busy 2-core machine); the previous
    thread count is restored afterwards.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            layer = Attention(dim, chan, num_heads)
        x = _sentence_vectors(SENTENCE[:tokens], dim, seed)  # (1, N, dim)
        with torch.no_grad():
            _, inter = layer(x, return_intermediates=True)
    finally:
        torch.set_num_threads(threads)
    return inter


def _not_divisible(chan: int, num_heads: int) -> str:
    heads_ok = [h for h in range(1, MAX_HEADS + 1) if chan % h == 0]
    chans_ok = [c for c in range(CHAN_MIN, CHAN_MAX + 1, CHAN_STEP) if c % num_heads == 0]
    return (f"chan={chan} cannot be cut into {num_heads} equal heads: head_dim = chan / num_heads = "
            f"{chan}/{num_heads} = {chan / num_heads:.3g} is not a whole number of features. "
            f"With chan={chan} try num_heads in {heads_ok}; with {num_heads} heads try chan in {chans_ok}.")


def _png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an ``(height, width, 3)`` uint8 picture, about twice as fast as Pillow's encoder.

    Every row uses PNG's "Up" filter (the difference to the row above, which is zero inside a
    heatmap's cells) and zlib's fastest level; the file is a standard, lossless 8-bit RGB PNG.
    """
    height, width, _ = rgb.shape
    rows = np.empty((height, 1 + 3 * width), dtype=np.uint8)  # a filter-type byte, then the row
    rows[:, 0] = 2  # "Up"; the first row's "row above" is zeros, so it holds the raw values
    rows[0, 1:] = rgb[0].reshape(-1)
    np.subtract(rgb[1:].reshape(height - 1, -1), rgb[:-1].reshape(height - 1, -1), out=rows[1:, 1:])

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
            + chunk(b"IEND", b""))


class HeadsExplorer(Explorer):
    """Move ``num_heads``, ``chan`` and ``tokens``: every head's attention weights and every shape.

    ``HeadsExplorer(num_heads=4, chan=64, tokens=8)``; display it as a cell's last line. The
    sentence is ``HeadsExplorer.SENTENCE`` (32 words; the first ``tokens`` are used), ``dim`` is the
    width of its token vectors (seed 000's 49). Same slider values, same picture: the token vectors
    and the layer's weights are drawn from ``seed`` every time (the notebook's random state is not
    touched). Equal words have equal vectors, so their rows and columns look alike in every head.
    ``chan`` not divisible by ``num_heads`` is explained in words, with the values that work.
    """

    SENTENCE = SENTENCE

    def __init__(self, num_heads: int = 4, chan: int = 64, tokens: int = 8, *, dim: int = 49, seed: int = 0) -> None:
        for name, value, low, high in (("num_heads", num_heads, 1, MAX_HEADS), ("chan", chan, CHAN_MIN, CHAN_MAX),
                                       ("tokens", tokens, TOKENS_MIN, TOKENS_MAX), ("dim", dim, 1, 4096)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
        if chan % CHAN_STEP:
            raise ValueError(f"chan must be a multiple of {CHAN_STEP} (the slider's step), got {chan}")
        self.dim, self.seed = dim, int(seed)
        self.images: list = []
        self.layout: tuple[int, int] | None = None  # (num_heads, tokens) the figure is drawn for
        self._background: np.ndarray | None = None  # the rendered picture, heatmaps painted in by us
        self._panels: list = []  # where each head's cells go in that picture
        self._inter: dict[str, Tensor] = {}
        style = {"description_width": "initial"}
        controls = {
            "num_heads": W.IntSlider(value=num_heads, min=1, max=MAX_HEADS, description="num_heads", style=style,
                                     continuous_update=False),
            "chan": W.IntSlider(value=chan, min=CHAN_MIN, max=CHAN_MAX, step=CHAN_STEP, description="chan",
                                style=style, continuous_update=True),
            "tokens": W.IntSlider(value=tokens, min=TOKENS_MIN, max=TOKENS_MAX, description="tokens", style=style,
                                  continuous_update=False),
        }
        super().__init__(controls, figsize=(8.0, 3.5), dpi=80)

    def intermediates(self, num_heads: int, chan: int, tokens: int) -> dict[str, Tensor]:
        """The forward pass behind the picture for these values: ``Attention``'s intermediates by name
        (shapes in ``Attention.AXES``; ``"weights"`` is ``(1, num_heads, tokens, tokens)``)."""
        return _intermediates(num_heads, chan, tokens, self.dim, self.seed)

    # -- figure ------------------------------------------------------------------------------
    def draw(self, figure: Figure) -> None:
        num_heads, tokens = self.controls["num_heads"].value, self.controls["tokens"].value
        self.images = head_grid(np.zeros((num_heads, tokens, tokens)), SENTENCE[:tokens], figure=figure,
                                resize_figure=True)
        self.layout = (num_heads, tokens)
        self._background = None

    def needs_redraw(self, num_heads: int, chan: int, tokens: int) -> bool:
        # An impossible combination shows no picture, so it keeps the old layout (no wasted redraw).
        return chan % num_heads == 0 and (num_heads, tokens) != self.layout

    def update(self, num_heads: int, chan: int, tokens: int) -> str:
        if chan % num_heads:
            self._inter = {}
            self.table_html.value = ""  # no shapes for an impossible combination (not the last ones either)
            raise InvalidCombination(_not_divisible(chan, num_heads))
        self._inter = self.intermediates(num_heads, chan, tokens)
        weights = to_numpy(self._inter["weights"][0])  # (H, N, N)
        for image, head in zip(self.images, weights):
            image.set_data(head)
        head_dim = chan // num_heads
        return f"head_dim = {chan}/{num_heads} = {head_dim}; weights {list(self._inter['weights'].shape)}"

    def table(self, num_heads: int, chan: int, tokens: int) -> str:
        return shape_table_html(self._inter, Attention.AXES)

    # -- rendering ---------------------------------------------------------------------------
    def render_png(self) -> bytes:
        """The PNG the browser shows.

        After a (re)draw, matplotlib renders everything except the heatmaps once (labels, titles,
        frames, colour bar) and that picture is kept. Each update paints every head's cells into
        its panel of the kept picture (all of the panel's pixels, so nothing stale remains), one
        colour per cell, as ``imshow`` with ``interpolation="nearest"`` shows them, inside the frame.
        """
        if self._background is None:
            for image in self.images:
                image.set_visible(False)
            try:
                self.canvas.draw()
            finally:
                for image in self.images:
                    image.set_visible(True)
            self._background = np.ascontiguousarray(np.asarray(self.canvas.buffer_rgba())[..., :3])  # (h, w, 3)
            self._panels = [self._panel_pixels(image) for image in self.images]
        frame = self._background
        for image, (rows, cols, per_row, per_col) in zip(self.images, self._panels):
            colours = image.cmap(image.norm(image.get_array()), bytes=True)[..., :3]  # (N, N, 3)
            if image.origin == "lower":
                colours = colours[::-1]  # (N, N, 3), row 0 at the top like the picture
            # Every pixel of the panel gets its cell's colour: cell (r, c) covers per_row[r] x per_col[c] pixels.
            frame[rows, cols] = np.repeat(np.repeat(colours, per_row, axis=0), per_col, axis=1)
        return _png(frame)

    def _panel_pixels(self, image) -> tuple[slice, slice, np.ndarray, np.ndarray]:
        """Which pixels of the picture show ``image``, and how many pixel rows (columns) each row
        (column) of cells covers, top to bottom (left to right).

        The pixels whose centre lies inside the axes, less any edge row or column where the
        kept picture (drawn without heatmaps) shows the frame rather than the empty panel.
        Display coordinates start at the bottom left, the picture's rows at the top.
        """
        height = self._background.shape[0]
        x0, y0, x1, y1 = image.axes.bbox.extents
        c0, c1 = int(np.ceil(x0 - 0.5)), int(np.floor(x1 - 0.5)) + 1  # centres c + 0.5 inside [x0, x1]
        r0, r1 = int(np.ceil(height - 0.5 - y1)), int(np.floor(height - 0.5 - y0)) + 1
        c0, c1, r0, r1 = max(c0, 0), min(c1, self._background.shape[1]), max(r0, 0), min(r1, height)
        middle_row, middle_col = self._background[(r0 + r1) // 2], self._background[:, (c0 + c1) // 2]
        empty = middle_row[(c0 + c1) // 2]  # the panel's own colour, at its centre
        while c1 - c0 > 1 and (middle_row[c0] != empty).any():  # the frame's left edge
            c0 += 1
        while c1 - c0 > 1 and (middle_row[c1 - 1] != empty).any():  # right edge
            c1 -= 1
        while r1 - r0 > 1 and (middle_col[r0] != empty).any():  # top edge
            r0 += 1
        while r1 - r0 > 1 and (middle_col[r1 - 1] != empty).any():  # bottom edge
            r1 -= 1
        n_rows, n_cols = image.get_array().shape[:2]
        x = np.arange(c0, c1) + 0.5  # pixel centres, display x
        y = height - (np.arange(r0, r1) + 0.5)  # pixel centres, display y
        j = np.clip(np.floor((x - x0) / (x1 - x0) * n_cols), 0, n_cols - 1).astype(int)
        i = np.clip(np.floor((y1 - y) / (y1 - y0) * n_rows), 0, n_rows - 1).astype(int)  # from the top
        return slice(r0, r1), slice(c0, c1), np.bincount(i, minlength=n_rows), np.bincount(j, minlength=n_cols)


def shape_table_html(inter: Mapping[str, Tensor], axes: Mapping[str, str]) -> str:
    """An HTML table of the pipeline's steps: name, shape, named axes and what the step does."""
    if not inter:
        return ""
    rows = []
    for label, key, what in STEPS:
        shape = list(inter[key].shape)
        named = ", ".join(f"{a}={s}" for a, s in zip(axes[key].split(), shape))
        rows.append(f"<tr><td><b>{html.escape(label)}</b></td><td><code>{shape}</code></td>"
                    f"<td><code>{html.escape(named)}</code></td><td>{what}</td></tr>")
    head = "<tr><th>step</th><th>shape</th><th>axes</th><th>what happens</th></tr>"
    style = ("<style>.heads-shapes th, .heads-shapes td {padding: 1px 10px; text-align: left}</style>")
    return (f'{style}<table class="heads-shapes" style="border-collapse:collapse;font-size:90%">'
            f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")
