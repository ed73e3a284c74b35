"""Checkers for 02 · Scores and scaling: scaled scores, the variance of raw scores, a row's entropy."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..attention import attention_entropy
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong

__all__ = ["check_scaled_scores", "check_score_variance", "check_row_entropy"]


@checker
def check_scaled_scores(answer: Any, q: Tensor, k: Tensor) -> Verdict:
    """Exercise: ``q @ k^T / sqrt(d_k)`` for ``q (..., N_q, d_k)`` and ``k (..., N_k, d_k)``."""
    d_k = q.shape[-1]
    raw = q @ k.transpose(-2, -1)  # (..., N_q, N_k)
    mistakes = {
        "you forgot to scale": (raw, f"divide the dot products by sqrt(d_k) = sqrt({d_k}) = {math.sqrt(d_k):.3f}."),
        "you divided by d_k instead of sqrt(d_k)": (
            raw / d_k, f"the scale is 1 / sqrt(d_k) = {d_k ** -0.5:.3f}, not 1 / d_k = {1 / d_k:.3f}."),
        "you multiplied by sqrt(d_k) instead of dividing": (
            raw * math.sqrt(d_k), "the scale shrinks the scores: multiply by d_k ** -0.5 (or divide by sqrt(d_k))."),
        "you swapped q and k (k @ q^T: rows are keys, not queries)": (
            raw.transpose(-2, -1) * d_k ** -0.5,  # (..., N_k, N_q)
            "row i must hold query i's scores: q comes first, q @ k.transpose(-2, -1)."),
    }
    if q.shape[-2] == k.shape[-2]:  # only then does q.transpose(-2, -1) @ k run at all
        features = q.transpose(-2, -1) @ k  # (..., d_k, d_k): the transpose on the wrong operand
        mistakes["you transposed q instead of k (q.transpose(-2, -1) @ k)"] = (
            features * d_k ** -0.5, "that gives a d_k × d_k matrix of features; transpose k: q @ k.transpose(-2, -1).")
        mistakes["you transposed q instead of k, and did not scale"] = (
            features, "transpose k, not q: q @ k.transpose(-2, -1), then divide by sqrt(d_k).")
    return compare_tensors(answer, raw * d_k ** -0.5, name="your scores", likely_mistakes=mistakes,
                           success=f"shape {list(raw.shape)}: every query's dot product with every key, / sqrt({d_k}).")


def _as_number(answer: Any, what: str) -> float | Verdict:
    return as_number(answer, what, hint="reduce it to a single number (e.g. .sum() over the row), or use .item().")


@checker
def check_score_variance(answer: Any, d_k: int) -> Verdict:
    """Exercise: the variance of an unscaled score ``q . k`` when q and k have ``d_k`` independent
    entries of mean 0 and variance 1. The right answer is ``d_k``; the verdict also measures it."""
    value = _as_number(answer, "the variance")
    if isinstance(value, Verdict):
        return value
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4096, d_k, generator=g).unbind(0)  # 4096 pairs of vectors
    measured = (q * k).sum(dim=-1).var().item()
    if math.isclose(value, d_k, rel_tol=0.02):
        return correct(f"Var(q·k) = d_k = {d_k} (a sum of {d_k} products, each of variance 1); "
                       f"measured over 4096 random pairs: {measured:.1f}.")
    if math.isclose(value, math.sqrt(d_k), rel_tol=0.02):
        return wrong(f"{value:g} is sqrt(d_k): the standard deviation, not the variance.",
                     "variances of independent terms add up: d_k terms of variance 1 give d_k.")
    if math.isclose(value, 1.0, rel_tol=0.02):
        return wrong("1 is the variance after dividing by sqrt(d_k).",
                     f"the question is about the raw score q·k, a sum of {d_k} independent products of variance 1.")
    if math.isclose(value, d_k ** 2, rel_tol=0.02):
        return wrong(f"{value:g} is d_k squared.", "variances of independent terms add up: d_k terms of variance 1 give d_k.")
    return wrong(f"{value:g} is not the variance of q·k (measured over 4096 random pairs: {measured:.1f}).",
                 "q·k is a sum of d_k independent products, each of variance 1 × 1 = 1.")


@checker
def check_row_entropy(answer: Any, weights: Tensor) -> Verdict:
    """Exercise: the entropy (nats) of one row of attention weights ``(N_k,)``."""
    value = _as_number(answer, "the entropy")
    if isinstance(value, Verdict):
        return value
    expected = attention_entropy(weights).item()
    n = weights.shape[-1]
    close = lambda a, b: math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-4)  # noqa: E731
    if close(value, expected):
        return correct(f"H = {expected:.3f} nats, between 0 (one-hot) and log({n}) = {math.log(n):.3f} (uniform).")
    if close(value, -expected):
        return wrong(f"{value:.3f} is the entropy with the wrong sign.",
                     "log of a weight below 1 is negative: H = -sum(w * log(w)) has a minus in front.")
    if close(value, expected / math.log(2)):
        return wrong(f"{value:.3f} is the entropy in bits (log base 2).",
                     "use the natural log, torch.log: the lesson measures entropy in nats.")
    if close(value, math.log(n)):
        return wrong(f"{value:.3f} is log(N_k) = log({n}), the entropy of uniform weights.",
                     "compute it from this row's weights: -sum(w * log(w)).")
    if close(value, -torch.log(weights).sum().item()):
        return wrong(f"{value:.3f} is -sum(log(w)): each log needs its weight in front.",
                     "H = -sum(w * log(w)).")
    return wrong(f"{value:.3f} is not this row's entropy.", "H = -sum(w * log(w)), summed over the keys of the row.")
