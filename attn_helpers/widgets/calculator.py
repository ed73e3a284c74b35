"""07 · The complete layer: what a layer of given sizes costs, in parameters and in FLOPs, step by step.

Both panels share one row per step of the forward pass, so the picture says at a glance which
steps own weights (only the projections and their biases) and which steps do the work (the
projections for short sequences, the ``N x N`` scores for long ones).
"""

from __future__ import annotations

import ipywidgets as W
from matplotlib.figure import Figure

from ..core import check_heads
from ..lab import attention_flops, attention_parameters
from ._base import Explorer, InvalidCombination

__all__ = ["LayerCalculator"]

PARAMS_COLOUR = "#5b7fb5"
FLOPS_COLOUR = "#e08214"


def _fmt(n: float) -> str:
    """A count in a few characters: 950, 13.6 k, 5.43 M, 1.20 G."""
    for size, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


class LayerCalculator(Explorer):
    """Lesson 07:
    Parameters and FLOPs of walkthrough 000's ``Attention(dim, chan, num_heads)`` on one sequence of N tokens.

    Sliders: ``chan`` (the projected width), ``num_heads`` and ``N`` (tokens); ``dim`` (the input
    width) is fixed when the calculator is made. A head count that does not divide ``chan`` is
    explained in words. The counts come from :func:`attn_helpers.lab.attention_parameters`
    and :func:`attn_helpers.lab.attention_flops` (batch of 1).
    """

    STEPS = ("qkv projection", "scores (q @ k^T)", "scale", "softmax", "weights @ v",
             "output projection", "bias adds", "skip add")

    def __init__(self, dim: int = 49, chan: int = 64, num_heads: int = 4, N: int = 100,
                 qkv_bias: bool = False) -> None:
        self.dim = dim
        self.qkv_bias = qkv_bias
        attention_parameters(dim, chan, qkv_bias=qkv_bias)  # reject bad sizes before building anything
        style = {"description_width": "70px"}
        controls = {
            "chan": W.IntSlider(value=chan, min=8, max=512, step=8, description="chan", style=style,
                                continuous_update=False),
            "num_heads": W.IntSlider(value=num_heads, min=1, max=16, description="num_heads", style=style,
                                     continuous_update=False),
            "N": W.IntSlider(value=N, min=10, max=2000, step=10, description="N (tokens)", style=style,
                             continuous_update=False),
        }
        super().__init__(controls, figsize=(9.0, 3.6))

    # -- counting -------------------------------------------------------------------------------
    def counts(self, chan: int, num_heads: int, N: int) -> tuple[dict[str, int], dict[str, int]]:
        """``(parameters by step, FLOPs by step)`` for these slider values, keyed by :attr:`STEPS`."""
        try:
            check_heads(chan, num_heads, most=self.controls["num_heads"].max)  # suggest what the slider reaches
        except ValueError as problem:  # the library's own words for it
            raise InvalidCombination(str(problem)) from None
        parts = attention_parameters(self.dim, chan, qkv_bias=self.qkv_bias)
        params = dict.fromkeys(self.STEPS, 0)
        params["qkv projection"] = parts["qkv weight"]
        params["output projection"] = parts["proj weight"]
        params["bias adds"] = parts["qkv bias"] + parts["proj bias"]
        flops = attention_flops(1, N, self.dim, chan, num_heads, qkv_bias=self.qkv_bias)
        return params, flops

    # -- drawing ----------------------------------------------------------------------------------
    def draw(self, figure: Figure) -> None:
        self.ax_params, self.ax_flops = figure.subplots(1, 2, sharey=True)
        rows = list(range(len(self.STEPS)))
        self.param_bars = self.ax_params.barh(rows, [0] * len(rows), color=PARAMS_COLOUR)
        self.flop_bars = self.ax_flops.barh(rows, [0] * len(rows), color=FLOPS_COLOUR)
        self.ax_params.set_yticks(rows, self.STEPS)
        self.ax_params.invert_yaxis()  # the forward pass reads top to bottom
        self.param_labels = [self.ax_params.text(0, r, "", va="center", fontsize=8) for r in rows]
        self.flop_labels = [self.ax_flops.text(0, r, "", va="center", fontsize=8) for r in rows]
        self.ax_params.set_title("learnable parameters", fontsize=10)
        self.ax_flops.set_title("FLOPs for one sequence", fontsize=10)
        for ax in (self.ax_params, self.ax_flops):
            ax.set_xticks([])  # each bar carries its number; no axis labels to re-render on every move
            ax.spines[["top", "right", "bottom"]].set_visible(False)
            ax.set_xlim(0, 1.45)  # bars are drawn relative to the panel's largest; labels give the numbers
        self.title = figure.suptitle("", fontsize=10)
        figure.subplots_adjust(left=0.17, right=0.97, top=0.83, bottom=0.04, wspace=0.28)
        # only these change on a slider move; the axes, tick labels and titles are drawn once
        self.dynamic([*self.param_bars, *self.flop_bars, *self.param_labels, *self.flop_labels, self.title])

    @staticmethod
    def _set_bars(bars, labels, values: dict[str, int]) -> None:
        """Bar lengths relative to the largest value (the axis stays fixed), labels with the counts."""
        top = max(values.values()) or 1
        total = sum(values.values()) or 1
        for bar, label, value in zip(bars, labels, values.values()):
            bar.set_width(value / top)
            label.set_x(value / top + 0.02)
            label.set_text(f"{_fmt(value)} ({100 * value / total:.0f}%)" if value else "0")

    def update(self, chan: int, num_heads: int, N: int) -> str:
        params, flops = self.counts(chan, num_heads, N)
        self._set_bars(self.param_bars, self.param_labels, params)
        self._set_bars(self.flop_bars, self.flop_labels, flops)
        head_dim = chan // num_heads
        self.title.set_text(f"Attention(dim={self.dim}, chan={chan}, num_heads={num_heads}), head_dim={head_dim}, "
                            f"N={N}: {sum(params.values()):,} parameters, {_fmt(sum(flops.values()))} FLOPs")
        return (f"head_dim={head_dim} | params={sum(params.values()):,} | "
                f"FLOPs per sequence={_fmt(sum(flops.values()))}")

    def describe(self, chan: int, num_heads: int, N: int) -> str:
        params, flops = self.counts(chan, num_heads, N)
        return (f"Two bar charts for Attention(dim={self.dim}, chan={chan}, num_heads={num_heads}) over N={N} tokens: "
                f"parameters per step ({sum(params.values()):,} in all, most in "
                f"{max(params, key=params.get)}) and FLOPs per step ({_fmt(sum(flops.values()))} in all, most in "
                f"{max(flops, key=flops.get)}).")

    def table(self, chan: int, num_heads: int, N: int) -> str:
        params, flops = self.counts(chan, num_heads, N)
        rows = "".join(f"<tr><td>{step}</td><td style='text-align:right'>{params[step]:,}</td>"
                       f"<td style='text-align:right'>{flops[step]:,}</td></tr>" for step in self.STEPS)
        total = (f"<tr><th>total</th><th style='text-align:right'>{sum(params.values()):,}</th>"
                 f"<th style='text-align:right'>{sum(flops.values()):,}</th></tr>")
        return ("<table><tr><th>step</th><th>parameters</th><th>FLOPs</th></tr>"
                f"{rows}{total}</table>")
