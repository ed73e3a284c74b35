"""Checkers for 05 · Multi-head reshaping: split heads, merge heads, the shapes on the way, view vs reshape,
one head against several with the same weights (a prediction), and multi-head attention written by the learner.

The code exercise hands in a *function*; its judge runs it on inputs it makes up (several sizes and head
counts), so nothing the lesson printed can pass, and recognises the typical wrong versions (one wide head,
scaling by the full width, heads split or merged without the transpose, the softmax over the queries)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from ..attention import merge_heads, split_heads
from ._core import Verdict, as_letter, as_shape, checker, compare_tensors, correct, error_text, wrong
from ._predict import as_choice, prediction_checker

__all__ = ["check_split_heads", "check_merge_heads", "check_head_shapes", "check_split_line",
           "check_heads_prediction", "check_multi_head_function"]


# ------------------------------------------------------------------------------ shared helpers


def run_options(options: Mapping[str, str], namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Evaluate each option's line of code in a copy of ``namespace``: letter -> result, or the exception it raised."""
    results: dict[str, Any] = {}
    for letter, code in options.items():
        try:
            results[letter] = eval(code, {"torch": torch, "split_heads": split_heads, "merge_heads": merge_heads},
                                   dict(namespace))
        except Exception as problem:  # the error is the lesson: report it, never raise it
            results[letter] = problem
    return results


# ------------------------------------------------------------------------------ the checkers


@checker
def check_split_heads(answer: Any, x: Tensor, num_heads: int) -> Verdict:
    """Exercise: split ``x (B, N, chan)`` into heads ``(B, H, N, head_dim)``."""
    B, N, chan = x.shape
    head_dim = chan // num_heads
    expected = split_heads(x, num_heads)  # (B, H, N, head_dim)
    mistakes = {
        "you reshaped straight to (B, H, N, head_dim)": (
            x.reshape(B, num_heads, N, head_dim),
            "the shape is right but each head now holds pieces of several tokens: first split the last axis "
            "with reshape(B, N, H, head_dim), then swap tokens and heads with transpose(1, 2)."),
        "you split the features but did not move the heads axis": (
            x.reshape(B, N, num_heads, head_dim),
            "after reshape(B, N, H, head_dim) the heads axis is third; transpose(1, 2) brings it before the tokens."),
        "you split chan into (head_dim, H) instead of (H, head_dim)": (
            x.reshape(B, N, head_dim, num_heads).permute(0, 3, 1, 2),
            "head h owns the block of features h*head_dim ... (h+1)*head_dim - 1, so the heads axis comes first: "
            "reshape(B, N, H, head_dim)."),
    }
    return compare_tensors(answer, expected, name="your split", likely_mistakes=mistakes,
                           success=f"{list(expected.shape)}: {num_heads} heads of {head_dim} features, each "
                                   "seeing every token.")


@checker
def check_merge_heads(answer: Any, heads: Tensor) -> Verdict:
    """Exercise: merge ``heads (B, H, N, head_dim)`` back into ``(B, N, chan)``."""
    B, H, N, head_dim = heads.shape
    chan = H * head_dim
    expected = merge_heads(heads)  # (B, N, chan)
    mistakes = {
        "you flattened without moving the heads axis back": (
            heads.reshape(B, N, chan),
            "the shape is right but the values are scrambled: first transpose(1, 2) to (B, N, H, head_dim), "
            "then reshape(B, N, chan)."),
        "you moved the heads axis but did not flatten": (
            heads.transpose(1, 2),
            "after transpose(1, 2) the shape is (B, N, H, head_dim); reshape(B, N, chan) joins the last two axes."),
        "you put each head's features in a stride instead of a block": (
            heads.permute(0, 2, 3, 1).reshape(B, N, chan),
            "head h's features must end up next to each other (columns h*head_dim ... (h+1)*head_dim - 1): "
            "use transpose(1, 2), which keeps (H, head_dim) in that order."),
    }
    return compare_tensors(answer, expected, name="your merge", likely_mistakes=mistakes,
                           success=f"{list(expected.shape)}: the heads sit side by side again, head 0's "
                                   f"{head_dim} features first.")


@checker
def check_head_shapes(answer: Any, layer: torch.nn.Module, x: Tensor) -> Verdict:
    """Exercise: predict ``head_dim`` and the shapes of ``qkv_heads`` and ``scores`` of ``layer(x)``.

    ``answer``: a dict with the keys ``"head_dim"``, ``"qkv_heads"`` and ``"scores"``.
    """
    if not isinstance(answer, Mapping) or set(answer) != {"head_dim", "qkv_heads", "scores"}:
        return wrong(f"the answer should be a dict with the keys 'head_dim', 'qkv_heads' and 'scores', got {answer!r}.",
                     "fill in the dict given in the exercise: {'head_dim': ..., 'qkv_heads': [...], 'scores': [...]}.")
    with torch.no_grad():
        _, inter = layer(x, return_intermediates=True)
    B, N, dim = x.shape
    H, head_dim = inter["q"].shape[1], inter["q"].shape[-1]
    chan = H * head_dim
    hd = answer["head_dim"]
    if isinstance(hd, bool) or not isinstance(hd, int):
        return wrong(f"head_dim should be a whole number, got {hd!r}.", "head_dim = chan // num_heads.")
    if hd != head_dim:
        if hd == dim // H:
            return wrong(f"head_dim={hd} is dim // num_heads.",
                         f"the heads split the projected width chan={chan}, not the input width dim={dim}.")
        return wrong(f"head_dim={hd} is not right.", "head_dim = chan // num_heads.")
    for key, axes in (("qkv_heads", "(3, B, H, N, head_dim)"), ("scores", "(B, H, N, N)")):
        shape = as_shape(answer[key], key)
        if isinstance(shape, Verdict):
            return shape
        expected = list(inter[key].shape)
        if shape == expected:
            continue
        if key == "qkv_heads" and shape == [B, N, 3, H, head_dim]:
            return wrong(f"qkv_heads {shape} is the shape before the permute.",
                         "permute(2, 0, 3, 1, 4) puts axis 2 (q/k/v) first, then batch, heads, tokens, head_dim.")
        if key == "scores" and shape == [B, N, N]:
            return wrong(f"scores {shape} has no heads axis.", "every head scores all pairs of tokens: (B, H, N, N).")
        if key == "scores" and shape == [B, H, N, head_dim]:
            return wrong(f"scores {shape} ends in head_dim.",
                         "q @ k.transpose(-2, -1) contracts head_dim away: one score per (query, key) pair, (B, H, N, N).")
        return wrong(f"{key} {shape} is not right.", f"{key} has the axes {axes}.")
    return correct(f"head_dim={head_dim}, qkv_heads {list(inter['qkv_heads'].shape)}, scores {list(inter['scores'].shape)}.")


@checker
def check_split_line(answer: Any, options: Mapping[str, str], q: Tensor, num_heads: int) -> Verdict:
    """Exercise: pick the line that splits ``q (B, N, chan)`` into heads ``(B, H, N, head_dim)``.

    Every option is run on ``q``; the right ones give exactly :func:`split_heads`'s result.
    """
    letter = as_letter(answer, options)
    if isinstance(letter, Verdict):
        return letter
    B, N, chan = q.shape
    namespace = dict(q=q, B=B, N=N, chan=chan, num_heads=num_heads, head_dim=chan // num_heads)
    results = run_options(options, namespace)
    expected = split_heads(q, num_heads)
    right = sorted(k for k, r in results.items() if isinstance(r, Tensor) and r.shape == expected.shape
                   and torch.allclose(r, expected))
    got = results[letter]
    if letter in right:
        return correct(f"({letter}) splits the features of each token into heads, then moves the heads before the tokens.")
    if isinstance(got, Exception):
        return wrong(f"({letter}) does not even run: {error_text(got)}",
                     "view needs a contiguous tensor; after a transpose, reshape (or .contiguous()) works.")
    if isinstance(got, Tensor) and got.shape == expected.shape:
        return wrong(f"({letter}) has the right shape {list(got.shape)} but puts features of different tokens in one head.",
                     "split the last axis first (B, N, H, head_dim), then transpose(1, 2).")
    shape = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
    return wrong(f"({letter}) gives {shape}, not {list(expected.shape)}.", "follow the shape after each operation.")


# ------------------------------------------------------------------------------ predict: 1 head against H heads


@prediction_checker
def check_heads_prediction(prediction: Any, out_one: Tensor, out_many: Tensor, num_heads: int,
                           tolerance: float = 1e-5) -> Verdict:
    """Prediction: with the same weights, is a 1-head layer's output ``"same"`` as or ``"different"`` from a
    ``num_heads``-head layer's? ``out_one``, ``out_many``: the two outputs, ``(B, N, chan)`` each."""
    choice = as_choice(prediction, ["same", "different"])
    if isinstance(choice, Verdict):
        return choice
    if out_one.shape != out_many.shape:
        raise ValueError(f"out_one and out_many must have the same shape, got {list(out_one.shape)} and "
                         f"{list(out_many.shape)}")
    difference = (out_one - out_many).abs().max().item()
    same = difference < tolerance
    if choice == ("same" if same else "different"):
        return correct(f"the outputs differ by up to {difference:#.2g}, far above float rounding ({tolerance:g}): "
                       f"{num_heads} heads take {num_heads} softmaxes over narrow dot products, one head takes one "
                       "softmax over their sum." if not same else f"they agree to within {tolerance:g}.")
    if not same:
        return wrong(f"they differ by up to {difference:#.2g}, far above float rounding ({tolerance:g}).",
                     "the weights and q, k, v are the same, but each head takes its own softmax over its own "
                     "head_dim-wide dot products; one wide head takes one softmax over the sum of those dot products.")
    return wrong(f"they agree to within {tolerance:g}.", "look at the largest difference the cell printed.")


# ------------------------------------------------------------------------------ code: multi-head attention


def _multi_head_cases() -> list[tuple[int, Tensor, Tensor, Tensor]]:
    """``(num_heads, q, k, v)`` with ``q, k, v (B, N, chan)``, made up here so no printed value can pass.
    The first case has several heads, so a function that ignores ``num_heads`` fails at once."""
    generator = torch.Generator().manual_seed(5)
    cases = []
    for B, N, chan, num_heads in ((2, 5, 8, 2), (3, 4, 12, 3), (1, 6, 16, 4), (2, 3, 6, 1)):
        q, k, v = (2.0 * torch.randn(B, N, chan, generator=generator) for _ in range(3))  # each (B, N, chan)
        cases.append((num_heads, q, k, v))
    return cases


def _heads_attention(q: Tensor, k: Tensor, v: Tensor, divisor: float, axis: int = -1) -> Tensor:
    """``softmax(q @ k^T / divisor, dim=axis) @ v`` on ``(..., N, d)`` tensors."""
    return torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=axis) @ v


@checker
def check_multi_head_function(answer: Callable[[Tensor, Tensor, Tensor, int], Tensor]) -> Verdict:
    """Exercise: a function ``multi_head(q, k, v, num_heads) -> (B, N, chan)`` that splits ``q, k, v (B, N, chan)``
    into heads, runs scaled dot-product attention in every head and merges the heads. Run on four made-up
    cases (1 to 4 heads) and compared with :func:`split_heads`, the formula and :func:`merge_heads`."""
    if not callable(answer):
        return wrong(f"the answer should be a function, got {type(answer).__name__} {answer!r:.60}.",
                     "define it with def multi_head(q, k, v, num_heads): ... then write answer = multi_head "
                     "(no brackets); the checker calls it.")
    for num_heads, q, k, v in _multi_head_cases():
        B, N, chan = q.shape
        head_dim = chan // num_heads
        what = f"q, k, v {[B, N, chan]} with num_heads={num_heads}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = answer(q.clone(), k.clone(), v.clone(), num_heads)
        except Exception as problem:
            return wrong(f"{what}: your function raised {error_text(problem)}",
                         "run it on these shapes yourself and print the shape after each step: split "
                         "(B, N, chan) -> (B, H, N, head_dim), attend, merge back to (B, N, chan).")
        if not isinstance(got, Tensor):
            return wrong(f"{what}: your function returned {type(got).__name__}, not a tensor.",
                         "return the merged heads, one tensor of shape (B, N, chan).")
        qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # each (B, H, N, head_dim)
        heads = _heads_attention(qh, kh, vh, math.sqrt(head_dim))  # (B, H, N, head_dim)
        expected = merge_heads(heads)  # (B, N, chan)
        if tuple(got.shape) == tuple(heads.shape):
            return wrong(f"{what}: your function returns {list(got.shape)}, the heads before merging.",
                         "merge them: transpose(1, 2) to (B, N, H, head_dim), then reshape(B, N, chan).")
        view_split = [t.reshape(B, num_heads, N, head_dim) for t in (q, k, v)]  # whole tokens per head
        mistakes = {
            "the scores are divided by sqrt(chan), the full width, not sqrt(head_dim)": (
                merge_heads(_heads_attention(qh, kh, vh, math.sqrt(chan))),
                f"each head's dot products run over head_dim = {head_dim} features, so divide by "
                f"sqrt(head_dim): seed 004's bug of section 5.6."),
            "one wide head runs over all chan features (no split into heads)": (
                _heads_attention(q, k, v, math.sqrt(chan)),
                "split q, k and v into num_heads heads first: reshape(B, N, H, head_dim).transpose(1, 2)."),
            "one wide head runs over all chan features, divided by sqrt(head_dim)": (
                _heads_attention(q, k, v, math.sqrt(head_dim)),
                "split q, k and v into num_heads heads first: reshape(B, N, H, head_dim).transpose(1, 2); "
                "then each head's scores are over its own head_dim features."),
            "the scores are not scaled at all": (
                merge_heads(_heads_attention(qh, kh, vh, 1.0)),
                "divide each head's scores by sqrt(head_dim) before the softmax."),
            "the softmax runs over the queries (dim=-2)": (
                merge_heads(_heads_attention(qh, kh, vh, math.sqrt(head_dim), axis=-2)),
                "each query's weights over the keys sum to one: softmax(..., dim=-1)."),
            "q, k and v are reshaped straight to (B, H, N, head_dim), without the transpose": (
                merge_heads(_heads_attention(*view_split, math.sqrt(head_dim))),
                "that hands whole tokens to each head (section 5.5): reshape(B, N, H, head_dim), then transpose(1, 2)."),
            "the heads are merged with a reshape alone, without moving the heads axis back": (
                heads.reshape(B, N, chan),
                "merge with transpose(1, 2) first, to (B, N, H, head_dim), then reshape(B, N, chan)."),
        }
        if num_heads == 1:  # one head: several mistakes coincide with the right answer
            mistakes = {cause: pair for cause, pair in mistakes.items() if not torch.allclose(pair[0], expected)}
        verdict = compare_tensors(got, expected, name=f"{what}: your output", likely_mistakes=mistakes,
                                  atol=1e-4, rtol=1e-4)
        if not verdict.ok:
            return verdict
    return correct("with 1, 2, 3 and 4 heads on four sizes, your function gives split_heads, softmax(q_h k_h^T / "
                   "sqrt(head_dim)) v_h in every head, and merge_heads, to within 1e-4.")
