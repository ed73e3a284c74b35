"""Checkers for 06 · Output projection and skip connection: the skip through V, the gradient that
reaches a stack's layers (a prediction, then a function the learner writes) and valid residuals."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..core import merge_heads
from ..lab import SKIP_KINDS, AttentionStack, depth_sweep, local_random, signal_through_stack
from ._core import Verdict, as_letter, as_number, checker, compare_tensors, correct, error_text, not_a_function, wrong
from ._guard import Watch, codes_called, library, run_watching
from ._predict import as_choice, prediction_checker
from .heads import run_options

__all__ = ["check_skip_through_v", "check_gradient_trend_prediction", "check_layer_grad",
           "check_residual_line"]

TRENDS = ("shrinks", "stays", "grows")


#: ``(B, H, N, head_dim)`` of the checker's own ``v``: no layer and no input to rebuild, so a learner's function
#: cannot hand the work to a layer's forward pass (replaying the lesson's seeds gave the layer's own output).
_SKIP_SIZES = ((2, 2, 5, 4), (1, 3, 4, 2), (3, 1, 6, 3))


#: What exercise 6.2's function must not call: the library's merge, which is the half of the exercise to write.
_LIBRARY_MERGE = library(("merge_heads",))


@checker
def check_skip_through_v(answer: Any) -> Verdict:
    """Exercise: a function ``answer(v_heads, projected)`` giving walkthrough 000's output ``projected + v`` with
    ``v_heads (B, H, N, head_dim)`` merged to ``(B, N, chan)``. Run on made-up ``v_heads`` and ``projected`` of three sizes."""
    refused = not_a_function(answer, "walkthrough_output(v_heads, projected)")
    if refused:
        return refused
    generator = torch.Generator().manual_seed(62)
    for B, H, N, head_dim in _SKIP_SIZES:
        chan = H * head_dim
        v_heads = torch.randn(B, H, N, head_dim, generator=generator, dtype=torch.float64)
        projected = torch.randn(B, N, chan, generator=generator, dtype=torch.float64)  # (B, N, chan)
        where = f"v_heads {list(v_heads.shape)} and projected {list(projected.shape)}"
        try:
            got, borrowed = run_watching(answer, (v_heads.clone(), projected.clone()), _LIBRARY_MERGE)
        except Exception as problem:  # the learner's code failed: say how, never a traceback
            return wrong(f"for {where} your function raised {error_text(problem)}",
                         "read B, H, N and head_dim from v_heads.shape, not the numbers of one example.")
        if borrowed:
            return wrong(f"your function hands the merge to {borrowed[0]}: the exercise asks you to write it.",
                         "v_heads is (B, H, N, head_dim): transpose(1, 2) to (B, N, H, head_dim), reshape to "
                         "(B, N, H * head_dim), then add projected.")
        expected = projected + merge_heads(v_heads)  # (B, N, chan)
        mistakes = {
            "you flattened v_heads without moving its heads axis": (
                projected + v_heads.reshape(B, N, chan),
                "v_heads is (B, H, N, head_dim): transpose(1, 2) first, so each token's heads sit side by side, "
                "then reshape."),
            "you left out the attention output": (
                merge_heads(v_heads), "the skip is added to the projected attention output: projected + merged v_heads."),
            "you left out the skip": (projected, "add the merged values v_heads to projected."),
            "you merged v_heads with head_dim before heads, so the heads' features are interleaved": (
                projected + v_heads.permute(0, 2, 3, 1).reshape(B, N, chan),
                "transpose(1, 2) to (B, N, H, head_dim) keeps each head's head_dim features together; then "
                "reshape."),
        }
        verdict = compare_tensors(got, expected, name=f"for {where}, your output", likely_mistakes=mistakes)
        if not verdict.ok:
            return verdict
    return correct("on three sizes (1 to 3 heads): the projected heads plus the values merged like them, "
                   "both chan = H * head_dim wide.")


def _trend(first: float, last: float) -> str:
    """``"grows"`` (more than twice as big), ``"shrinks"`` (less than half) or ``"stays"``."""
    ratio = last / first if first else math.inf
    return "grows" if ratio > 2 else ("shrinks" if ratio < 0.5 else "stays")


@prediction_checker
def check_gradient_trend_prediction(prediction: Any, first: Tensor, last: Tensor, depths: tuple[int, int]) -> Verdict:
    """Prediction: with ``x + attention(x)``, does the gradient at layer 1 shrink, stay or grow with depth?

    ``first`` and ``last`` ``(seeds,)`` are that gradient at depth ``depths[0]`` and ``depths[1]``, one
    value per seed; "grows" means more than twice as big, "shrinks" less than half. The verdict says
    how many seeds did what.
    """
    choice = as_choice(prediction, TRENDS)
    if isinstance(choice, Verdict):
        return choice
    first, last = torch.as_tensor(first, dtype=torch.float64), torch.as_tensor(last, dtype=torch.float64)
    trends = [_trend(a, b) for a, b in zip(first.tolist(), last.tolist())]
    count = {t: trends.count(t) for t in TRENDS}
    a, b = depths
    measured = (f"over {len(trends)} seeds the gradient at layer 1 goes from {first.min().item():.2g}–"
                f"{first.max().item():.2g} at L = {a} to {last.min().item():.2g}–{last.max().item():.2g} at L = {b} "
                f"(grows in {count['grows']}, stays in {count['stays']}, shrinks in {count['shrinks']})")
    if count[choice] == len(trends):
        return correct(f"{measured}.")
    return wrong(f"{measured}.", "the counts are what these seeds did; the tables below show it depth by depth.")


def _grad_norm(output: Tensor, params: list[Tensor]) -> float:
    grads = torch.autograd.grad(output, params, retain_graph=True)
    return torch.sqrt(sum(g.pow(2).sum() for g in grads)).item()


def _measuring_functions() -> Watch:
    """The functions that already measure the gradient at a layer: the helpers', and 6.5.1's ``measure_depths``,
    which the notebook defines (watched by its name while the learner's function runs)."""
    return Watch({depth_sweep: "depth_sweep", signal_through_stack: "signal_through_stack",
                  "measure_depths": "measure_depths"})


def _watched_for_layer_grad(stack: AttentionStack, x: Tensor) -> Watch:
    """What exercise 6.3's function must not call: every function and method the library exports, except
    what running the stack calls (``stack(x, depth=L)`` is how the exercise gets x_L), and 6.5.1's
    ``measure_depths`` when the notebook has defined it."""

    def run_every_wiring() -> None:
        for wiring in SKIP_KINDS:
            stack.wiring = wiring
            with torch.no_grad():
                stack(x, depth=1)

    return library().without(codes_called(run_every_wiring)) | _measuring_functions()


@checker
def check_layer_grad(answer: Any) -> Verdict:
    """Exercise: a function ``fn(stack, x, L, layer)`` returning the norm of the gradient of ``||x_L||`` with
    respect to all parameters of layer ``layer`` (counted from 1, ``layer <= L``), run on a small stack
    (3 layers, ``chan=8``, 2 heads, float64) under each wiring and compared with autograd to a relative ``1e-6``."""
    refused = not_a_function(answer, "grad_at_layer(stack, x, L, layer)")
    if refused:
        return refused
    with local_random(606):  # seeded without touching the notebook's random state
        stack = AttentionStack(3, 8, 8, 2).double()
        x = torch.randn(2, 5, 8, dtype=torch.float64)  # (B, N, dim)
    watched = _watched_for_layer_grad(stack, x)
    how = ("layer `layer` is stack.layers[layer - 1]: the gradient of x_L.norm() with respect to its parameters, "
           "then the square root of the sum of every entry squared.")
    for wiring in SKIP_KINDS:
        stack.wiring = wiring
        for L, layer in ((3, 2), (3, 3), (3, 1), (2, 1), (1, 1)):
            what = f"wiring {wiring!r}, L={L}, layer={layer}"
            try:
                got, borrowed = run_watching(answer, (stack, x, L, layer), watched)
            except Exception as problem:
                return wrong(f"{what}: your function raised {error_text(problem)}", how)
            if borrowed:
                return wrong(f"your function hands the measurement to {borrowed[0]}, which is already written: the "
                             "exercise asks you to write it.", how)
            value = as_number(got, f"{what}: your function's result",
                              hint="return one number: the square root of the sum of every gradient entry squared.")
            if isinstance(value, Verdict):
                return value
            with torch.enable_grad():
                out = stack(x, depth=L)  # (B, N, chan)
                norms = [_grad_norm(out.norm(), list(stack.layers[i].parameters())) for i in range(L)]
            if math.isclose(value, norms[layer - 1], rel_tol=1e-6):
                continue
            mistakes = {0: "it measures layer 1 whatever layer is", L - 1: "it measures layer L",
                        layer: "stack.layers[layer] is layer layer + 1: layers are counted from 1, indices from 0"}
            for i, cause in mistakes.items():
                if i < L and i != layer - 1 and math.isclose(value, norms[i], rel_tol=1e-6):
                    return wrong(f"{what}: you gave {value:.6g}, the gradient at layer {i + 1}: {cause}.", how)
            for depth in range(layer, len(stack.layers) + 1):  # the right layer, measured through another depth
                if depth != L:
                    with torch.enable_grad():
                        other = _grad_norm(stack(x, depth=depth).norm(), list(stack.layers[layer - 1].parameters()))
                    if math.isclose(value, other, rel_tol=1e-6):
                        whole = " (stack(x) runs all of them)" if depth == len(stack.layers) else ""
                        return wrong(f"{what}: you gave {value:.6g}, the gradient of the norm of x_{depth} at layer "
                                     f"{layer}: your function ran {depth} layers, not L = {L}{whole}.",
                                     "x_L is stack(x, depth=L): pass L to the stack, then take the gradient of its "
                                     "norm.")
            if any(p.grad is not None for p in stack.parameters()):
                return wrong(f"{what}: you gave {value:.6g}, {value / norms[layer - 1]:.3g} times the expected "
                             f"{norms[layer - 1]:.6g}: .backward() adds into p.grad on every call, so this call "
                             "counted the earlier calls' gradients again.",
                             "use torch.autograd.grad(x_L.norm(), params), which returns the gradient instead.")
            params = list(stack.layers[layer - 1].parameters())
            with torch.enable_grad():
                out = stack(x, depth=L)  # (B, N, chan)
                grads = torch.autograd.grad(out.norm(), params)
                by_sum = _grad_norm(stack(x, depth=L).sum(), params)
            qkv_only = next((g.norm().item() for p, g in zip(params, grads) if p is stack.layers[layer - 1].qkv.weight),
                            None)
            variants = {
                "the gradient of x_L.sum() instead of x_L.norm()": (
                    by_sum, "differentiate the norm: torch.autograd.grad(x_L.norm(), params)."),
                "the per-tensor norms added up instead of one norm over every entry": (
                    sum(g.norm().item() for g in grads),
                    "square every entry of every gradient, add them all, then take one square root."),
                "the gradient of qkv.weight alone, not of all the layer's parameters": (
                    qkv_only, "take every parameter of the layer: list(stack.layers[layer - 1].parameters())."),
            }
            for cause, (number, hint) in variants.items():
                if number is not None and math.isclose(value, number, rel_tol=1e-6):
                    return wrong(f"{what}: you gave {value:.6g}, {cause} (expected {norms[layer - 1]:.6g}).", hint)
            return wrong(f"{what}: you gave {value:.6g}, expected {norms[layer - 1]:.6g}.", how)
    return correct("right under all three wirings at every layer of L = 1, 2 and 3.")


@checker
def check_residual_line(answer: Any, options: Mapping[str, str], namespace: Mapping[str, Any],
                        shape: tuple[int, ...] | list[int]) -> Verdict:
    """Exercise: pick the residual line that runs and gives a tensor of ``shape`` (e.g. ``(B, N, chan)``).

    Every option is evaluated in ``namespace``; the right ones run and have exactly ``shape``.
    """
    letter = as_letter(answer, options)
    if isinstance(letter, Verdict):
        return letter
    results = run_options(options, namespace)
    target = [int(s) for s in shape]
    got = results[letter]
    if isinstance(got, Tensor) and list(got.shape) == target:
        return correct(f"({letter}) adds two tensors of the same shape {target}.")
    if isinstance(got, Exception):
        return wrong(f"({letter}) does not run: {error_text(got)}",
                     "a residual adds two tensors elementwise, so both must have the same shape (B, N, chan).")
    found = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
    return wrong(f"({letter}) runs but gives {found}, not {target}.",
                 "broadcasting made a bigger tensor: both terms must be (B, N, chan).")
