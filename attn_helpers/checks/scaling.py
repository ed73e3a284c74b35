"""Checkers for 02 · Scores and scaling: scaled scores, a raw score's variance, row entropies and how the
softmax saturates as d_k grows (a prediction)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core import attention_scores
from ..lab import attention_entropy
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong
from ._function import judge_function, random_cases
from ._guard import LIBRARY_ATTENTION, Watch
from ._predict import prediction_checker

__all__ = ["check_scaled_scores", "check_score_variance", "check_row_entropy", "check_trend_prediction"]


def _judge_scores(q: Tensor, k_t: Tensor) -> Callable[[Any], Verdict]:
    """The judge of the scores of ``q (..., N_q, d_k)`` and ``k_t (..., d_k, N_k)``."""
    d_k, n_q, n_k = q.shape[-1], q.shape[-2], k_t.shape[-1]
    raw = q @ k_t  # (..., N_q, N_k)
    mistakes = {
        "you forgot to scale": (raw, f"divide the dot products by sqrt(d_k) = sqrt({d_k})."),
        "you divided by d_k instead of sqrt(d_k)": (raw / d_k, "the scale is 1 / sqrt(d_k), not 1 / d_k."),
        f"you divided by sqrt(N_k) = sqrt({n_k}), the number of keys (k_t.shape[-1])": (
            raw / math.sqrt(n_k), "in k_t the last axis is the keys; d_k is the width of a query: q.shape[-1] "
                                  "(or k_t.shape[-2])."),
        f"you divided by sqrt(N_q) = sqrt({n_q}), the number of queries": (
            raw / math.sqrt(n_q), "d_k is the width of a query, the last axis: q.shape[-1]."),
        "you multiplied by sqrt(d_k) instead of dividing": (
            raw * math.sqrt(d_k), "the scale shrinks the scores: divide by sqrt(d_k)."),
        "you returned the scores keys-first (..., N_k, N_q)": (
            raw.mT / math.sqrt(d_k), "row i must hold query i's scores: q @ k_t, not its transpose."),
        "you returned the weights; the exercise wants the scores before the softmax": (
            torch.softmax(raw / math.sqrt(d_k), dim=-1), "leave out the softmax: the scores are what goes into it."),
        "you returned the softmax of the unscaled scores; the exercise wants the scaled scores before the softmax": (
            torch.softmax(raw, dim=-1), "leave out the softmax, and divide the product by sqrt(d_k)."),
    }
    expected = attention_scores(q, k_t.mT)  # (..., N_q, N_k): q @ k_t / sqrt(d_k)

    def judge(got: Any) -> Verdict:
        # a scale fixed in the code (a d_k left over from the lesson, a layer's scale): the product times one number
        fixed = {}
        if isinstance(got, Tensor) and got.shape == raw.shape and got.is_floating_point():
            c = float((got.double() * raw.double()).sum() / (raw.double() ** 2).sum())  # least squares: got ~ c raw
            if c > 0:
                cause = f"you scaled by a fixed {c:.4g} = 1 / sqrt({c ** -2:.4g}), where these inputs have d_k = {d_k}"
                fixed[cause] = (
                    raw * c, "take d_k from the inputs on every call, q.shape[-1]: a number written into the function "
                             "(the lesson's d_k, a layer's scale) fits inputs of that width only.")
        return compare_tensors(got, expected, name="your scores", likely_mistakes={**mistakes, **fixed})

    return judge


@checker
def check_scaled_scores(answer: Any) -> Verdict:
    """Exercise 2: ``my_scores(q, k_t)``, the scaled scores with the keys stored transposed."""
    cases = [((q, k_t), f"for q {tuple(q.shape)} and k_t {tuple(k_t.shape)}", _judge_scores(q, k_t))
             for q, k_t in (random_cases(22, [(2, 4, 6), (2, 6, 5)]), random_cases(23, [(3, 8), (8, 2)]),
                            random_cases(24, [(2, 3, 5, 4), (2, 3, 4, 7)]))]
    return judge_function(answer, cases, watched=LIBRARY_ATTENTION, example="my_scores(q, k_t)",
                          lines="k_t is already (..., d_k, N_k), so it needs no transpose; divide the product by the "
                                "square root of a query's width.",
                          success="for three sizes with d_k, N_q and N_k all different: q @ k_t / sqrt(d_k), "
                                  "with d_k the width of a query (q.shape[-1] = k_t.shape[-2]).",
                          # an axis counted from the front (IndexError: some inputs have fewer axes than the
                          # lesson's), else a product that did not line up (k_t transposed again)
                          raised=lambda problem: (
                              "some of the checker's inputs have no batch axis, q (N_q, d_k): count the axes from "
                              "the end, q.shape[-1] is d_k whatever comes in front." if isinstance(problem, IndexError)
                              else "k_t is already transposed, (..., d_k, N_k): multiply q @ k_t without .mT."))


@checker
def check_score_variance(answer: Any, d_k: int, var_q: float = 1.0, var_k: float = 1.0) -> Verdict:
    """Exercise 2: ``Var(q·k)`` for ``d_k`` independent entries of variances ``var_q``, ``var_k`` (measured too)."""
    value = as_number(answer, "the variance", hint="reduce it to a single number (e.g. .sum() over the row), or use "
                                                   ".item().")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(4096, d_k, generator=g) * math.sqrt(var_q)  # 4096 queries, entries of variance var_q
    k = torch.randn(4096, d_k, generator=g) * math.sqrt(var_k)  # 4096 keys, entries of variance var_k
    measured = (q * k).sum(dim=-1).var().item()
    product = var_q * var_k
    expected = d_k * product
    rule = (f"q·k = q_1 k_1 + ... + q_{d_k} k_{d_k}. Within one product q_i k_i the variances of the two factors "
            f"multiply (they do not add); across the {d_k} independent products the variances add up.")
    close = lambda a, b: math.isclose(a, b, rel_tol=0.02)  # noqa: E731
    if close(value, expected):
        return correct(f"Var(q·k) = d_k × {var_q:g} × {var_k:g} = {expected:g}; measured over 4096 random pairs: {measured:.1f}.")
    if close(value, math.sqrt(expected)):
        return wrong(f"{value:g} is the standard deviation, not the variance.", rule)
    if close(value, product):
        return wrong(f"{value:g} is the variance of one product q_i k_i ({var_q:g} × {var_k:g}), which is also the "
                     f"variance after dividing by sqrt(d_k): either the {d_k} products were not added up, or the "
                     f"score was scaled.", f"the question is about the raw score q·k, a sum of d_k products. {rule}")
    forgot = product != 1.0 and close(value, d_k)
    added = close(value, d_k * (var_q + var_k))
    if forgot and added:  # var_q + var_k = 1: the two mistakes give the same number
        return wrong(f"{value:g} is d_k: either the entries were taken to have variance 1, or the two variances "
                     f"{var_q:g} + {var_k:g} were added; the variance of a product multiplies them.", rule)
    if added:
        return wrong(f"{value:g} = {d_k} × ({var_q:g} + {var_k:g}): you added the two variances; the variance of a "
                     f"product of two independent entries of mean 0 multiplies them.", rule)
    if forgot:
        return wrong(f"{value:g} is d_k: right for entries of variance 1, but these entries have variances "
                     f"{var_q:g} and {var_k:g}.", rule)
    if close(value, d_k * var_q) or close(value, d_k * var_k):
        which = f"q's {var_q:g}" if close(value, d_k * var_q) else f"k's {var_k:g}"
        return wrong(f"{value:g} is d_k × {which}: only one of the two variances counted; a product has both.", rule)
    if close(value, expected * d_k):
        return wrong(f"{value:g} is d_k times too large.", rule)
    # no measurement here: a wrong answer that printed it would hand over a number to copy
    return wrong(f"{value:g} is not the variance of q·k.", rule)


TRENDS = ("rises", "falls", "stays")


@prediction_checker(choices=TRENDS)
def check_trend_prediction(choice: str, values: Sequence[float], what: str, xs: Sequence[int]) -> Verdict:
    """Prediction 2: does ``what`` rise, fall or stay (within 10%) from ``values[0]`` to ``values[-1]``?"""
    first, last = float(values[0]), float(values[-1])
    ratio = last / first if first else float("inf")
    trend = "stays" if abs(ratio - 1) < 0.1 else ("rises" if last > first else "falls")
    measured = f"{what} goes from {first:.3f} at {xs[0]} to {last:.3f} at {xs[-1]}"
    if choice == trend:
        return correct(f"{measured}.")
    return wrong(f"{measured}: it {trend}.",
                 "a larger d_k spreads the raw scores out (their variance is d_k), and the softmax of a more "
                 "spread-out row puts more of its weight on its largest entry.")


def _judge_entropy(weights: Tensor) -> Callable[[Any], Verdict]:
    """The judge of the row entropies of ``weights (..., N_k)``, some exactly 0."""
    logs = torch.log(weights)  # (..., N_k); -inf where a weight is 0
    terms = torch.where(weights > 0, weights * logs, torch.zeros(()))  # 0 * log 0 counts as 0
    expected = attention_entropy(weights)  # (...,)
    mistakes = {
        "0 * log(0) gave nan: a weight of exactly 0 was not counted as 0": (
            -(weights * logs).sum(dim=-1), "in floating point 0 * log(0) = 0 * (-inf) = nan; its limit is 0, so "
            "count those terms as 0, e.g. with torch.where(w > 0, w * torch.log(w), 0)."),
        "the minus sign is missing": (
            -expected, "log of a weight below 1 is negative: H = -sum(w * log(w)) has a minus in front."),
        "the logarithm is in base 2 (bits)": (
            expected / math.log(2), "use the natural log, torch.log: the lesson measures entropy in nats."),
        "the sum runs over every row at once": (
            expected.sum(), "one entropy per row: sum over the keys only, .sum(dim=-1)."),
        "the entropy is N_k times too small (a mean over the keys, not a sum)": (
            expected / weights.shape[-1], "sum over the keys, do not average: .sum(dim=-1)."),
    }
    if weights.shape[-1] == weights.shape[-2]:  # only then does a sum down the columns have the right shape
        mistakes["the sum runs down the columns (dim=-2), not over the keys"] = (
            -terms.sum(dim=-2), "a row of weights lies along the last axis: .sum(dim=-1).")
    return lambda got: compare_tensors(got, expected, name="your entropies", likely_mistakes=mistakes,
                                       atol=1e-4, rtol=1e-3)


#: Ready-made entropies, which count 0 * log(0) as 0 for the learner.
ENTROPY_WATCH = LIBRARY_ATTENTION | Watch({
    torch.distributions.Categorical.entropy: "torch.distributions' Categorical.entropy",
    torch.distributions.OneHotCategorical.entropy: "torch.distributions' OneHotCategorical.entropy",
    torch.special.entr: "torch.special.entr", torch.xlogy: "torch.xlogy", torch.special.xlogy: "torch.special.xlogy",
    torch.Tensor.xlogy: "PyTorch's Tensor.xlogy", torch.Tensor.xlogy_: "PyTorch's Tensor.xlogy_",
    torch.special.xlog1py: "torch.special.xlog1py",  # xlog1py(w, w - 1) is w * log(w), 0 at w = 0
    # a divergence from zero: kl_div(0, w) is w * log(w), with 0 * log(0) counted as 0
    F.kl_div: "torch.nn.functional.kl_div", torch.kl_div: "torch.kl_div",
    # a cross-entropy of w with itself is -sum(w * log(w)), log(w) clamped so that 0 * log(0) counts as 0
    F.cross_entropy: "torch.nn.functional.cross_entropy", torch.nn.CrossEntropyLoss: "torch.nn.CrossEntropyLoss",
    F.nll_loss: "torch.nn.functional.nll_loss", torch.nn.NLLLoss: "torch.nn.NLLLoss",
    # binary_cross_entropy(w, w) - (1 - w) * binary_cross_entropy(w, 0) is -w * log(w), its log clamped at -100
    F.binary_cross_entropy: "torch.nn.functional.binary_cross_entropy", torch.nn.BCELoss: "torch.nn.BCELoss",
}, packages={"scipy": "scipy's"})  # scipy.stats.entropy (on Colab scipy is installed)


@checker
def check_row_entropy(answer: Any) -> Verdict:
    """Exercise 2.4: ``my_entropy(weights (..., N_k))`` in nats, ``0 · log 0`` counted as 0."""
    cases = []
    for s in random_cases(24, [(3, 5), (4, 4), (2, 3, 6)]):  # softmax rows, about a third of the keys blocked
        blocked = torch.rand(s.shape, generator=torch.Generator().manual_seed(24)) < 0.35  # (..., N_k)
        blocked[..., 0] = False  # the first key kept
        w = torch.softmax((2 * s).masked_fill(blocked, float("-inf")), dim=-1)  # (..., N_k), some exactly 0
        cases.append(((w,), f"for weights of shape {tuple(w.shape)}, some exactly 0", _judge_entropy(w)))
    return judge_function(answer, cases, watched=ENTROPY_WATCH, example="my_entropy(weights)",
                          lines="-sum(w * log(w)) over the last axis, with the terms where w = 0 counted as 0.",
                          success="for three tables with zero weights, one entropy per row, between 0 (one-hot) "
                                  "and log(N_k) (uniform); a weight of 0 adds nothing.")
