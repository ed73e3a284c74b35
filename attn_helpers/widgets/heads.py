"""The multi-head lesson's explorer: how many heads, how wide, how many tokens, and what each head looks at.

Speed: each head count's figure (:class:`~attn_helpers.views.LiveHeadGrid`, with room for the labels of every
token count) is drawn when the explorer is made, so no move lays a figure out: a move redraws the heatmaps onto the
kept picture of the head count shown, and a ``tokens`` move the token labels into it first.
"""

from __future__ import annotations

import html
import ipywidgets as W
from matplotlib.figure import Figure
from torch import Tensor

from ..core import Attention
from ..lab import sentence_intermediates
from ..lab.example import LONG_SENTENCE as SENTENCE  # 32 words; the explorer shows the first `tokens` of them
from ..views import LiveHeadGrid, shape_rows
from ._base import OUTPUT_WIDTH_PX, WIDE, Explorer, check_choice, check_int, int_slider

__all__ = ["HeadsExplorer", "EMBED_STD"]

HEAD_COUNTS = (1, 2, 4, 8)  # each divides every chan on offer
CHAN_MIN, CHAN_MAX, CHAN_STEP = 8, 128, 8
TOKENS_MIN, TOKENS_MAX = 4, len(SENTENCE)
EMBED_STD = 2.5  # token vectors' spread: with 1.0 every random head's weights sit near 1 / tokens

# The pipeline's steps as the table lists them: (name(s), key in Attention's intermediates, what happens).
STEPS = (
    ("x", "x", "token vectors, one row per word"),
    ("qkv", "qkv", "one Linear(dim, 3·chan) makes q, k and v at once"),
    ("q_heads, k_heads, v_heads", "q", "reshape(B, N, 3, H, head_dim).permute(2, 0, 3, 1, 4), then unbind: each head gets head_dim features"),
    ("scores", "scores", "q @ kᵀ · head_dim<sup>−½</sup>: one N × N matrix per head"),
    ("weights", "weights", "softmax over the keys: the pictures above"),
    ("heads", "heads", "weights @ v: each head's output"),
    ("merged", "merged", "heads side by side again: transpose(1, 2).reshape(B, N, chan)"),
    ("out", "out", "proj(merged) + v with its heads merged: the skip goes through v, which is chan wide like out"),
)

# A step's name and shape never wrap: a browser would otherwise break "[1, 8, 192]" after a comma when the table is
# narrow (it did at 1366 px with the file browser open). The named axes may wrap between axes ("batch=1, H=8")
# and the words of the last column between words, so the table still fits a narrow output area. Set on each cell,
# so it holds wherever the HTML is shown.
KEEP_ON_ONE_LINE = 'style="white-space:nowrap"'


class HeadsExplorer(Explorer):
    """Lessons 00 and 05: Move ``num_heads``, ``chan`` and ``tokens``: every head's attention weights and every shape.

    Over the first ``tokens`` words of ``HeadsExplorer.SENTENCE``, token vectors ``dim`` wide (walkthrough 000's
    49); under the picture, the shape of every step of :class:`attn_helpers.Attention`. The token vectors (equal
    words, equal vectors) and the layer's weights are drawn from ``seed`` every time (the notebook's random state is
    not touched). ``num_heads`` offers 1, 2, 4 and 8 only: each divides every ``chan`` on offer (multiples of 8), so
    every combination of the sliders is a valid layer.
    """

    SENTENCE = SENTENCE
    layout_attributes = ("grid", "images")  # one figure per head count, kept

    def __init__(self, num_heads: int = 4, chan: int = 64, tokens: int = 8, *, dim: int = 49, seed: int = 0) -> None:
        check_choice("num_heads", num_heads, HEAD_COUNTS, " (each divides every chan on offer)")
        check_int("chan", chan, CHAN_MIN, CHAN_MAX)
        check_int("tokens", tokens, TOKENS_MIN, TOKENS_MAX)
        check_int("dim", dim, 1, 4096)
        if chan % CHAN_STEP:
            raise ValueError(f"chan must be a multiple of {CHAN_STEP} (the slider's step), got {chan}")
        self.dim, self.seed = dim, int(seed)
        self.images: list = []  # each head's cells
        self.grid: LiveHeadGrid | None = None  # the panels of the head count shown
        self._inter: dict[str, Tensor] = {}
        controls = {
            "num_heads": W.SelectionSlider(options=list(HEAD_COUNTS), value=num_heads, description="num_heads",
                                           style=WIDE, continuous_update=False),
            "chan": int_slider("chan", chan, CHAN_MIN, CHAN_MAX, CHAN_STEP, continuous_update=True),
            "tokens": int_slider("tokens", tokens, TOKENS_MIN, TOKENS_MAX),
        }
        super().__init__(controls, figsize=(8.0, 3.5), dpi=80)
        # The four head counts' figures drawn now (about 60 ms each on a 2-core CPU): a move of num_heads swaps one in
        self.prepare_layouts({"num_heads": h} for h in HEAD_COUNTS)

    def intermediates(self, num_heads: int, chan: int, tokens: int) -> dict[str, Tensor]:
        """The forward pass behind the picture for these values: ``Attention``'s intermediates by name
        (shapes in ``Attention.AXES``; ``"weights"`` is ``(1, num_heads, tokens, tokens)``)."""
        return sentence_intermediates(SENTENCE[:tokens], SENTENCE, num_heads, chan, self.dim, seed=self.seed,
                                      std=EMBED_STD)

    def layout_key(self, num_heads: int, chan: int, tokens: int) -> int:
        return num_heads

    def needs_redraw(self, num_heads: int, chan: int, tokens: int) -> bool:
        return num_heads != self.grid.num_heads

    def draw(self, figure: Figure) -> None:
        # never wider than a laptop's output column, labels never smaller than 7.5 pt (8.3 px at 80 dpi)
        self.grid = LiveHeadGrid(figure, self.controls["num_heads"].value, SENTENCE,
                                 max_width=OUTPUT_WIDTH_PX / self.css_dpi, min_fontsize=7.5)
        self.images = self.grid.images
        self.dynamic(self.images)
        self.dynamic(self.grid.labels, kept=True)  # drawn into the kept picture, again when the tokens change

    def update(self, num_heads: int, chan: int, tokens: int) -> str:
        self._inter = self.intermediates(num_heads, chan, tokens)
        if self.grid.show(self._inter["weights"][0]):  # (H, N, N); True: other tokens, other labels
            self.kept_changed()
        head_dim = chan // num_heads
        return f"head_dim = {chan} // {num_heads} = {head_dim}; weights {list(self._inter['weights'].shape)}"

    def describe(self, num_heads: int, chan: int, tokens: int) -> str:
        weights = self._inter["weights"][0]  # (H, N, N)
        top = ", ".join(f"{w:.2f}" for w in weights.amax(dim=(-2, -1)).tolist())
        return (f"{num_heads} heatmaps, one per head (head_dim {chan // num_heads}), of the attention weights among "
                f"the first {tokens} words of '{' '.join(SENTENCE[:4])} ...': rows are queries, columns keys, "
                f"brighter (yellow) is more weight, dark purple is none. Largest weight in each head: {top}.")

    def table(self, num_heads: int, chan: int, tokens: int) -> str:
        """An HTML table of the pipeline's steps: name, shape, named axes and what the step does."""
        named_shapes = {name: (shape, named) for name, shape, named in shape_rows(self._inter, Attention.AXES)}
        rows = []
        for label, key, what in STEPS:
            shape, named = named_shapes[key]
            rows.append(f"<tr><td {KEEP_ON_ONE_LINE}><b>{html.escape(label)}</b></td>"
                        f"<td {KEEP_ON_ONE_LINE}><code>{html.escape(str(shape))}</code></td>"
                        f"<td><code>{html.escape(named)}</code></td><td>{what}</td></tr>")
        head = "<tr><th>step</th><th>shape</th><th>axes</th><th>what happens</th></tr>"
        style = ("<style>.heads-shapes th, .heads-shapes td {padding: 1px 10px; text-align: left; vertical-align: top}"
                 "</style>")
        return (f'{style}<table class="heads-shapes" style="border-collapse:collapse;font-size:90%">'
                f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")
