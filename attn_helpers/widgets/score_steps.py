"""Lesson 12's explorer: three steps today's models put between the scores and the weights, on one set of scores."""

from __future__ import annotations

import ipywidgets as W
import torch
from matplotlib.figure import Figure

from ..lab import weights_after_steps
from ..lab.example import LONG_SENTENCE
from ..views import to_numpy
from ._base import WIDE, Explorer, check_choice, check_int
from .masking import row_sum_heatmap, seeded_scores, set_row_sums

__all__ = ["ScoreStepsExplorer"]

TOKENS = LONG_SENTENCE[:8]
SPREADS = (("a few units (×1)", 1.0), ("tens (×10)", 10.0))


class ScoreStepsExplorer(Explorer):
    """Lesson 12: Window, soft-cap and sink controls over one sentence's causal attention weights.

    The causal weights of an 8-token sentence after a sliding window (the last ``window`` keys, 1-8; 8 = plain
    causal), Gemma 2's soft-capping ``softcap * tanh(scores / softcap)`` (``softcap`` 0 = off, to 10) and gpt-oss's
    sink logit (one extra logit in each row's softmax, its weight dropped; -4 to 6 when ``use_sink`` is ticked).
    The seeded scores are a few units in size, or ten times that (``spread`` 1 or 10). The status line prints each
    row's sum: 1.00 without a sink, less with one. ``self.weights`` holds the weights shown.
    """

    def __init__(self, window: int = 8, softcap: float = 0.0, sink: float | None = None,
                 spread: float = 1.0) -> None:
        self.tokens = list(TOKENS)
        self.base_scores = seeded_scores(len(self.tokens), 12, torch.float64)  # (N, N)
        n = len(self.tokens)
        check_int("window", window, 1, n)
        check_choice("spread", spread, dict(SPREADS).values())
        controls = {
            "window": W.IntSlider(value=window, min=1, max=n, description="window"),
            "softcap": W.FloatSlider(value=softcap, min=0.0, max=10.0, step=0.5, description="softcap (0 = off)",
                                     style=WIDE, readout_format=".1f"),
            "use_sink": W.Checkbox(value=sink is not None, description="sink", indent=False),
            "sink": W.FloatSlider(value=0.0 if sink is None else float(sink), min=-4.0, max=6.0, step=0.5,
                                  description="sink logit", readout_format=".1f"),
            "spread": W.Dropdown(options=SPREADS, value=spread, description="scores"),
        }
        self.weights = torch.zeros(n, n, dtype=torch.float64)
        super().__init__(controls, figsize=(7.0, 5.0), dpi=80)

    def draw(self, figure: Figure) -> None:
        self.ax, self.artist, self.sum_texts = row_sum_heatmap(figure, self.tokens)
        self.dynamic([self.artist, self.ax.title, *self.sum_texts])  # what update changes; the rest is kept

    def update(self, window: int, softcap: float, use_sink: bool, sink: float, spread: float) -> str:
        scores = self.base_scores * spread  # (N, N)
        self.weights = weights_after_steps(scores, window=window, softcap=softcap,
                                           sink=sink if use_sink else None)  # (N, N)
        self.artist.set_data(to_numpy(self.weights))
        self._sums = set_row_sums(self.sum_texts, self.weights)
        steps = [f"window {window}", f"softcap {softcap:g}" if softcap else "no cap",
                 f"sink {sink:g}" if use_sink else "no sink"]
        self.ax.set_title(f"weights: {', '.join(steps)}; scores ×{spread:g}", fontsize=10)
        return "row sums: " + self._sums

    def describe(self, window: int, softcap: float, use_sink: bool, sink: float, spread: float) -> str:
        return (f"Heatmap of the causal attention weights among {len(self.tokens)} tokens ({' '.join(self.tokens)}) "
                f"with a window of {window} keys, " + (f"soft-capping at {softcap:g}" if softcap else "no soft-cap")
                + (f", a sink logit {sink:g}" if use_sink else ", no sink")
                + f", scores ×{spread:g}. Row sums: {self._sums}.")
