"""Checkers for 06 · Output projection and skip connection: the skip through V and valid residuals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ..attention import merge_heads
from ._core import Verdict, as_letter, as_shape, checker, compare_tensors, correct, error_text, wrong
from .heads import run_options

__all__ = ["check_skip_through_v", "check_merged_v_shape", "check_residual_line"]


@checker
def check_skip_through_v(answer: Any, v: Tensor, projected: Tensor) -> Verdict:
    """Exercise: seed 000's output, ``projected + v`` with ``v (B, H, N, head_dim)`` merged to ``(B, N, chan)``."""
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
    }
    return compare_tensors(answer, expected, name="your output", likely_mistakes=mistakes,
                           success=f"{list(expected.shape)}: the projected heads plus the values, both chan={chan} wide.")


@checker
def check_merged_v_shape(answer: Any, v: Tensor) -> Verdict:
    """Exercise: the shape of ``v (B, H, N, head_dim)`` after merging its heads, ``(B, N, H * head_dim)``."""
    shape = as_shape(answer, "the shape")
    if isinstance(shape, Verdict):
        return shape
    B, H, N, head_dim = v.shape
    expected = list(merge_heads(v).shape)
    if shape == expected:
        return correct(f"{expected}: {H} heads of {head_dim} features make chan={H * head_dim} per token.")
    if shape == list(v.shape):
        return wrong(f"{shape} is v's shape before merging.", "merging removes the heads axis: (B, N, H * head_dim).")
    if shape == [B, N, H, head_dim]:
        return wrong(f"{shape} is only the transpose.", "then reshape joins the last two axes: H * head_dim features.")
    if shape == [B, N, head_dim]:
        return wrong(f"{shape} keeps only one head's width.",
                     "merging puts all heads side by side, so the width is H * head_dim = chan.")
    return wrong(f"{shape} is not the merged shape.", "merge: (B, H, N, head_dim) -> (B, N, H * head_dim).")


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
