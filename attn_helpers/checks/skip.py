"""Checkers for 06 · Output projection and skip connection: the skip through V, the gradient that
reaches a stack's layers (a prediction, then a function the learner writes) and valid residuals."""

from __future__ import annotations

import math
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

import torch
from torch import Tensor

from ..core import merge_heads
from ..lab import SKIP_KINDS, AttentionStack, depth_sweep, local_random, signal_through_stack
from ._core import Verdict, as_letter, as_number, checker, compare_tensors, correct, error_text, wrong
from ._function import judge_function
from ._guard import Watch, codes_called, library
from ._predict import prediction_checker
from .heads import run_option

__all__ = ["check_skip_through_v", "check_gradient_trend_prediction", "check_layer_grad",
           "check_residual_line"]

TRENDS = ("shrinks", "stays", "grows")


def _judge_skip(v_heads: Tensor, projected: Tensor) -> Any:
    B, H, N, head_dim = v_heads.shape
    chan = H * head_dim
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
    expected = projected + merge_heads(v_heads)  # (B, N, chan)
    return lambda got: compare_tensors(got, expected, name="your output", likely_mistakes=mistakes)


@checker
def check_skip_through_v(answer: Any) -> Verdict:
    """Exercise 6.2: ``walkthrough_output(v_heads, projected)``, walkthrough 000's ``projected + v``, merged."""
    g = torch.Generator().manual_seed(62)
    cases = []
    # (B, H, N, head_dim) of the checker's own v: no layer whose forward pass could be replayed
    for B, H, N, head_dim in ((2, 2, 5, 4), (1, 3, 4, 2), (3, 1, 6, 3)):
        v_heads = torch.randn(B, H, N, head_dim, generator=g, dtype=torch.float64)
        projected = torch.randn(B, N, H * head_dim, generator=g, dtype=torch.float64)  # (B, N, chan)
        cases.append(((v_heads, projected), f"for v_heads {list(v_heads.shape)} and projected "
                      f"{list(projected.shape)}", _judge_skip(v_heads, projected)))
    return judge_function(
        answer, cases, watched=library(("merge_heads",)), example="walkthrough_output(v_heads, projected)",
        calls="your function hands the merge to {}: the exercise asks you to write it.",
        lines="v_heads is (B, H, N, head_dim): transpose(1, 2) to (B, N, H, head_dim), reshape to "
              "(B, N, H * head_dim), then add projected.",
        raised="read B, H, N and head_dim from v_heads.shape, not the numbers of one example.",
        success="on three sizes (1 to 3 heads): the projected heads plus the values merged like them, both "
                "chan = H * head_dim wide.")


@prediction_checker(choices=TRENDS)
def check_gradient_trend_prediction(choice: str, first: Tensor, last: Tensor, depths: tuple[int, int]) -> Verdict:
    """Prediction 6: with ``x + attention(x)``, does layer 1's gradient (``first``, ``last``: one per seed, at the
    two ``depths``) shrink (below half), stay or grow (above twice) with depth?"""
    first, last = torch.as_tensor(first, dtype=torch.float64), torch.as_tensor(last, dtype=torch.float64)
    ratios = [b / a if a else math.inf for a, b in zip(first.tolist(), last.tolist())]
    trends = ["grows" if ratio > 2 else ("shrinks" if ratio < 0.5 else "stays") for ratio in ratios]
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


@checker
def check_layer_grad(answer: Any) -> Verdict:
    """Exercise 6.3: ``grad_at_layer(stack, x, L, layer)``, the gradient norm of ``||x_L||`` at layer ``layer``."""
    with local_random(606):  # seeded without touching the notebook's random state
        stack = AttentionStack(3, 8, 8, 2).double()
        x = torch.randn(2, 5, 8, dtype=torch.float64)  # (B, N, dim)
    stacks = []
    for wiring in SKIP_KINDS:
        stacks.append(deepcopy(stack))
        stacks[-1].wiring = wiring
    with torch.no_grad():  # watched: the library but what running the stacks calls, and what already measures
        ran = codes_called(lambda: [each(x, depth=1) for each in stacks])  # the gradient (6.5.1's measure_depths)
    watched = library().without(ran) | Watch({depth_sweep: "depth_sweep", signal_through_stack: "signal_through_stack",
                                              "measure_depths": "measure_depths"})
    how = ("layer `layer` is stack.layers[layer - 1]: the gradient of x_L.norm() with respect to its parameters, "
           "then the square root of the sum of every entry squared.")
    cases = [((stack, x, L, layer), f"wiring {stack.wiring!r}, L={L}, layer={layer}",
              lambda got, stack=stack, L=L, layer=layer: _judge_grad(got, stack, x, L, layer, how))
             for stack in stacks for L, layer in ((3, 2), (3, 3), (3, 1), (2, 1), (1, 1))]
    return judge_function(answer, cases, watched=watched, example="grad_at_layer(stack, x, L, layer)", lines=how,
                          raised=how, calls="your function hands the measurement to {}, which is already written: "
                          "the exercise asks you to write it.",
                          success="right under all three wirings at every layer of L = 1, 2 and 3.")


def _judge_grad(got: Any, stack: AttentionStack, x: Tensor, L: int, layer: int, how: str) -> Verdict:
    """The verdict on one gradient norm, the typical mistakes recomputed on ``stack``."""
    value = as_number(got, "your function's result",
                      hint="return one number: the square root of the sum of every gradient entry squared.")
    with torch.enable_grad():
        out = stack(x, depth=L)  # (B, N, chan)
        norms = [_grad_norm(out.norm(), list(stack.layers[i].parameters())) for i in range(L)]
    if math.isclose(value, norms[layer - 1], rel_tol=1e-6):
        return correct()
    mistakes = {0: "it measures layer 1 whatever layer is", L - 1: "it measures layer L",
                layer: "stack.layers[layer] is layer layer + 1: layers are counted from 1, indices from 0"}
    for i, cause in mistakes.items():
        if i < L and i != layer - 1 and math.isclose(value, norms[i], rel_tol=1e-6):
            return wrong(f"you gave {value:.6g}, the gradient at layer {i + 1}: {cause}.", how)
    for depth in range(layer, len(stack.layers) + 1):  # the right layer, measured through another depth
        if depth != L:
            with torch.enable_grad():
                other = _grad_norm(stack(x, depth=depth).norm(), list(stack.layers[layer - 1].parameters()))
            if math.isclose(value, other, rel_tol=1e-6):
                whole = " (stack(x) runs all of them)" if depth == len(stack.layers) else ""
                return wrong(f"you gave {value:.6g}, the gradient of the norm of x_{depth} at layer {layer}: your "
                             f"function ran {depth} layers, not L = {L}{whole}.",
                             "x_L is stack(x, depth=L): pass L to the stack, then take the gradient of its norm.")
    if any(p.grad is not None for p in stack.parameters()):
        return wrong(f"you gave {value:.6g}, {value / norms[layer - 1]:.3g} times the expected {norms[layer - 1]:.6g}: "
                     ".backward() adds into p.grad on every call, so this call counted the earlier calls' gradients "
                     "again.", "use torch.autograd.grad(x_L.norm(), params), which returns the gradient instead.")
    params = list(stack.layers[layer - 1].parameters())
    with torch.enable_grad():
        grads = torch.autograd.grad(stack(x, depth=L).norm(), params)
        by_sum = _grad_norm(stack(x, depth=L).sum(), params)
    qkv_only = next((g.norm().item() for p, g in zip(params, grads) if p is stack.layers[layer - 1].qkv.weight), None)
    variants = {
        "the gradient of x_L.sum() instead of x_L.norm()": (
            by_sum, "differentiate the norm: torch.autograd.grad(x_L.norm(), params)."),
        "the per-tensor norms added up instead of one norm over every entry": (
            sum(g.norm().item() for g in grads), "square every entry of every gradient, add them all, then take one "
                                                 "square root."),
        "the gradient of qkv.weight alone, not of all the layer's parameters": (
            qkv_only, "take every parameter of the layer: list(stack.layers[layer - 1].parameters())."),
    }
    for cause, (number, hint) in variants.items():
        if number is not None and math.isclose(value, number, rel_tol=1e-6):
            return wrong(f"you gave {value:.6g}, {cause} (expected {norms[layer - 1]:.6g}).", hint)
    return wrong(f"you gave {value:.6g}, expected {norms[layer - 1]:.6g}.", how)


@checker
def check_residual_line(answer: Any, options: Mapping[str, str], namespace: Mapping[str, Any],
                        shape: tuple[int, ...] | list[int]) -> Verdict:
    """Exercise 6: the option letter whose residual line runs in ``namespace`` and gives ``shape``, and adds the
    input: ``projected + to_chan(x)``, from the namespace's ``projected``, ``to_chan`` and ``x``."""
    letter = as_letter(answer, options)
    target = [int(s) for s in shape]
    got = run_option(options[letter], namespace)
    if isinstance(got, Tensor) and list(got.shape) == target:
        with torch.no_grad():
            skip = namespace["to_chan"](namespace["x"])  # (B, N, chan): each token's own input, at chan features
            added = got.detach() - namespace["projected"]  # (B, N, chan): what the line added to the output
        if torch.allclose(got.detach(), namespace["projected"] + skip):
            return correct(f"({letter}) adds two tensors of the same shape {target}: each token's output and its own "
                           "input, brought to chan features.")
        said = f"({letter}) runs and gives {target}, but it does not add each token's own input to its output"
        per_token = "the skip path carries the layer's input x, token by token, brought to chan features when dim != chan."
        if torch.allclose(added, skip.mean(dim=1, keepdim=True).expand_as(added)):
            return wrong(f"{said}: it adds every token the same vector, the average of the tokens' inputs.", per_token)
        if added.dim() == 3:
            # which token's input each token was given: 0 where none matches
            match = torch.isclose(added[:, :, None], skip[:, None], atol=1e-6).all(dim=-1)  # (B, N, N)
            for b, n in ((b, n) for b in range(added.shape[0]) for n in range(added.shape[1])):
                if match[b, n].any() and not match[b, n, n]:
                    m = int(match[b, n].nonzero()[0])
                    return wrong(f"{said}: in sequence {b}, token {n} gets token {m}'s input.",
                                 "each token's output gets its own input back, at the same position: nothing on the "
                                 "skip path may reorder the tokens.")
        return wrong(f"{said}.", per_token)
    if isinstance(got, Exception):
        return wrong(f"({letter}) does not run: {error_text(got)}",
                     "a residual adds two tensors elementwise, so both must have the same shape (B, N, chan).")
    found = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
    return wrong(f"({letter}) runs but gives {found}, not {target}.",
                 "broadcasting made a bigger tensor: both terms must be (B, N, chan).")
