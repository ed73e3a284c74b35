"""Checkers for lesson 03 (softmax and masks): a blocked-convention causal mask, the softmax axis,
and a boolean mask turned additive. Each judge recomputes the right answer from the exercise's inputs."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..attention import causal_mask, mask_to_additive
from ._core import Verdict, checker, compare_tensors, wrong

__all__ = ["check_causal_blocked_mask", "check_softmax_axis", "check_additive_mask"]


@checker
def check_causal_blocked_mask(answer: Any, n: int) -> Verdict:
    """Exercise: an ``(n, n)`` causal mask in the "True = blocked" convention, for ``masked_fill``."""
    expected = ~causal_mask(n)  # (n, n): True above the diagonal (the future) = blocked
    if not isinstance(answer, Tensor):
        return wrong(f"your answer is a {type(answer).__name__}, not a tensor.",
                     "build it with torch operations, e.g. from torch.ones(n, n, dtype=torch.bool).")
    if answer.dtype != torch.bool:
        same_pattern = answer.shape == expected.shape and bool((answer != 0).eq(expected).all())
        pattern = "the right pattern" if same_pattern else "a pattern"
        return wrong(f"your mask has {pattern} but dtype {answer.dtype}; masked_fill needs a boolean mask.",
                     "make it boolean: build it from a bool tensor or add .bool() at the end.")
    keep = causal_mask(n)
    return compare_tensors(
        answer, expected, name="your mask",
        likely_mistakes={
            "you build the 'True = keep' mask (what scaled_dot_product_attention wants)": (
                keep, "masked_fill writes -inf where the mask is True, so True must mark the FUTURE keys "
                      "(above the diagonal): invert the keep mask with ~, or use torch.triu(..., diagonal=1)."),
            "you also block the diagonal (each token could not see itself)": (
                torch.ones(n, n, dtype=torch.bool).triu(), "a token may attend to itself: start one above the "
                "diagonal with torch.triu(..., diagonal=1); otherwise the first row is fully blocked."),
            "you block the past instead of the future": (
                torch.ones(n, n, dtype=torch.bool).tril(-1), "query i may see keys j <= i; block j > i, the part "
                "above the diagonal (triu, not tril)."),
        },
        success="True above the diagonal: masked_fill(mask, -inf) hides every future key.",
    )


@checker
def check_softmax_axis(answer: Any, scores: Tensor) -> Verdict:
    """Exercise: attention weights from ``scores (..., N_q, N_k)``, each query's row summing to one."""
    expected = torch.softmax(scores, dim=-1)  # (..., N_q, N_k)
    mistakes: dict[str, tuple[Tensor, str]] = {
        "you normalise over the queries (dim=-2): every COLUMN sums to one": (
            torch.softmax(scores, dim=-2), "the weights of ONE query over all keys must sum to one; the keys are "
                                           "the last axis, so use dim=-1."),
        "you forget the softmax": (scores, "apply torch.softmax(scores, dim=-1) to turn scores into weights."),
    }
    for d in range(scores.ndim - 2):  # the batch-like axes in front, e.g. batch and heads
        mistakes[f"you normalise over axis {d} (a batch or head axis) instead of the keys"] = (
            torch.softmax(scores, dim=d), f"dim={d} mixes different sentences or heads; count from the end: "
                                          "dim=-1 is the keys, whatever comes in front.")
    return compare_tensors(answer, expected, name="your weights", likely_mistakes=mistakes,
                           success="every query's weights over the keys sum to one (dim=-1).")


@checker
def check_additive_mask(answer: Any, keep: Tensor) -> Verdict:
    """Exercise: the additive form of a boolean ``keep`` mask (``True`` = may attend): 0 / -inf."""
    expected = mask_to_additive(keep)  # 0.0 where keep, -inf where blocked
    if isinstance(answer, Tensor) and answer.dtype == torch.bool:
        return wrong("your answer is still a boolean mask; an additive mask holds numbers (0.0 and -inf).",
                     "start from torch.zeros(keep.shape) and fill -inf where keep is False.")
    return compare_tensors(
        answer, expected, name="your additive mask",
        likely_mistakes={
            "you put -inf where keep is True (the blocked convention read backwards)": (
                mask_to_additive(keep, invert=True), "keep=True means 'may attend' and must add 0.0; "
                                                    "-inf goes where keep is False (use ~keep)."),
            "you turn the mask into 1.0 / 0.0": (
                keep.float(), "adding 1.0 to a score barely changes softmax and blocks nothing; "
                              "blocked positions need -inf so that exp(-inf) = 0."),
            "you use -1e9 instead of -inf": (
                torch.zeros(keep.shape).masked_fill(~keep, -1e9), "-1e9 blocks too, but the exercise asks for "
                "float('-inf'): with -1e9 a fully masked row becomes uniform instead of NaN (section 3.6)."),
        },
        success="0.0 where a query may attend, -inf where it may not.",
    )
