"""Checkers for 05 · Multi-head reshaping: split heads, merge heads, the shapes on the way, view vs reshape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..attention import merge_heads, split_heads
from ._core import Verdict, as_letter, as_shape, checker, compare_tensors, correct, error_text, wrong

__all__ = ["check_split_heads", "check_merge_heads", "check_head_shapes", "check_split_line"]


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
