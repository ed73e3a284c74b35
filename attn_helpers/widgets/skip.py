"""Lesson 06's explorer: a stack of attention layers joined by one of three wirings.

The layers are built once per (seed, input width, ``W_v`` scale) (on first use, without touching the
notebook's random state) and reused: changing the wiring re-wires the *same* parameters, a smaller depth
uses the first layers of the same stack, and both widths share every layer after the first, so every
difference on screen comes from the control that moved.

A move redraws the three curves, the title and the x axis (its range follows the depth); the numbers at the
output are in the status line, not in the picture (every text is laid out anew on each draw).
"""

from __future__ import annotations

import math

import ipywidgets as W
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..lab import AttentionStack, local_random, one_thread, signal_through_stack
from ._base import WIDE, Explorer, InvalidCombination, check_choice, check_int, int_slider

__all__ = ["SkipExplorer"]

WIRING_OPTIONS = (("x + attention(x)", "identity"), ("v + attention (walkthrough 000)", "values"), ("nothing added", "none"))
MAX_DEPTH = 32
MAX_SEED = 7
V_SCALES = (("default", 1.0), ("× √3", math.sqrt(3.0)))  # PyTorch's Linear init, and that times sqrt(3)
# each wiring in words: its button's without "(walkthrough 000)", so the title fits the figure
WIRING_WORDS = {wiring: label.split(" (")[0] for label, wiring in WIRING_OPTIONS}
Y_RANGE = (1e-18, 1e6)  # fixed, so switching the wiring shows the change in size instead of a rescaled axis


def seeded_stack(depth: int, dim: int, chan: int, num_heads: int, *, seed: int, v_scale: float = 1.0,
                 tail: AttentionStack | None = None, tokens: tuple[int, int] = (2, 8)) -> tuple[AttentionStack, torch.Tensor]:
    """Lesson 06's stack and input as its cells draw them after ``torch.manual_seed(seed)`` (random seed k here is
    the lesson's seed k; the notebook's random state is left alone): ``AttentionStack(depth, dim, chan, num_heads,
    wiring="none").double()``, then ``torch.randn(*tokens, dim)`` in float64. Layer 0 draws first, so it is the same
    for every ``depth``. Every ``W_v`` is then multiplied by ``v_scale``. ``tail``: a stack whose layers 1 and up
    are appended (the same modules), so a narrower input ``dim`` shares every later layer with ``dim = chan``."""
    with local_random(seed):
        stack = AttentionStack(depth, dim, chan, num_heads, wiring="none").double()
        x = torch.randn(*tokens, dim, dtype=torch.float64)  # (B, N, dim)
    with torch.no_grad():
        for layer in stack.layers:
            layer.qkv.weight[2 * chan:] *= v_scale  # rows 2*chan.. of qkv.weight (3*chan, in) are W_v
    if tail is not None:
        stack.layers.extend(tail.layers[1:])
    return stack, x


class SkipExplorer(Explorer):
    """Lesson 06: Switch the wiring and slide the depth of a stack of walkthrough 000's attention layers.

    ``wiring``: ``x + attention(x)``, walkthrough 000's ``v + attention``, or nothing added. The stack has
    ``chan=64`` and 4 heads; the input is ``B=2`` sequences of ``N=8`` tokens. ``seed`` (0 to 7) draws the
    parameters and the input; ``v_scale`` multiplies every layer's ``W_v`` (1 or sqrt(3)). ``dim=49`` with
    ``x + attention(x)`` is refused in words: x and the output would have different widths. The picture shows,
    at every layer, on a log scale, the hidden state's root mean square, the token std (the standard deviation
    across the tokens: how different they still are), and the size of the gradient at that layer's parameters.
    """

    chan = 64
    num_heads = 4
    B, N = 2, 8

    def __init__(self, *, wiring: str = "identity", depth: int = 8, dim: int = 64, seed: int = 0,
                 v_scale: float = 1.0) -> None:
        check_choice("wiring", wiring, dict(WIRING_OPTIONS).values())
        check_int("depth", depth, 1, MAX_DEPTH)
        if dim not in (self.chan, 49):
            raise ValueError(f"dim must be {self.chan} or 49, got {dim}")
        check_int("seed", seed, 0, MAX_SEED)
        check_choice("v_scale", v_scale, dict(V_SCALES).values())
        self.stacks: dict[tuple[int, int, float], AttentionStack] = {}
        self.inputs: dict[tuple[int, int], torch.Tensor] = {}
        self._cache: dict[tuple[str, int, int, int, float], dict[str, np.ndarray]] = {}
        controls = {
            "wiring": W.ToggleButtons(options=WIRING_OPTIONS, value=wiring, description="wiring", style=WIDE),
            "depth": int_slider("depth (layers)", depth, 1, MAX_DEPTH),
            "dim": W.ToggleButtons(options=[(f"dim = {self.chan}", self.chan), ("dim = 49", 49)], value=dim,
                                   description="input width", style=WIDE),
            "seed": int_slider("random seed", seed, 0, MAX_SEED),
            "v_scale": W.ToggleButtons(options=V_SCALES, value=v_scale, description="W_v scale", style=WIDE),
        }
        super().__init__(controls, figsize=(8.0, 3.8), dpi=80)

    def measure(self, wiring: str, depth: int, dim: int, seed: int = 0, v_scale: float = 1.0) -> dict[str, np.ndarray]:
        """The per-layer numbers the picture shows (cached): ``rms``, ``token_std`` ``(depth + 1,)``, ``grad_norm`` ``(depth,)``."""
        if wiring == "identity" and dim != self.chan:
            raise InvalidCombination(
                f"x + attention(x) adds x ({dim} features per token) to an output of chan={self.chan} features; "
                f"the widths must match, so pick dim = {self.chan}, or v + attention, or nothing added"
            )
        key = (wiring, depth, dim, seed, v_scale)
        if key not in self._cache:
            stack = self._stack(dim, seed, v_scale)
            stack.wiring = wiring
            result = signal_through_stack(stack, self.inputs[seed, dim], depth=depth)
            self._cache[key] = {name: t.numpy() for name, t in result.items()}
        return self._cache[key]

    def _stack(self, dim: int, seed: int = 0, v_scale: float = 1.0) -> AttentionStack:
        """The stack for input width ``dim``, ``seed`` and ``W_v`` scale, built on first use; layers 2 and
        up are the same modules for every width."""
        key = (seed, dim, v_scale)
        if key not in self.stacks:
            shared = None if dim == self.chan else self._stack(self.chan, seed, v_scale)
            with one_thread():
                # Drawn as lesson 06 draws seed k (the stack, then the input); a narrower input draws only its
                # own first layer and reuses the other layers (W_v already scaled).
                stack, self.inputs[seed, dim] = seeded_stack(
                    MAX_DEPTH if shared is None else 1, dim, self.chan, self.num_heads, seed=seed, v_scale=v_scale,
                    tail=shared, tokens=(self.B, self.N))
            self.stacks[key] = stack
        return self.stacks[key]

    def draw(self, figure: Figure) -> None:
        self.ax = figure.add_axes((0.09, 0.14, 0.56, 0.74))
        self.ax.set(yscale="log", ylim=Y_RANGE, ylabel="size (log scale)")
        self.ax.tick_params(axis="y", labelsize=11.5)  # its exponents are 0.7 of this: 9 px at 80 dpi
        self.ax.grid(True, which="major", alpha=0.3)
        # the x range follows the depth: the x axis (ticks, grid lines, label) is redrawn on every move
        # layers are whole numbers; at most 6 ticks (each tick label is laid out and drawn anew on every move)
        self.ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        self.ax.set_xlabel("layer (0 = the input)")
        self.rms_line, = self.ax.plot([], [], "o-", color="#5b7fb5", ms=3, label="RMS of the hidden state")
        self.token_std_line, = self.ax.plot([], [], "s--", color="#1b9e77", ms=3, label="token std (across tokens)")
        self.grad_line, = self.ax.plot([], [], "^-", color="#e66101", ms=3, label="gradient at the layer's parameters")
        self.ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        self.title = self.ax.set_title("")
        # redrawn on every move
        self.dynamic([self.ax.xaxis, self.rms_line, self.token_std_line, self.grad_line, self.title])

    def update(self, wiring: str, depth: int, dim: int, seed: int, v_scale: float) -> str:
        m = self.measure(wiring, depth, dim, seed, v_scale)
        floor = Y_RANGE[0]
        layers = np.arange(depth + 1)
        self.rms_line.set_data(layers, np.maximum(m["rms"], floor))
        self.token_std_line.set_data(layers, np.maximum(m["token_std"], floor))
        self.grad_line.set_data(layers[1:], np.maximum(m["grad_norm"], floor))
        self.ax.set_xlim(-0.5, depth + 0.5)
        scale = dict((v, k) for k, v in V_SCALES)[v_scale]
        self.title.set_text(f"{depth} layer{'s' if depth > 1 else ''} joined by {WIRING_WORDS[wiring]}; "
                            f"random seed {seed}, W_v {scale}")
        return (f"output RMS {m['rms'][-1]:.2g}, token std {m['token_std'][-1]:.2g}, "
                f"gradient at layer 1 {m['grad_norm'][0]:.2g}")

    def describe(self, wiring: str, depth: int, dim: int, seed: int, v_scale: float) -> str:
        m = self.measure(wiring, depth, dim, seed, v_scale)
        return (f"Three curves over layers 0 to {depth} on a log scale, for {depth} layers joined by "
                f"{WIRING_WORDS[wiring]}: the hidden state's RMS goes from "
                f"{m['rms'][0]:.2g} to {m['rms'][-1]:.2g}, the token std from {m['token_std'][0]:.2g} to "
                f"{m['token_std'][-1]:.2g}; the gradient at layer 1 is {m['grad_norm'][0]:.2g}.")
