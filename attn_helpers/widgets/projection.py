"""Lesson 01's explorer: what one fused ``Linear(dim, 3 * chan)`` does to a sentence's token vectors."""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as W
import numpy as np
import torch
from matplotlib.figure import Figure

from ..core import Attention
from ..lab import VOCAB, embed, local_random
from ..lab.example import SENTENCE
from ..views import SIGNED_CMAP, heatmap, to_numpy
from ._base import Explorer, InvalidCombination, heads_in_words, int_slider

__all__ = ["ProjectionExplorer"]

SEED_B, SEED_N = 13, 100  # walkthrough 000's batch, for the shapes table
MAX_DIM, MAX_CHAN, MAX_HEADS = 96, 96, 8
# One colour scale for every setting, so colours compare across moves and the colour bars are drawn once:
# for the lesson's sentence, |x| stays under 4.1 and |q|, |k|, |v| under 2.9 for every dim, chan and qkv_bias
# on offer. A setting that goes beyond (other tokens) widens the scale, which lays the figure out again.
X_RANGE, QKV_RANGE = 4.5, 3.0


def sentence_embeddings(tokens: Sequence[str], dim: int, *, seed: int = 0) -> torch.Tensor:
    """Token vectors ``(1, N, dim)``, equal words equal rows: the running example's table (:func:`attn_helpers.embed`)
    for its words, so the explorer shows the lesson's vectors; a seeded table of their own for other words."""
    if all(t in VOCAB for t in tokens):
        return embed(tokens, dim, seed=seed)[None]  # (1, N, dim)
    vocab = sorted(set(tokens))
    table = torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(10_000 * seed + dim))  # (vocab, dim)
    return table[torch.tensor([vocab.index(t) for t in tokens])][None]  # (1, N, dim)


def projected_qkv(tokens: Sequence[str], dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, *,
                  seed: int = 1) -> dict[str, torch.Tensor]:
    """Lesson 01's projection: ``x (1, N, dim)`` -> ``qkv (1, N, 3·chan)`` -> ``q, k, v (1, N, chan)`` through
    ``Attention(dim, chan, num_heads, qkv_bias)`` as built after ``torch.manual_seed(seed)`` (the notebook's random
    state is left alone); also ``params``, the number of entries of the fused projection (a 0-d tensor)."""
    with local_random(seed):
        layer = Attention(dim, chan, num_heads=num_heads, qkv_bias=qkv_bias)
    x = sentence_embeddings(tokens, dim)  # (1, N, dim)
    with torch.no_grad():
        qkv = layer.qkv(x)  # (1, N, 3*chan)
    q, k, v = qkv.split(chan, dim=-1)  # each (1, N, chan)
    params = torch.tensor(sum(p.numel() for p in layer.qkv.parameters()))
    return {"x": x, "qkv": qkv, "q": q, "k": k, "v": v, "params": params}


class ProjectionExplorer(Explorer):
    """Lesson 01: Move ``dim`` and ``chan`` and watch the shapes and the projected q, k, v of a sentence.

    ``dim``: the width of a token going in; ``chan``: the width of q, k and v coming out; ``num_heads`` and
    ``qkv_bias`` as a preview. The token vectors ``x`` and the projected ``q``, ``k``, ``v`` as heatmaps (one row
    per token), dashed lines where each head's share of the features would start; under them every shape, for the
    sentence and for walkthrough 000's batch (B=13, N=100).
    ``num_heads`` must divide ``chan`` (otherwise the widget says so in words).
    """

    def __init__(self, tokens: Sequence[str] = SENTENCE, *, dim: int = 49, chan: int = 64,
                 num_heads: int = 1, qkv_bias: bool = False) -> None:
        self.tokens = [str(t) for t in tokens]
        if not self.tokens:
            raise ValueError("tokens must name at least one token, got none")
        controls = {
            "dim": int_slider("dim (token in)", dim, 2, MAX_DIM),
            "chan": int_slider("chan (q/k/v out)", chan, 2, MAX_CHAN),
            "num_heads": int_slider("num_heads", num_heads, 1, MAX_HEADS),
            "qkv_bias": W.Checkbox(value=qkv_bias, description="qkv_bias", indent=False),
        }
        self.ranges = (X_RANGE, QKV_RANGE)  # the colour scales of x and of q, k, v (see X_RANGE)
        self._last: tuple[tuple, dict[str, torch.Tensor]] | None = None  # the last setting computed, and its tensors
        super().__init__(controls, figsize=(10.0, 2.9), dpi=80)

    def draw(self, figure: Figure) -> None:
        grid = figure.add_gridspec(1, 6, width_ratios=[1, 0.06, 1, 1, 1, 0.06], wspace=0.3,
                                   left=0.07, right=0.95, bottom=0.2, top=0.86)
        self.axes = axes = [figure.add_subplot(grid[0, i]) for i in (0, 2, 3, 4)]
        n = len(self.tokens)
        self.images = []
        self.head_lines: list[list] = []
        for i, (ax, name) in enumerate(zip(axes, ("x", "q", "k", "v"))):
            bound = self.ranges[0] if i == 0 else self.ranges[1]
            # cells as wide as the widest matrix a slider reaches: a move fills the first columns and sets the x limits
            image = heatmap(np.zeros((n, MAX_DIM if i == 0 else MAX_CHAN)), y_labels=self.tokens, ax=ax, title=name, xlabel="feature",
                            ylabel="token" if i == 0 else "", cmap=SIGNED_CMAP, vmin=-bound, vmax=bound,
                            annotate=False, colorbar=False)
            if i:
                ax.set_yticklabels([])
            ax.set_xticks([])  # the title gives the width: a number under the axis would be drawn anew on each move
            self.images.append(image)
            lines = [ax.axvline(0, color="black", lw=0.8, ls="--", visible=False) for _ in range(MAX_HEADS - 1)]
            self.head_lines.append(lines)
        self.colorbars = [figure.colorbar(self.images[0], cax=figure.add_subplot(grid[0, 1])),
                          figure.colorbar(self.images[1], cax=figure.add_subplot(grid[0, 5]), label="q, k, v value")]
        # A move changes the data, the titles (with the widths) and the head lines; the frames, the axis and token
        # labels and the colour bars (one fixed scale, see X_RANGE) are kept.
        self.dynamic([*self.images, *(ax.title for ax in axes),
                      *(line for lines in self.head_lines for line in lines)])

    def _compute(self, dim: int, chan: int, num_heads: int, qkv_bias: bool) -> dict[str, torch.Tensor]:
        heads_in_words(chan, num_heads, most=self.controls["num_heads"].max)
        key = (dim, chan, num_heads, qkv_bias)
        if self._last is None or self._last[0] != key:
            self._last = (key, projected_qkv(self.tokens, dim, chan, num_heads, qkv_bias, seed=1))
        return self._last[1]

    def needs_redraw(self, dim: int, chan: int, num_heads: int, qkv_bias: bool) -> bool:
        try:
            t = self._compute(dim, chan, num_heads, qkv_bias)
        except InvalidCombination:
            return False  # update says why
        # the colour scales (x, q/k/v) that hold t: the fixed ones, or wider where t goes beyond
        needed = (max(self.ranges[0], float(t["x"].abs().max())), max(self.ranges[1], float(t["qkv"].abs().max())))
        if needed == self.ranges:
            return False
        self.ranges = needed  # wider colour bars: lay the figure out again
        return True

    def update(self, dim: int, chan: int, num_heads: int, qkv_bias: bool) -> str:
        t = self._compute(dim, chan, num_heads, qkv_bias)
        n = len(self.tokens)
        head_dim = chan // num_heads
        for i, (ax, image, name) in enumerate(zip(self.axes, self.images, ("x", "q", "k", "v"))):
            values = to_numpy(t[name][0])  # (N, width)
            width = values.shape[1]
            image.set_data(values)
            ax.set_xlim(-0.5, width - 0.5)
            ax.set_title(f"{name}  ({n} × {width})")
            for h, line in enumerate(self.head_lines[i], start=1):  # the line where head h starts
                line.set_visible(i > 0 and h < num_heads)
                line.set_xdata([h * head_dim - 0.5] * 2)
        params = int(t["params"])
        return (f"x {list(t['x'].shape)} -> qkv {list(t['qkv'].shape)} (3 × {chan}) -> q, k, v "
                f"{list(t['q'].shape)} each; head_dim={head_dim}; qkv has {params} parameters")

    def describe(self, dim: int, chan: int, num_heads: int, qkv_bias: bool) -> str:
        n = len(self.tokens)
        return (f"Four heatmaps, one row per token of '{' '.join(self.tokens)}': the token vectors x ({n} × {dim}) "
                f"and the projected q, k and v ({n} × {chan} each), blue negative, red positive"
                + (f", with dashed lines every {chan // num_heads} features where each of {num_heads} heads starts."
                   if num_heads > 1 else "."))

    def table(self, dim: int, chan: int, num_heads: int, qkv_bias: bool) -> str:
        head_dim = chan // num_heads
        n = len(self.tokens)
        rows = [
            ("x", "(B, N, dim)", [1, n, dim], [SEED_B, SEED_N, dim]),
            ("qkv.weight", "(3·chan, dim)", [3 * chan, dim], [3 * chan, dim]),
            ("qkv", "(B, N, 3·chan)", [1, n, 3 * chan], [SEED_B, SEED_N, 3 * chan]),
            ("q, k, v", "(B, N, chan) each", [1, n, chan], [SEED_B, SEED_N, chan]),
            ("q, k, v with heads", "(B, H, N, head_dim)", [1, num_heads, n, head_dim],
             [SEED_B, num_heads, SEED_N, head_dim]),
        ]
        bias = 3 * chan if qkv_bias else 0
        cells = "".join(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(axes)}</td>"
            f"<td><code>{small}</code></td><td><code>{seed}</code></td></tr>"
            for name, axes, small, seed in rows
        )
        return (
            "<table><tr><th>tensor</th><th>axes</th><th>this sentence (B=1, N=" + str(n) + ")</th>"
            f"<th>walkthrough 000 (B={SEED_B}, N={SEED_N})</th></tr>{cells}</table>"
            f"<p>qkv parameters: 3·chan·dim = {3 * chan * dim} weight-matrix entries + {bias} bias = {3 * chan * dim + bias}</p>"
        )
