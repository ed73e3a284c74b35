"""Lesson 03's explorer: softmax temperature, mask types and mask conventions over one sentence."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as W
import torch
from matplotlib.figure import Figure
from torch import Tensor

from ..core import attend, attention_scores, causal_mask, padding_mask
from ..lab.example import PADDED_SENTENCE as DEFAULT_TOKENS
from ..views import cmap_with_nan, heatmap, to_numpy
from ._base import Explorer, refuse_zero_temperature

__all__ = ["MaskExplorer"]

DEFAULT_LENGTH = 6
MASK_TYPES = ("none", "causal", "padding", "causal+padding", "padding (queries too)")
# (label shown in the dropdown, value in the status line): this package's; masked_fill(-inf) + softmax; walkthrough 004's
CONVENTIONS = (
    ("True = keep: attn_helpers (dead row -> zeros)", "keep"),
    ("True = blocked: masked_fill(-inf) + softmax (dead row -> NaN)", "blocked"),
    ("masked_fill(keep == 0, -1e9), walkthrough 004 (dead row -> uniform)", "-1e9"),
)


def keep_mask(kind: str, n: int, length: int) -> Tensor:
    """The ``(n, n)`` boolean mask (``True`` = may attend) of one of :data:`MASK_TYPES`: ``length`` real tokens
    first, ``n - length`` padding tokens last; ``"padding (queries too)"`` also blocks every key of a padded query."""
    keep = torch.ones(n, n, dtype=torch.bool)
    real_keys = padding_mask([length], n)[0]  # (1, n): True for real keys
    if kind in ("causal", "causal+padding"):
        keep = keep & causal_mask(n)  # (n, n)
    if kind in ("padding", "causal+padding", "padding (queries too)"):
        keep = keep & real_keys  # (n, n), broadcast over query rows
    if kind == "padding (queries too)":
        keep = keep & real_keys.transpose(0, 1)  # (n, n): padded query rows blocked entirely
    return keep


def masked_weights(scores: Tensor, keep: Tensor, convention: str, temperature: float = 1.0) -> Tensor:
    """``softmax(scores / temperature)`` ``(N, N)`` with ``keep`` applied as ``convention`` does: ``"keep"`` is
    :func:`attn_helpers.attend` itself (its ``q @ kᵀ`` is ``scores`` for ``q = scores``, ``k`` the identity),
    ``"blocked"`` ``masked_fill(-inf)`` then ``torch.softmax``, ``"-1e9"`` walkthrough 004's fill."""
    if convention == "keep":
        n = scores.shape[-1]
        return attend(scores, torch.eye(n), torch.eye(n), mask=keep, scale=1.0 / temperature)[2]
    fill = float("-inf") if convention == "blocked" else -1e9
    return torch.softmax((scores / temperature).masked_fill(~keep, fill), dim=-1)


def seeded_scores(n: int, seed: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """``(N, N)`` scaled scores of a ``q`` and a ``k`` of 16 features each, drawn from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(n, 16, generator=generator, dtype=dtype) for _ in range(2))  # (N, d_k) each, q first
    return attention_scores(q, k)  # (N, N)


def row_sum_heatmap(figure: Figure, tokens: Sequence[str], *, cmap=None, bottom: float = 0.2) -> tuple:
    """Draw weights over ``tokens`` as a heatmap (zeros until set) with an empty text for each row's sum right of it
    and a colour bar; returns ``(axes, image, row-sum texts)``."""
    ax = figure.add_subplot(1, 1, 1)
    n = len(tokens)
    image = heatmap(torch.zeros(n, n), tokens, ax=ax, cmap=cmap, vmin=0.0, vmax=1.0, annotate=False, colorbar=False)
    sums = [ax.text(n - 0.3, i, "", ha="left", va="center", fontsize=8, clip_on=False) for i in range(n)]
    ax.text(n - 0.3, -0.8, "row sum", ha="left", va="center", fontsize=8, fontweight="bold", clip_on=False)
    figure.colorbar(image, ax=ax, fraction=0.046, pad=0.13, label="attention weight")
    figure.subplots_adjust(left=0.14, right=0.9, bottom=bottom, top=0.9)
    return ax, image, sums


def set_row_sums(texts: Sequence, weights: Tensor) -> str:
    """Write each row's sum of ``weights (N, N)`` in its text of :func:`row_sum_heatmap`; returns them in a line."""
    sums = [f"{s:.2f}" for s in weights.sum(dim=-1).tolist()]  # a NaN sum reads "nan"
    for text, s in zip(texts, sums):
        text.set_text(s)
    return " ".join(sums)


class MaskExplorer(Explorer):
    """Lessons 03 and 03a: Temperature slider, mask-type and convention dropdowns over one sentence's attention weights.

    ``scores``: ``(N, N)`` scaled scores (default: a seeded example); ``tokens``: ``N`` labels;
    ``length``: how many tokens are real (the rest are padding). The mask types: none, causal, padding,
    causal + padding, or padding that also blocks the padded *queries*. The conventions give the same weights
    everywhere except on a fully masked row: zeros (attn_helpers), NaN (``masked_fill`` with ``-inf`` then
    ``torch.softmax``) or uniform (walkthrough 004's ``masked_fill(mask == 0, -1e9)``); the status line prints each
    row's sum, so a learner sees ``1.00`` turn into ``0.00`` or ``nan``. Temperature 0 is refused in words.
    """

    def __init__(self, scores: Tensor | None = None, tokens: Sequence[str] | None = None,
                 length: int | None = None) -> None:
        self.tokens = list(tokens) if tokens is not None else list(DEFAULT_TOKENS)
        n = len(self.tokens)
        self.scores = (seeded_scores(n, 3) if scores is None else scores.detach().to(torch.float32)).squeeze()
        if self.scores.shape != (n, n):
            raise ValueError(f"scores must have shape (N, N) = ({n}, {n}) for {n} tokens, got {list(self.scores.shape)}")
        self.length = DEFAULT_LENGTH if length is None else int(length)
        if not 1 <= self.length <= n:
            raise ValueError(f"length must lie in [1, {n}] (the number of real tokens), got {length}")
        controls = {
            "temperature": W.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.05, description="temperature",
                                         readout_format=".2f", continuous_update=True),
            "mask": W.Dropdown(options=MASK_TYPES, value="causal+padding", description="mask"),
            "convention": W.Dropdown(options=CONVENTIONS, value="keep", description="convention",
                                     layout=W.Layout(width="460px")),
        }
        super().__init__(controls, figsize=(7.0, 5.0), dpi=80)

    def draw(self, figure: Figure) -> None:
        self.ax, self.artist, self.sum_texts = row_sum_heatmap(figure, self.tokens, cmap=cmap_with_nan(), bottom=0.16)
        figure.text(0.01, 0.01, "grey cell = NaN (not a number)", fontsize=8, color="0.35")
        self.dynamic([self.artist, self.ax.title, *self.sum_texts])  # what update changes; the rest is kept

    def update(self, temperature: float, mask: str, convention: str) -> str:
        refuse_zero_temperature(temperature, "as the temperature shrinks the softmax approaches a one-hot argmax, "
                                              "so try temperature 0.05 to see the limit")
        keep = keep_mask(mask, len(self.tokens), self.length)  # (N, N)
        weights = masked_weights(self.scores, keep, convention, temperature)  # (N, N)
        self.artist.set_data(to_numpy(weights))
        self._sums = set_row_sums(self.sum_texts, weights)
        self.ax.set_title(f"softmax(scores / τ), τ = {temperature:g}, mask: {mask}", fontsize=10)
        return "row sums: " + self._sums

    def describe(self, temperature: float, mask: str, convention: str) -> str:
        return (f"Heatmap of the attention weights among {len(self.tokens)} tokens ({' '.join(self.tokens)}), "
                f"queries down, keys across, at temperature {temperature:g} under the mask '{mask}' and the "
                f"convention '{convention}'; grey cells are NaN. Row sums: {self._sums}.")
