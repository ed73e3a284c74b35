"""Lesson 04's explorer: one query's weights and the output they make from 2-D values."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as W
import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from torch import Tensor

from ..core import attend, attention_scores, causal_mask
from ..lab.example import SENTENCE as DEFAULT_TOKENS
from ..views import to_numpy, values_plot
from ._base import Explorer, refuse_zero_temperature

__all__ = ["ValuesExplorer"]


class ValuesExplorer(Explorer):
    """Lesson 04: Pick a query: its weights (bars) and its output among the 2-D values (scatter), in place.

    ``v``: ``(N, 2)`` values; ``scores``: ``(N, N)`` scaled scores; ``tokens``: ``N`` labels
    (defaults: a seeded six-token example). The scatter shows the query's output ``attn[i] @ v`` (a star) inside
    the convex hull of the values, with a line to each value as thick as that value's weight. The temperature and
    a causal mask slide the output toward one value (sharp weights) or toward the mean (flat). Temperature 0 is
    refused in words.
    """

    def __init__(self, v: Tensor | None = None, scores: Tensor | None = None,
                 tokens: Sequence[str] | None = None) -> None:
        self.tokens = list(tokens) if tokens is not None else list(DEFAULT_TOKENS)
        n = len(self.tokens)
        generator = torch.Generator().manual_seed(4)  # the default example: q, k (N, 8), then v (N, 2)
        q, k, default_v = (torch.randn(n, d, generator=generator) for d in (8, 8, 2))
        self.v = (default_v if v is None else v.detach().to(torch.float32)).squeeze()
        default_scores = attention_scores(q, k) * 2.0  # (N, N) a little sharper than unit scores
        self.scores = (default_scores if scores is None else scores.detach().to(torch.float32)).squeeze()
        if self.v.shape != (n, 2):
            raise ValueError(f"v must have shape (N, 2) = ({n}, 2) for {n} tokens, got {list(self.v.shape)}")
        if self.scores.shape != (n, n):
            raise ValueError(f"scores must have shape (N, N) = ({n}, {n}), got {list(self.scores.shape)}")
        controls = {
            "query": W.Dropdown(options=[(f"{i}: {t}", i) for i, t in enumerate(self.tokens)], value=min(2, n - 1),
                                description="query"),
            "temperature": W.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.05, description="temperature",
                                         readout_format=".2f"),
            "mask": W.Dropdown(options=("none", "causal"), value="none", description="mask"),
        }
        super().__init__(controls, figsize=(11.0, 4.2), dpi=80)

    def draw(self, figure: Figure) -> None:
        n = len(self.tokens)
        bar_ax, scatter_ax = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.25]})
        self.bars = bar_ax.bar(range(n), np.zeros(n), color="#1f5fa8")
        self.bar_texts = [bar_ax.text(j, 0.0, "", ha="center", va="bottom", fontsize=8) for j in range(n)]
        bar_ax.set_xticks(range(n), self.tokens, rotation=45)
        bar_ax.set(ylim=(0.0, 1.08), xlabel="key", ylabel="attention weight")
        self.bar_ax = bar_ax
        art = values_plot(self.v, torch.zeros(n, 2), self.tokens, ax=scatter_ax)
        self.outputs = art["outputs"]
        self.outputs.set_alpha(0.35)
        self.lines = LineCollection([], colors="#e08214", zorder=2)
        scatter_ax.add_collection(self.lines)
        self.star = scatter_ax.scatter([0.0], [0.0], s=220, marker="*", color="#e08214", edgecolor="black",
                                       linewidth=0.8, zorder=5, label="selected output")
        scatter_ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        self.scatter_ax = scatter_ax
        figure.subplots_adjust(left=0.06, right=0.82, bottom=0.2, top=0.9, wspace=0.22)
        self.dynamic([*self.bars, *self.bar_texts, bar_ax.title, self.lines, self.outputs, self.star,
                      scatter_ax.title])  # what update changes; the rest of the picture is kept

    def update(self, query: int, temperature: float, mask: str) -> str:
        refuse_zero_temperature(temperature, "as the temperature shrinks each output moves onto the value of its "
                                              "highest-scoring key, so try temperature 0.05 to see the limit")
        if getattr(self, "_computed_for", None) != (temperature, mask):  # a new query needs no new math
            n = len(self.tokens)
            # attend's q @ kᵀ is the given scores for q = scores and k the identity; scale 1/τ divides them
            context, _, weights = attend(self.scores, torch.eye(n), self.v, scale=1.0 / temperature,
                                         mask=causal_mask(n) if mask == "causal" else None)  # (N, 2), _, (N, N)
            self._computed = weights, context
            self._computed_for = (temperature, mask)
        weights, context = self._computed  # (N, N), (N, 2)
        w, o, v = to_numpy(weights[query]), to_numpy(context), to_numpy(self.v)
        for bar, text, value in zip(self.bars, self.bar_texts, w):
            bar.set_height(value)
            text.set_y(value + 0.01)
            text.set_text(f"{value:.2f}")
        self.bar_ax.set_title(f"weights of query {query} ({self.tokens[query]!r}), sum {w.sum():.2f}", fontsize=10)
        self.outputs.set_offsets(o)
        self.star.set_offsets(o[query:query + 1])
        self.lines.set_segments([[o[query], v[j]] for j in range(len(v))])
        self.lines.set_linewidths(6.0 * w)  # a blocked key (weight 0) gets no line
        self.scatter_ax.set_title(f"context[{query}] = weights[{query}] @ v = ({o[query, 0]:.2f}, {o[query, 1]:.2f})",
                                  fontsize=10)
        weights_text = " ".join(f"{x:.2f}" for x in w)
        return f"weights {weights_text} | context ({o[query, 0]:.2f}, {o[query, 1]:.2f})"

    def describe(self, query: int, temperature: float, mask: str) -> str:
        weights, context = self._computed  # (N, N), (N, 2)
        w = " ".join(f"{x:.2f}" for x in weights[query].tolist())
        return (f"Left, bars of query {query} ('{self.tokens[query]}')'s weights over the keys "
                f"{' '.join(self.tokens)}: {w} (temperature {temperature:g}, mask {mask}). Right, the {len(self.tokens)} "
                f"two-dimensional values as labelled points and query {query}'s output as a star at "
                f"({context[query, 0]:.2f}, {context[query, 1]:.2f}), inside their convex hull.")
