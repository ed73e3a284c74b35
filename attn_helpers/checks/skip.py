"""Checkers for 06 · Output projection and skip connection: the skip through V, the gradient that
reaches a stack's first layer (a prediction, then a function the learner writes) and valid residuals."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..core import merge_heads
from ..lab.probes import SKIP_KINDS, AttentionStack, depth_sweep, signal_through_stack
from ._core import Verdict, as_letter, as_number, checker, compare_tensors, correct, error_text, wrong
from ._predict import as_choice, prediction_checker
from .heads import exported_code, run_options, run_watching

__all__ = ["check_skip_through_v", "check_gradient_trend_prediction", "check_first_layer_grad", "check_layer_grad",
           "check_residual_line"]

TRENDS = ("shrinks", "stays", "grows")


@checker
def check_skip_through_v(answer: Any, v: Tensor, projected: Tensor) -> Verdict:
    """Exercise: walkthrough 000's output, ``projected + v`` with ``v (B, H, N, head_dim)`` merged to ``(B, N, chan)``."""
    B, H, N, head_dim = v.shape
    chan = H * head_dim
    expected = projected + merge_heads(v)  # (B, N, chan)
    mistakes = {
        "you flattened v without moving its heads axis": (
            projected + v.reshape(B, N, chan),
            "v is (B, H, N, head_dim): transpose(1, 2) first, so each token's heads sit side by side, then reshape."),
        "you left out the attention output": (
            merge_heads(v),
            "the skip is added to the projected attention output: projected + merged v."),
        "you left out the skip": (
            projected,
            "add the merged values v to projected."),
        "you merged v with head_dim before heads, so the heads' features are interleaved": (
            projected + v.permute(0, 2, 3, 1).reshape(B, N, chan),
            "transpose(1, 2) to (B, N, H, head_dim) keeps each head's head_dim features together; then reshape."),
    }
    return compare_tensors(answer, expected, name="your output", likely_mistakes=mistakes,
                           success=f"{list(expected.shape)}: the projected heads plus the values, both chan={chan} wide.")


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


def _first_layer_grad_cases() -> list[tuple[AttentionStack, Tensor, int]]:
    """A small stack (not the lesson's) under each wiring, at depths 1 and 3: (stack, x, L)."""
    with torch.random.fork_rng(devices=[]):  # seeded without touching the notebook's random state
        torch.manual_seed(606)
        stack = AttentionStack(3, 8, 8, 2).double()
        x = torch.randn(2, 5, 8, dtype=torch.float64)  # (B, N, dim)
    return [(stack, x, L) for _ in SKIP_KINDS for L in (1, 3)]


def _measuring_functions() -> dict[Any, str]:
    """Code object -> name of the functions that already measure the gradient at layer 1: the helpers', and
    6.5.1's ``measure_depths`` when the notebook has defined it. Watched while the learner's function runs
    (:func:`~attn_helpers.checks.heads.run_watching`, as lesson 05's checkers do), so an alias is caught too."""
    watched = {depth_sweep.__code__: "depth_sweep", signal_through_stack.__code__: "signal_through_stack"}
    notebook_loop = getattr(sys.modules.get("__main__"), "measure_depths", None)
    code = getattr(notebook_loop, "__code__", None)
    if code is not None:
        watched[code] = "measure_depths"
    return watched


def _watched_for_layer_grad(stack: AttentionStack, x: Tensor) -> dict[Any, str]:
    """What exercise 6.3's function must not call: every function and method ``attn_helpers`` exports, except
    what running the stack calls (``stack(x, depth=L)`` is how the exercise gets x_L), and 6.5.1's
    ``measure_depths`` when the notebook has defined it."""
    needed: set[Any] = set()

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            needed.add(frame.f_code)

    previous = sys.getprofile()
    sys.setprofile(record)
    try:
        for wiring in SKIP_KINDS:
            stack.wiring = wiring
            with torch.no_grad():
                stack(x, depth=1)
    finally:
        sys.setprofile(previous)
    watched = {code: name for code, name in exported_code().items() if code not in needed}
    return {**watched, **_measuring_functions()}


@checker
def check_layer_grad(answer: Any) -> Verdict:
    """Exercise: a function ``fn(stack, x, L, layer)`` returning the norm of the gradient of ``||x_L||`` with
    respect to all parameters of layer ``layer`` (counted from 1, ``layer <= L``), run on a small stack
    (3 layers, ``chan=8``, 2 heads, float64) under each wiring and compared with autograd to a relative ``1e-6``."""
    if not callable(answer):
        return wrong(f"your answer is not a function (it is of type {type(answer).__name__}).",
                     "define it with def grad_at_layer(stack, x, L, layer): ... and write its name, without ().")
    with torch.random.fork_rng(devices=[]):  # seeded without touching the notebook's random state
        torch.manual_seed(606)
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
            if any(p.grad is not None for p in stack.parameters()):
                return wrong(f"{what}: you gave {value:.6g}, {value / norms[layer - 1]:.3g} times the expected "
                             f"{norms[layer - 1]:.6g}: .backward() adds into p.grad on every call, so this call "
                             "counted the earlier calls' gradients again.",
                             "use torch.autograd.grad(x_L.norm(), params), which returns the gradient instead.")
            return wrong(f"{what}: you gave {value:.6g}, expected {norms[layer - 1]:.6g}.", how)
    return correct("right under all three wirings at every layer of L = 1, 2 and 3.")


@checker
def check_first_layer_grad(answer: Any) -> Verdict:
    """Exercise: a function ``fn(stack, x, L)`` returning the norm of the gradient of ``||x_L||`` with
    respect to all parameters of the stack's first layer, run on a small stack (3 layers, ``chan=8``,
    2 heads, float64) under each wiring at ``L = 1`` and ``3`` and compared with :func:`depth_sweep`
    to a relative ``1e-6``."""
    if not callable(answer):
        return wrong(f"your answer is not a function (it is of type {type(answer).__name__}).",
                     "define it with def grad_at_layer_1(stack, x, L): ... and write its name, without ().")
    watched = _measuring_functions()
    itself = watched.get(getattr(answer, "__code__", None))
    if itself:
        return wrong(f"your answer is {itself}, which is already written: the exercise asks you to write the "
                     "measurement.", "x_L = stack(x, depth=L); torch.autograd.grad(x_L.norm(), "
                     "list(stack.layers[0].parameters())); then the square root of the sum of every entry squared.")
    cases = _first_layer_grad_cases()
    for i, (stack, x, L) in enumerate(cases):
        stack.wiring = SKIP_KINDS[i // 2]
        what = f"wiring {stack.wiring!r}, L={L}"
        try:
            got, borrowed = run_watching(answer, (stack, x, L), watched)
        except Exception as problem:
            return wrong(f"{what}: your function raised {error_text(problem)}",
                         "x_L = stack(x, depth=L); then torch.autograd.grad(x_L.norm(), list(stack.layers[0].parameters())).")
        if borrowed:
            return wrong(f"your function hands the measurement to {borrowed[0]}, which is already written: the "
                         "exercise asks you to write it.", "x_L = stack(x, depth=L); torch.autograd.grad(x_L.norm(), "
                         "list(stack.layers[0].parameters())); then the square root of the sum of every entry squared.")
        value = as_number(got, f"{what}: your function's result",
                          hint="return one number: the square root of the sum of every gradient entry squared.")
        if isinstance(value, Verdict):
            return value
        expected = depth_sweep(stack, x, [L])["grad_norm"][0].item()
        if math.isclose(value, expected, rel_tol=1e-6):
            continue
        with torch.enable_grad():
            out, hidden = stack(x, depth=L, return_hidden=True)  # out: (B, N, chan)
            first = list(stack.layers[0].parameters())
            mistakes = {
                "it leaves out proj.bias": (
                    _grad_norm(out.norm(), [p for name, p in stack.layers[0].named_parameters() if "bias" not in name]),
                    "take every parameter of the first layer, its bias included: list(stack.layers[0].parameters())."),
                "it measures layer L, not layer 1": (
                    _grad_norm(out.norm(), list(stack.layers[L - 1].parameters())),
                    "the first layer is stack.layers[0], whatever L is."),
                "it takes every layer's parameters, not only the first layer's": (
                    _grad_norm(out.norm(), [p for layer in stack.layers[:L] for p in layer.parameters()]),
                    "only stack.layers[0].parameters()."),
                "the loss is the sum of x_L, not its norm": (
                    _grad_norm(out.sum(), first), "the loss is x_L.norm(): its gradient at the output has norm 1."),
                "the loss is the squared norm of x_L": (
                    _grad_norm(out.pow(2).sum(), first), "the loss is x_L.norm(), not x_L.pow(2).sum()."),
                "it returns the squared norm (the sum of the squares, without the square root)": (
                    expected ** 2, "take the square root of the sum of every gradient entry squared."),
                "it runs only the first layer, not L layers": (
                    _grad_norm(hidden[1].norm(), first) if L > 1 else math.nan,
                    "run all L layers: stack(x, depth=L)."),
            }
        for cause, (wrong_value, hint) in mistakes.items():
            if math.isclose(value, wrong_value, rel_tol=1e-6):
                return wrong(f"{what}: you got {value:.4g}, the gradient at layer 1 is {expected:.4g}: {cause}.", hint)
        if any(p.grad is not None for p in stack.parameters()):
            return wrong(f"{what}: you got {value:.4g}, the gradient at layer 1 is {expected:.4g}.",
                         ".backward() adds into p.grad on every call, so a second call counts the first one's gradient "
                         "again; use torch.autograd.grad(x_L.norm(), params), which returns the gradient instead.")
        return wrong(f"{what}: you got {value:.4g}, the gradient at layer 1 is {expected:.4g}.",
                     "x_L = stack(x, depth=L); grads = torch.autograd.grad(x_L.norm(), list(stack.layers[0].parameters())); "
                     "then the square root of the sum of every entry squared.")
    return correct(f"your function gives the gradient at layer 1 for all {len(SKIP_KINDS)} wirings at L = 1 and 3 "
                   "(to 1e-6 relative), on a stack the lesson never printed.")


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
