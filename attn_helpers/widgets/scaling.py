"""Lesson 02's explorer, also the series' scaling / temperature explorer: ``q @ k^T * scale / temperature``.

The sentence's q and k have ``MAX_D_K`` independent standard-normal features per word (equal
words get equal vectors); a smaller ``d_k`` keeps the first ``d_k`` of them, so moving the slider
adds or removes features and never reshuffles the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as W
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..core import attention_scores
from ..lab import softmax_statistics
from ..views import WEIGHTS_CMAP, heatmap, to_numpy
from ._base import WIDE, Explorer, check_choice, refuse_zero_temperature
from .projection import SENTENCE

__all__ = ["ScalingExplorer"]

D_K_OPTIONS = tuple(2 ** i for i in range(11))  # 1, 2, 4, ..., 1024
MAX_D_K = D_K_OPTIONS[-1]


class ScalingExplorer(Explorer):
    """Lesson 02: Slide ``d_k``, switch the ``1/sqrt(d_k)`` scaling on and off, change the temperature.

    The picture shows the softmax weights of query ``query`` (a token index) as bars, each with its number, and the
    whole weights matrix as a heatmap (colours only: numbers in its 36 cells would be laid out and drawn anew on
    every move); the status line prints the variance of the scores, the largest weight and the entropy, averaged
    over the rows. A temperature of 0 is refused in words: dividing the scores by zero has no answer.
    """

    def __init__(self, tokens: Sequence[str] = SENTENCE, *, d_k: int = 64, scaled: bool = True,
                 temperature: float = 1.0, query: int = 2, seed: int = 0) -> None:
        self.tokens = [str(t) for t in tokens]
        n = len(self.tokens)
        if n < 2:
            raise ValueError(f"tokens must name at least 2 tokens, got {n}")
        check_choice("d_k", d_k, D_K_OPTIONS)
        if not 0 <= query < n:
            raise ValueError(f"query must be a token index in [0, {n - 1}], got {query}")
        g = torch.Generator().manual_seed(seed)
        vocab = sorted(set(self.tokens))
        ids = torch.tensor([vocab.index(t) for t in self.tokens])  # (N,): equal words, equal vectors
        self.q_all = torch.randn(len(vocab), MAX_D_K, generator=g)[ids]  # (N, MAX_D_K)
        self.k_all = torch.randn(len(vocab), MAX_D_K, generator=g)[ids]  # (N, MAX_D_K)
        controls = {
            "d_k": W.SelectionSlider(options=D_K_OPTIONS, value=d_k, description="d_k", style=WIDE,
                                     continuous_update=False),
            "scaled": W.Checkbox(value=scaled, description="divide by √d_k", indent=False),
            "temperature": W.FloatSlider(value=temperature, min=0.0, max=4.0, step=0.05, description="temperature",
                                         style=WIDE, continuous_update=False, readout_format=".2f"),
            "query": W.Dropdown(options=[(f"{i}: {t}", i) for i, t in enumerate(self.tokens)], value=query,
                                description="query row", style=WIDE),
        }
        super().__init__(controls, figsize=(9.5, 3.6), dpi=80)

    def draw(self, figure: Figure) -> None:
        n = len(self.tokens)
        grid = figure.add_gridspec(1, 2, width_ratios=[1.1, 1], wspace=0.3, left=0.08, right=0.93,
                                   bottom=0.22, top=0.88)
        self.ax_bars = figure.add_subplot(grid[0, 0])
        self.ax_map = figure.add_subplot(grid[0, 1])
        self.bars = self.ax_bars.bar(range(n), np.full(n, 1.0 / n), color="#5b7fb5")
        self.ax_bars.set(ylim=(0, 1.05), xticks=range(n), xticklabels=self.tokens, xlabel="key",
                         ylabel="softmax weight")
        self.ax_bars.axhline(1.0 / n, color="grey", ls=":", lw=1, label=f"uniform: 1/{n}")
        self.ax_bars.legend(loc="upper right", fontsize=8, frameon=False)
        self.bar_labels = [self.ax_bars.text(i, 0, "", ha="center", va="bottom", fontsize=8) for i in range(n)]
        self.bars_title = self.ax_bars.set_title("")
        zeros = np.zeros((n, n))
        self.map_image = heatmap(zeros, self.tokens, ax=self.ax_map, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0,
                                 annotate=False, colorbar=False, title="weights = softmax(raw_scores × scale / τ)")
        figure.colorbar(self.map_image, ax=self.ax_map, fraction=0.046, pad=0.04)
        self.row_box = Rectangle((-0.5, -0.5), n, 1, fill=False, edgecolor="#e66101", lw=2)
        self.ax_map.add_patch(self.row_box)
        # only these change on a move; the axes, tick labels, legend and colour bar are kept
        self.dynamic([*self.bars, *self.bar_labels, self.bars_title, self.map_image, self.row_box])

    def _logits(self, d_k: int, scaled: bool, temperature: float) -> torch.Tensor:
        refuse_zero_temperature(temperature, "as the temperature falls towards 0 the softmax becomes a one-hot pick "
                                              "of the largest score (try 0.05)")
        scale = d_k ** -0.5 if scaled else 1.0
        return attention_scores(self.q_all[:, :d_k], self.k_all[:, :d_k], scale=scale / temperature)  # (N, N)

    def update(self, d_k: int, scaled: bool, temperature: float, query: int) -> str:
        logits = self._logits(d_k, scaled, temperature)  # (N, N)
        weights = torch.softmax(logits, dim=-1)  # (N, N)
        row = to_numpy(weights[query])
        for bar, label, w in zip(self.bars, self.bar_labels, row):
            bar.set_height(w)
            label.set_y(w + 0.01)
            label.set_text(f"{w:.2f}")
        self.bars_title.set_text(f"weights of query {query} '{self.tokens[query]}'")
        self.map_image.set_data(to_numpy(weights))
        self.row_box.set_y(query - 0.5)
        stats = softmax_statistics(logits)
        scale = (d_k ** -0.5 if scaled else 1.0) / temperature
        # The numbers summarise every row (the heatmap), not only the selected query (the bars).
        return (f"raw_scores × {scale:.3g} | all rows: variance {stats['variance']:.2f}, mean max weight "
                f"{stats['max_weight']:.2f}, mean entropy {stats['entropy']:.2f} nats "
                f"(uniform: {math.log(len(self.tokens)):.2f})")

    def describe(self, d_k: int, scaled: bool, temperature: float, query: int) -> str:
        weights = torch.softmax(self._logits(d_k, scaled, temperature), dim=-1)  # (N, N)
        row = " ".join(f"{w:.2f}" for w in weights[query].tolist())
        return (f"Bars of query {query} ('{self.tokens[query]}')'s softmax weights over the keys "
                f"{' '.join(self.tokens)}: {row}; beside them a heatmap of every query's weights. d_k = {d_k}, "
                f"{'divided' if scaled else 'not divided'} by √d_k, temperature {temperature:g}.")
