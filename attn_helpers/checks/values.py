"""Checkers for lesson 04 (weighted values and cross-attention): ``attn @ v``, the output shape of a
cross-attention, and one output row as an explicit weighted sum. Each judge recomputes the right
answer from the exercise's inputs."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ._core import Verdict, checker, compare_tensors, correct, wrong

__all__ = ["check_weighted_values", "check_cross_attention_shape", "check_weighted_sum_row"]


@checker
def check_weighted_values(answer: Any, attn: Tensor, v: Tensor) -> Verdict:
    """Exercise: the outputs ``attn (..., N_q, N_k) @ v (..., N_k, d_v) -> (..., N_q, d_v)``."""
    expected = attn @ v  # (..., N_q, d_v)
    mistakes = {
        "you average the values without the weights": (
            v.mean(dim=-2, keepdim=True).expand_as(expected), "each query mixes the values with ITS OWN weights: "
                                                              "multiply attn @ v."),
    }
    if attn.shape[-1] == attn.shape[-2]:
        mistakes["you transpose the weights (attn.transpose(-2, -1) @ v)"] = (
            attn.transpose(-2, -1) @ v, "row i of attn holds query i's weights over the keys, exactly what "
                                        "multiplies the rows of v: use attn @ v without a transpose.")
    return compare_tensors(answer, expected, name="your output", likely_mistakes=mistakes,
                           success="out = attn @ v: one weighted average of the value rows per query.")


def _as_shape(answer: Any) -> tuple[int, ...] | None:
    if isinstance(answer, Tensor):
        return None
    try:
        shape = tuple(answer)
    except TypeError:
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        return None
    return shape


@checker
def check_cross_attention_shape(answer: Any, q: Tensor, k: Tensor, v: Tensor) -> Verdict:
    """Exercise: the shape of ``attention(q, k, v)`` for ``q (B, N_q, d_k)``, ``k (B, N_k, d_k)``,
    ``v (B, N_k, d_v)``, written as a tuple of ints."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"the exercise's inputs do not fit together: q {list(q.shape)}, k {list(k.shape)}, "
                         f"v {list(v.shape)}")
    shape = _as_shape(answer)
    if shape is None:
        return wrong(f"your answer {answer!r} is not a shape; write a tuple of ints like (2, 3, 4).",
                     "the answer is the shape itself, not a tensor: a tuple such as (B, N_q, d_v) with numbers.")
    (B, n_q, d_k), (n_k, d_v) = q.shape, v.shape[-2:]
    expected = (B, n_q, d_v)
    if shape == expected:
        return correct(f"{expected}: one output per query (N_q={n_q}), as wide as a value (d_v={d_v}).")
    mistakes = {
        (B, n_k, d_v): ("you give one output per key",
                        f"there is one output per QUERY: N_q={n_q} rows, not N_k={n_k}."),
        (B, n_q, d_k): ("your output is as wide as a query",
                        f"the outputs are averages of VALUE rows, so they are d_v={d_v} wide, not d_k={d_k}."),
        (B, n_q, n_k): ("that is the shape of the attention weights",
                        f"the weights (B, N_q, N_k) multiply v (B, N_k, d_v); N_k={n_k} cancels out."),
    }
    if shape in mistakes and shape != expected:
        cause, hint = mistakes[shape]
        return wrong(f"{shape}: {cause}.", hint)
    return wrong(f"{shape} is not the output's shape.",
                 "follow the shapes: (B, N_q, d_k) @ (B, d_k, N_k) -> (B, N_q, N_k), then @ (B, N_k, d_v).")


@checker
def check_weighted_sum_row(answer: Any, attn: Tensor, v: Tensor, query: int) -> Verdict:
    """Exercise: output row ``query`` of batch element 0 as ``sum_j attn[0, query, j] * v[0, j]``."""
    expected = attn[0, query] @ v[0]  # (d_v,)
    if isinstance(answer, Tensor) and answer.shape != expected.shape and answer.numel() == expected.numel():
        answer = answer.reshape(expected.shape)  # (1, d_v) or (d_v, 1) hold the same numbers
    return compare_tensors(
        answer, expected, name="your output row",
        likely_mistakes={
            f"you use column {query} of attn (how much every query attends to key {query})": (
                attn[0, :, query] @ v[0], f"query {query}'s weights are ROW {query}: attn[0, {query}, j] for every key j."),
            "you average the values without the weights": (
                v[0].mean(dim=0), "multiply each value row v[0, j] by its weight attn[0, i, j] before summing."),
            f"you take the value of token {query} itself": (
                v[0, query], "the output mixes ALL value rows, each with its weight; it is not one value."),
        },
        success=f"out[0, {query}] = sum over j of attn[0, {query}, j] * v[0, j], the same as row {query} of attn @ v.",
    )
