"""Checkers for 04 · Weighted values: a cross-attention's output shape (predicted), weights putting an output at a
chosen point, and the whole scaled dot-product attention written as a function."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..core import causal_mask, scaled_dot_product_attention
from ._core import Verdict, as_shape, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import LIBRARY_ATTENTION
from ._predict import prediction_checker

__all__ = ["check_attention_function", "check_midpoint_weights", "check_output_shape_prediction"]


@prediction_checker
def check_output_shape_prediction(prediction: Any, q: Tensor, k: Tensor, v: Tensor) -> Verdict:
    """Prediction 4: the shape of ``attention(q, k, v)``."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"the exercise's inputs do not fit together: q {list(q.shape)}, k {list(k.shape)}, "
                         f"v {list(v.shape)}")
    shape = tuple(as_shape(prediction, "your answer", hint="the answer is the shape itself, not a tensor: a tuple "
                                                           "such as (B, N_q, d_v) with numbers."))
    (B, n_q, d_k), (n_k, d_v) = q.shape, v.shape[-2:]
    expected = (B, n_q, d_v)
    if shape == expected:
        return correct(f"{expected}: one output per query (N_q={n_q}), as wide as a value (d_v={d_v}).")
    mistakes = {  # shape -> (cause, hint)
        (B, n_k, d_v): ("you give one output per key",
                        f"there is one output per QUERY: N_q={n_q} rows, not N_k={n_k}."),
        (B, n_q, d_k): ("your output is as wide as a query",
                        f"the outputs are averages of VALUE rows, so they are d_v={d_v} wide, not d_k={d_k}."),
        (B, n_q, n_k): ("that is the shape of the attention weights",
                        f"the weights (B, N_q, N_k) multiply v (B, N_k, d_v); N_k={n_k} cancels out."),
    }
    if shape in mistakes:
        cause, hint = mistakes[shape]
        return wrong(f"{shape}: {cause}.", hint)
    return wrong(f"{shape} is not the output's shape.",
                 "follow the shapes: (B, N_q, d_k) @ (B, d_k, N_k) -> (B, N_q, N_k), then @ (B, N_k, d_v).")


@checker
def check_midpoint_weights(answer: Any, v: Tensor, i: int, j: int) -> Verdict:
    """Exercise 4: softmax-like weights ``(N_k,)`` putting ``weights @ v`` at the midpoint of values ``i`` and ``j``."""
    if not isinstance(answer, Tensor):
        try:
            answer = torch.as_tensor(answer, dtype=v.dtype)
        except Exception:
            return wrong(f"your answer is a {type(answer).__name__}, not a tensor of weights.",
                         "build it with torch.zeros(N_k) and set two of its entries.")
    answer = answer.detach().to(v.dtype)
    if answer.shape != v.shape[:1]:
        return wrong(f"your weights have shape {list(answer.shape)}, expected {list(v.shape[:1])}: one weight per key.",
                     "a query's weights are one row: one number per key.")
    if bool((answer < -1e-6).any()):
        return wrong("some of your weights are negative; a softmax never gives a negative weight.",
                     "every weight must be >= 0, so the output stays inside the values' convex hull.")
    total = answer.sum().item()
    if not math.isclose(total, 1.0, abs_tol=1e-4):
        return wrong(f"your weights sum to {total:.6g}, not 1 (to within 1e-4).", "softmax weights always sum to one.")
    target = (v[i] + v[j]) / 2  # (d_v,)
    got = answer @ v  # (d_v,)
    if torch.allclose(got, target, atol=1e-4, rtol=1e-4):
        return correct(f"weights @ v = {[round(x, 3) for x in got.tolist()]}: halfway between value {i} and value {j}.")
    cause, hint = _midpoint_mistake(answer, i, j)
    return wrong(f"weights @ v = {[round(x, 3) for x in got.tolist()]}, not the midpoint "
                 f"{[round(x, 3) for x in target.tolist()]}: {cause}", hint)


def _midpoint_mistake(weights: Tensor, i: int, j: int) -> tuple[str, str]:
    """What is wrong with ``weights (N_k,)`` whose output misses the midpoint, and a hint that does not give it away."""
    used = [key for key in range(len(weights)) if weights[key].item() > 1e-6]  # the keys that get weight
    if torch.allclose(weights, torch.full_like(weights, 1 / len(weights)), atol=1e-4):
        return ("equal weights on every key give the mean of ALL the values.",
                f"only values {i} and {j} may count: every other key needs weight 0.")
    if len(used) == 1 and used[0] in (i, j):
        return (f"all the weight on key {used[0]} gives value {used[0]} itself, one end of the segment.",
                "a point between two values needs weight on both of them.")
    if set(used) == {i, j}:
        return (f"keys {i} and {j} get {weights[i].item():.3g} and {weights[j].item():.3g}: the output lies "
                "between their values, nearer the one with more weight.",
                "halfway means both values count equally.")
    others = [key for key in used if key not in (i, j)]
    one = len(others) == 1
    named = f"key {others[0]} gets" if one else "keys " + ", ".join(map(str, others)) + " get"
    values = "its value" if one else "their values"
    if {i, j} <= set(used):
        return (f"{named} weight too, and {values} {'pulls' if one else 'pull'} the output away.",
                "give every key other than the two named weight 0.")
    if set(used) in ({i - 1, j - 1}, {i + 1, j + 1}):
        return (f"the weight is on keys {used[0]} and {used[1]}, one place off.",
                f"keys are counted from 0: the two named values are rows {i} and {j} of v.")
    return (f"{named} weight, but {values} {'is' if one else 'are'} not among the two named.",
            "weight only the keys whose values the midpoint lies between.")


LESSON_D_K = 8  # lesson 04's d_k: its section 4.2 lines, pasted with the notebook's d_k, divide by sqrt(8)


def _judge_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Any:
    d_k = q.shape[-1]
    raw = q @ k.mT  # (..., N_q, N_k)
    fill = (lambda s: s) if mask is None else (lambda s: s.masked_fill(~mask, float("-inf")))
    expected = scaled_dot_product_attention(q, k, v, mask)
    mistakes = {
        "the scores are not divided by sqrt(d_k)": (
            torch.softmax(fill(raw), dim=-1) @ v, f"divide q @ k.mT by math.sqrt(d_k), with d_k = q.shape[-1] ({d_k} here)."),
        "the scores are divided by d_k, not sqrt(d_k)": (
            torch.softmax(fill(raw / d_k), dim=-1) @ v, "the scale is 1 / sqrt(d_k)."),
        "the softmax runs over the queries (dim=-2)": (
            torch.softmax(fill(raw / math.sqrt(d_k)), dim=-2) @ v, "each query's weights over the keys sum to one: dim=-1."),
        "it returns the weights, not weights @ v": (
            torch.softmax(fill(raw / math.sqrt(d_k)), dim=-1), "finish with weights @ v."),
    }
    # a count of tokens instead of d_k; when N_q = N_k (self-attention) the two give the same numbers: both named
    tokens = {f"the number of queries, q.shape[-2] = {q.shape[-2]}": q.shape[-2],
              f"the number of keys, k.shape[-2] = {k.shape[-2]}": k.shape[-2]}
    if q.shape[-2] == k.shape[-2]:
        tokens = {f"the number of tokens, q.shape[-2] = k.shape[-2] = {q.shape[-2]}": q.shape[-2]}
    for name, n in tokens.items():
        mistakes[f"the scores are divided by the square root of {name}, not of d_k"] = (
            torch.softmax(fill(raw / math.sqrt(n)), dim=-1) @ v,
            f"d_k is the width of a query and of a key, the LAST axis: q.shape[-1] ({d_k} here), not axis -2.")
    if d_k != LESSON_D_K:
        cause = f"the scores are divided by sqrt({LESSON_D_K}), the lesson's d_k, where these inputs have d_k = {d_k}"
        mistakes[cause] = (
            torch.softmax(fill(raw / math.sqrt(LESSON_D_K)), dim=-1) @ v,
            f"take d_k from the inputs on every call, q.shape[-1]: the lesson's d_k = {LESSON_D_K} fits inputs of that "
            "width only.")
    if v.shape[-1] != d_k:
        mistakes[f"the scores are divided by sqrt(d_v) = sqrt({v.shape[-1]}), not sqrt(d_k)"] = (
            torch.softmax(fill(raw / math.sqrt(v.shape[-1])), dim=-1) @ v,
            f"the scale belongs to the dot products q @ k.mT, whose width is d_k = q.shape[-1] ({d_k} here).")
    if mask is not None:
        mistakes["the mask is ignored"] = (
            torch.softmax(raw / math.sqrt(d_k), dim=-1) @ v, "apply the mask before the softmax: "
            "scores.masked_fill(~mask, float('-inf')) blocks the keys where mask is False.")
        mistakes["the mask is read as True = blocked"] = (
            torch.softmax((raw / math.sqrt(d_k)).masked_fill(mask, float("-inf")), dim=-1) @ v,
            "this mask says True = may attend: block where it is "
            "False, scores.masked_fill(~mask, float('-inf')).")
        mistakes["the weights are multiplied by the mask after the softmax, so the rows no longer sum to one"] = (
            (torch.softmax(raw / math.sqrt(d_k), dim=-1) * mask) @ v,
            "block the keys before the softmax, scores.masked_fill(~mask, float('-inf')): the softmax then shares "
            "each row's weight among the keys left.")
        # reader z00: zeroing the blocked scores (masked_fill with 0, or scores * mask) got the generic hint
        mistakes["the blocked scores are set to 0 (masked_fill with 0, or scores * mask), not to -inf"] = (
            torch.softmax((raw / math.sqrt(d_k)).masked_fill(~mask, 0.0), dim=-1) @ v,
            "a score of 0 still gets exp(0) = 1 in the softmax, so a blocked key keeps its share: fill with "
            "float('-inf'), whose exp is 0: scores.masked_fill(~mask, float('-inf')).")
        mistakes["the boolean mask is added to the scores"] = (
            torch.softmax(raw / math.sqrt(d_k) + mask, dim=-1) @ v,
            "adding True/False adds 1/0 and blocks nothing (section 3a.5): "
            "scores.masked_fill(~mask, float('-inf')).")

    def judge(got: Any) -> Verdict:
        if isinstance(got, tuple):
            return wrong(f"your function returns a tuple of {len(got)}; return only the output.",
                         "the output is weights @ v, shape (..., N_q, d_v).")
        return compare_tensors(got, expected, name="your output", likely_mistakes=mistakes)

    return judge


@checker
def check_attention_function(answer: Any) -> Verdict:
    """Exercise 4: ``my_attention(q, k, v, mask=None)``, ``softmax(q @ k^T / sqrt(d_k)) @ v``, masked if given."""
    g = torch.Generator().manual_seed(4)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    cases = [("self-attention, q, k, v of shape (2, 5, 8)", (r(2, 5, 8), r(2, 5, 8), r(2, 5, 8))),
             ("cross-attention, q (2, 3, 8), k (2, 6, 8), v (2, 6, 4)", (r(2, 3, 8), r(2, 6, 8), r(2, 6, 4))),
             ("with a heads axis, q, k, v of shape (2, 3, 5, 16)", (r(2, 3, 5, 16), r(2, 3, 5, 16), r(2, 3, 5, 16))),
             ("with a causal keep mask (True = may attend)", (r(2, 5, 8), r(2, 5, 8), r(2, 5, 8), causal_mask(5)))]
    return judge_function(answer, [(args, what, _judge_attention(*args)) for what, args in cases],
                          watched=LIBRARY_ATTENTION,
                          example="my_attention(q, k, v, mask=None)",
                          lines="scores = q @ k.mT / sqrt(d_k), the mask, a softmax over the keys, then weights @ v "
                                "(section 4.2, for every query at once).",
                          refusal="the library's own attention",
                          raised=lambda problem: (
                              "the shapes did not fit: swap only the last two axes of k, with k.mT or "
                              "k.transpose(-2, -1) (k.T reverses every axis, and k.transpose(1, 2) counts from the "
                              "front, where a heads axis sits)." if any(words in str(problem) for words in (
                                  "size of tensor", "mat1 and mat2", "must match")) else
                              "run your function on these shapes yourself and follow the shapes step by step."),
                          is_="your function is {}, {}: the exercise asks you to write the steps yourself.",
                          calls="your function calls {}, {}: the exercise asks you to write the steps yourself.",
                          success="on self-attention, cross-attention, a heads axis and a causal mask, your function "
                                  "gives attn_helpers' output: softmax(q @ k.mT / sqrt(d_k), masked) @ v.")
