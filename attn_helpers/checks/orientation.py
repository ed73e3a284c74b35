"""Checkers for 00 · Orientation: reading the notation."""

from __future__ import annotations

from typing import Any

from ._core import Verdict, checker, correct, wrong

__all__ = ["check_head_dim", "check_scores_shape"]


def _as_int(answer: Any, what: str) -> int | Verdict:
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or int(answer) != answer:
        return wrong(f"{what} should be a whole number, got {answer!r}.",
                     "a width is a count of features, so it is an int.")
    return int(answer)


@checker
def check_head_dim(answer: Any, chan: int, num_heads: int) -> Verdict:
    """Exercise: the width of one head, ``head_dim = chan // num_heads``."""
    value = _as_int(answer, "head_dim")
    if isinstance(value, Verdict):
        return value
    expected = chan // num_heads
    if value == expected:
        return correct(f"each of the {num_heads} heads works on {expected} of the {chan} features.")
    if value == chan * num_heads:
        return wrong(f"{value} is chan × num_heads.", "the heads share chan between them: divide, don't multiply.")
    if value == chan:
        return wrong(f"{value} is the width of all heads together (chan).",
                     "one head gets an equal share of chan: divide by num_heads.")
    return wrong(f"{value} is not chan / num_heads.", "head_dim = chan // num_heads.")


@checker
def check_scores_shape(answer: Any, B: int, num_heads: int, N: int) -> Verdict:
    """Exercise: the shape of the scores of multi-head self-attention, ``(B, H, N, N)``."""
    try:
        shape = [int(s) for s in answer]
    except TypeError:
        return wrong(f"a shape is a list or tuple of ints, got {answer!r}.", "write it like [B, H, N, N] with numbers.")
    expected = [B, num_heads, N, N]
    if shape == expected:
        return correct(f"{expected}: one N × N matrix of scores per batch element and per head.")
    if sorted(shape) == sorted(expected):
        return wrong(f"{shape} has the right sizes in the wrong order.",
                     "the order is (batch, heads, queries, keys): heads come before the tokens.")
    if len(shape) == 3:
        return wrong(f"{shape} has no head axis.", "with several heads, each head has its own scores: (B, H, N, N).")
    return wrong(f"{shape} is not the scores' shape.", "every query is scored against every key: the last two axes are N and N.")
