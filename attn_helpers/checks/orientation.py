"""Checkers for 00 · Orientation: one query's largest weight (a prediction), the scores' shape, and the
formula written as a function."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ..core import scaled_dot_product_attention
from ._core import Verdict, checker, compare_tensors, correct, judge_shape, wrong
from ._function import judge_function, random_cases
from ._guard import LIBRARY_ATTENTION
from ._predict import as_choice, prediction_checker

__all__ = ["check_largest_key", "check_scores_shape", "check_self_attention_weights"]


@prediction_checker
def check_largest_key(prediction: Any, weights: Tensor, tokens: Sequence[str], query: str) -> Verdict:
    """Prediction 0: which key gets the largest weight in ``query``'s row of ``weights (N, N)``."""
    choice = as_choice(prediction, list(dict.fromkeys(tokens)))
    row = weights[list(tokens).index(query)]  # (N,)
    winner = tokens[int(row.argmax())]
    own = row[list(tokens).index(query)].item()
    if choice == winner:
        return correct(f"{winner!r} gets {row.max().item():.3f} of {query!r}'s weight, "
                       f"more than {query!r} itself ({own:.3f}).")
    picked = row[list(tokens).index(choice)].item()
    hint = ("a score is a dot product, so a key with a larger norm that points roughly the same way can beat a "
            "key that points exactly the same way: compare the norms of the keys.") if choice == query else (
            "each score is the dot product of the query with a key: compute the four of them by hand.")
    return wrong(f"{choice!r} gets {picked:.3f}, but {winner!r} gets the most, {row.max().item():.3f}.", hint)


@checker
def check_scores_shape(answer: Any, B: int, num_heads: int, N: int) -> Verdict:
    """Exercise 0: the multi-head scores' shape ``(B, H, N, N)``."""
    return judge_shape(
        answer, [B, num_heads, N, N], what="a shape", hint="write it like [B, H, N, N] with whole numbers.",
        known={(num_heads, N, N): ("has no batch axis.", "each of the B sequences has its own scores: (B, H, N, N)."),
               (B * num_heads, N, N): ("merges the batch and head axes into one.",
                                       "the scores keep the batch and the heads apart: (B, H, N, N)."),
               # after the two above: where num_heads == B, this one is said
               (B, N, N): ("has no head axis.", "with several heads, each head has its own scores: (B, H, N, N)."),
               # after (B, N, N): where num_heads == N, this one is said
               (B, num_heads, N): ("has one score per token and head, but a score belongs to a pair of tokens.",
                                   "every query is scored against every key: the last two axes are N (queries) and N "
                                   "(keys).")},
        success=f"{[B, num_heads, N, N]}: one N × N matrix of scores per batch element and per head.",
        order="the order is (batch, heads, queries, keys): heads come before the tokens.",
        other=("is not the scores' shape.", "one N × N matrix of scores (queries × keys) per sequence and per head: "
                                             "(B, H, N, N), with this exercise's B, num_heads and N."))


# The inputs (N, d_k) of exercise 0.3: N != d_k, and d_k is neither sqrt(N) nor 2, so no two mistakes below give
# the same weights (where d_k = sqrt(N), as in (4, 2), dividing by d_k IS dividing by sqrt(N)).
_CASE_SHAPES = ((5, 3), (7, 5), (6, 8))


def _weight_mistakes(x: Tensor) -> tuple[Tensor, dict[str, tuple[Tensor, str]]]:
    """The right weights for tokens ``x (N, d_k)`` used as queries and keys, ``(N, N)``, and the likely mistakes."""
    (n, d_k), raw = x.shape, x @ x.mT  # raw (N, N)
    _, expected = scaled_dot_product_attention(x, x, x, return_weights=True)  # (N, N): softmax(raw / sqrt(d_k))
    mistakes = {
        "the scores are not divided by sqrt(d_k)": (torch.softmax(raw, dim=-1),
                                                    "divide the dot products by math.sqrt(d_k) before the softmax."),
        "the scores are divided by sqrt(N), the number of tokens, not sqrt(d_k)": (
            torch.softmax(raw / math.sqrt(n), dim=-1),
            "d_k is the width of a token, the last axis: d_k = x.shape[-1], not x.shape[0]."),
        "the softmax runs down the columns (dim=0)": (torch.softmax(raw / math.sqrt(d_k), dim=0),
                                                       "each query's row must sum to one: use dim=-1."),
        "the scores are divided by d_k instead of sqrt(d_k)": (torch.softmax(raw / d_k, dim=-1),
                                                               "the scale is the square root of d_k: divide by math.sqrt(d_k), not by d_k itself."),
        "there is no softmax": (raw / math.sqrt(d_k), "turn each row of scores into weights with torch.softmax(..., dim=-1)."),
    }
    if d_k != 2:  # (with d_k = 2 this one is the right answer)
        mistakes["the scores are divided by sqrt(2), the d_k of section 0.1's tokens, not this input's"] = (
            torch.softmax(raw / math.sqrt(2), dim=-1), "read d_k from the input: d_k = x.shape[-1].")
    return expected, mistakes


@checker
def check_self_attention_weights(answer: Any) -> Verdict:
    """Exercise 0: ``my_weights(x (N, d_k))``, ``softmax(x @ x.mT / sqrt(d_k))``, on three inputs with N != d_k."""
    cases = [((x,), f"for x of shape (N, d_k) = {tuple(x.shape)}", functools.partial(
        compare_tensors, expected=expected, name="your weights", likely_mistakes=mistakes))
        for x in random_cases(3, _CASE_SHAPES) for expected, mistakes in [_weight_mistakes(x)]]
    return judge_function(answer, cases, watched=LIBRARY_ATTENTION, example="my_weights(x)",
                          lines="the dot product of every row of x with every row, divided by the square root of a row's "
                                "width, then a softmax along each row of the result.",
                          success="for three inputs of other sizes (N != d_k), every row is a softmax of the dot "
                                  "products divided by sqrt(d_k), and sums to one.")
