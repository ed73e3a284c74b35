"""07 · The complete layer: what a layer of given sizes costs, in parameters and in FLOPs, step by step.

Both panels share one row per step of the forward pass: which steps own weights (only the projections and their
biases) and which do the work (the projections for short sequences, the ``N x N`` scores for long ones).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..lab import attention_flops, attention_parameters
from ._base import Explorer, bar_rows, heads_in_words, in_units, int_slider, set_bar

__all__ = ["LayerCalculator"]

PARAMS_COLOUR = "#5b7fb5"
FLOPS_COLOUR = "#e08214"


def _fmt(n: float) -> str:
    """A count in a few characters: 950, 13.6 k, 5.43 M, 1.2 G."""
    return in_units(n, ((1e9, " G"), (1e6, " M"), (1e3, " k")), "{:.0f}")


class LayerCalculator(Explorer):
    """Lesson 07:
    Parameters and FLOPs of walkthrough 000's ``Attention(dim, chan, num_heads)`` on one sequence of N tokens.

    ``dim`` (the input width) is fixed when the calculator is made. A head count that does not divide ``chan`` is
    explained in words. The counts: :func:`attn_helpers.lab.attention_parameters` and ``attention_flops``.
    """

    STEPS = ("qkv projection", "scores (q @ k^T)", "scale", "softmax", "weights @ v",
             "output projection", "bias adds", "skip add")

    def __init__(self, dim: int = 49, chan: int = 64, num_heads: int = 4, N: int = 100,
                 qkv_bias: bool = False) -> None:
        self.dim = dim
        self.qkv_bias = qkv_bias
        attention_parameters(dim, chan, qkv_bias=qkv_bias)  # reject bad sizes before building anything
        style = {"description_width": "70px"}
        controls = {"chan": int_slider("chan", chan, 8, 512, 8, style=style),
                    "num_heads": int_slider("num_heads", num_heads, 1, 16, style=style),
                    "N": int_slider("N (tokens)", N, 10, 2000, 10, style=style)}
        super().__init__(controls, figsize=(9.0, 3.6))

    def counts(self, chan: int, num_heads: int, N: int) -> tuple[dict[str, int], dict[str, int]]:
        """``(parameters by step, FLOPs by step)`` for these slider values, keyed by :attr:`STEPS`."""
        heads_in_words(chan, num_heads, most=self.controls["num_heads"].max)
        parts = attention_parameters(self.dim, chan, qkv_bias=self.qkv_bias)
        params = dict.fromkeys(self.STEPS, 0)
        params["qkv projection"] = parts["qkv weight"]
        params["output projection"] = parts["proj weight"]
        params["bias adds"] = parts["qkv bias"] + parts["proj bias"]
        flops = attention_flops(1, N, self.dim, chan, num_heads, qkv_bias=self.qkv_bias)
        return params, flops

    def draw(self, figure: Figure) -> None:
        self.ax_params, self.ax_flops = figure.subplots(1, 2, sharey=True)
        n = len(self.STEPS)
        self.param_bars, self.param_labels = bar_rows(self.ax_params, PARAMS_COLOUR, n, right=1.45, fontsize=8)
        self.flop_bars, self.flop_labels = bar_rows(self.ax_flops, FLOPS_COLOUR, n, right=1.45, fontsize=8)
        self.ax_params.set_yticks(range(n), self.STEPS)
        self.ax_params.invert_yaxis()  # the forward pass reads top to bottom
        self.ax_params.set_title("learnable parameters", fontsize=10)
        self.ax_flops.set_title("FLOPs for one sequence", fontsize=10)
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
            set_bar(bar, label, value / top, f"{_fmt(value)} ({100 * value / total:.0f}%)" if value else "0")

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
