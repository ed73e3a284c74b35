"""Checkers for 12 · Attention in today's models: a decoding step's sliding-window mask, the softmax with a
sink per head, ALiBi's bias and soft-capping (a prediction); the library's steps and ``transformers`` refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core import alibi_bias, alibi_slopes, sliding_window_mask, softmax_with_sinks
from ._core import Verdict, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import TRANSFORMERS, library
from .masking import boolean_mask_judge
from ._predict import measure_now, prediction_checker

__all__ = ["check_cache_window_mask", "check_sink_softmax", "check_alibi", "check_softcap_prediction"]

_TODAY_LIBRARY = library(("sliding_window_mask", "softmax_with_sinks", "alibi_bias", "alibi_slopes", "attend",
                          "scaled_dot_product_attention", "grouped_query_attention", "GroupedQueryAttention",
                          "weights_after_steps", "window_reach")) | TRANSFORMERS


def _judge_cache_window(n_q: int, n_k: int, window: int) -> Callable[[Any], Verdict]:
    """The judge of the keep mask of the newest ``n_q`` queries against ``n_k`` cached keys."""
    i = torch.arange(n_k - n_q, n_k)[:, None]  # (n_q, 1): the queries' positions
    j = torch.arange(n_k)[None, :]  # (1, n_k): the keys' positions
    keep = lambda width, rows=i: (j <= rows) & (j > rows - width)  # noqa: E731  (n_q, n_k)
    expected = keep(window)
    mistakes = {
        "your queries sit at positions 0, 1, ... (the top-left alignment of sliding_window_mask and causal_mask)": (
            keep(window, torch.arange(n_q)[:, None]),
            f"the queries are the newest tokens: query row r sits at position n_k - n_q + r = {n_k - n_q} + r."),
        "your queries sit one place too late, at n_k - n_q + 1 ... n_k": (
            keep(window, i + 1), f"the newest query is the newest key, position n_k - 1: query row r sits at "
                                 f"{n_k - n_q} + r."),
        "you built the 'True = blocked' mask": (~expected, "this lesson's masks say True = may attend."),
        "you let each query see window + 1 keys": (keep(window + 1), "the window holds `window` keys counting the "
                                                                     "query's own: keep j > i - window."),
        "you kept only the causal part (no window)": (j <= i, "also drop the keys window or more places back."),
        "you kept keys to the right of the query (no j <= i)": (
            j > i - window, "a causal window also hides every key after the query's own position: j <= i."),
        "every row has the last query's window": (
            keep(window, torch.full_like(i, n_k - 1)), "row r is the query at position n_k - n_q + r: each row its "
                                                        "own window."),
    }
    if window > 1:
        mistakes["you let each query see window - 1 keys"] = (keep(window - 1), "keep i - window < j <= i: "
                                                                                "`window` keys with the query's own.")

    return boolean_mask_judge(expected, mistakes, needs="the mask should be boolean (True = may attend)",
                              example="j <= i")


@checker
def check_cache_window_mask(answer: Any) -> Verdict:
    """Exercise 12: ``window_mask(n_q, n_k, window)``, the newest ``n_q`` tokens' ``(n_q, n_k)`` keep mask."""
    cases = [((n_q, n_k, w), f"for n_q = {n_q}, n_k = {n_k}, window = {w}", _judge_cache_window(n_q, n_k, w))
             # a prefill first: with one query, queries one place too late keep what window - 1 keys keep
             for n_q, n_k, w in ((3, 11, 5), (1, 9, 4), (5, 5, 2), (2, 6, 20))]
    return judge_function(answer, cases, watched=_TODAY_LIBRARY, example="window_mask(n_q, n_k, window)",
                          lines="place the queries at the newest positions, n_k - n_q ... n_k - 1, the keys at "
                                "0 ... n_k - 1, and keep key j for query i when i - window < j <= i.",
                          success="for a prefill, one query, a square mask and a window longer than the cache: each "
                                  "new token keeps itself and the window - 1 keys before it.")


def _judge_sinks(scores: Tensor, sinks: Tensor) -> Callable[[Any], Verdict]:
    expected = softmax_with_sinks(scores, sinks)  # (B, H, N_q, N_k)
    finite = scores.masked_fill(torch.isneginf(scores), -1e30)  # (B, H, N_q, N_k): no -inf, for the variants
    mistakes = {
        "your rows sum to one, as a plain softmax's (no sink, or the rows normalised again after dropping it)": (
            torch.softmax(scores, dim=-1), "add exp(sinks[h]) to each row's denominator of head h, and keep the rows "
                                           "summing to less than one."),
        "you added sinks[h] itself to the denominator, not exp(sinks[h])": (
            torch.exp(finite) / (sinks[:, None, None] + torch.exp(finite).sum(-1, keepdim=True)),
            "the sink is a logit like the scores: it enters the softmax as exp(sinks[h])."),
        "you gave every head the first head's sink": (
            softmax_with_sinks(scores, sinks[:1].expand_as(sinks)), "one logit per head: sinks[h] for head h "
                                                                    "(heads are axis -3 of the scores)."),
        "you put the sink's column first and then dropped the last column, a real key's": (
            torch.softmax(torch.cat([sinks[:, None, None].expand(*scores.shape[:-1], 1), scores], dim=-1), dim=-1)[..., :-1],
            "drop the sink's own column: weights[..., 1:] when it is first, weights[..., :-1] when it is last."),
        "you put the sinks along the query axis (sinks[:, None] against (..., N_q, N_k) rows)": (
            torch.exp(finite) / (torch.exp(sinks)[None, None, :, None] + torch.exp(finite).sum(-1, keepdim=True))
            if scores.shape[-2] == sinks.shape[0] else scores, "heads are axis -3: sinks[:, None, None] reaches "
                                                               "(H, N_q, 1)."),
    }

    def judge(got: Any) -> Verdict:
        if isinstance(got, Tensor) and got.shape[:-1] == scores.shape[:-1] and got.shape[-1] == scores.shape[-1] + 1:
            return wrong(f"your weights have shape {list(got.shape)}: the sink's column is still there.",
                         "drop it after the softmax: weights[..., :-1].")
        if isinstance(got, Tensor) and got.shape == scores.shape and torch.isnan(got).any():
            return wrong("your weights hold NaN in the row whose every key is masked (-inf).",
                         "subtracting a row's max does that when the max is -inf; with a finite sink the row's "
                         "softmax is defined: concatenate the sink column and use torch.softmax, or exp directly.")
        return compare_tensors(got, expected, name="your result", likely_mistakes=mistakes, atol=1e-6, rtol=1e-6)

    return judge


@checker
def check_sink_softmax(answer: Any) -> Verdict:
    """Exercise 12: ``sink_softmax(scores (B, H, N_q, N_k), sinks (H,))``, with one more logit per head, dropped."""
    g = torch.Generator().manual_seed(121)
    cases = []
    for shape, H in (((2, 3, 4, 6), 3), ((1, 5, 3, 3), 5), ((3, 2, 5, 7), 2)):
        scores = torch.randn(*shape, generator=g, dtype=torch.float64) * 2.0  # (B, H, N_q, N_k)
        sinks = torch.randn(H, generator=g, dtype=torch.float64) * 1.5  # (H,)
        cases.append(((scores, sinks), f"for scores (B, H, N_q, N_k) = {tuple(shape)} and sinks ({H},)",
                      _judge_sinks(scores, sinks)))
    scores = scores.clone()
    scores[0, 1, 2] = float("-inf")  # one row with every key masked
    scores[1, 0, 3, 4:] = float("-inf")  # and one with some keys masked
    cases.append(((scores, sinks), "for scores with masked keys (-inf), one row masked whole", _judge_sinks(scores, sinks)))
    return judge_function(answer, cases, watched=_TODAY_LIBRARY, example="sink_softmax(scores, sinks)",
                          lines="give every row of head h one more logit, sinks[h], take the softmax over the keys "
                                "and that logit, then drop the sink's weight.",
                          raised="sinks has shape (H,): to line up with the heads axis of scores (B, H, N_q, N_k) "
                                 "it must become (H, 1, 1); a trailing axis added to (H,) lines H up with N_q.",
                          success="on three sizes and on masked rows: each row's weights are exp(score) / "
                                  "(exp(sink) + Σ exp(scores)), summing to less than one, and a fully masked "
                                  "row is all zeros.")


def _judge_alibi(num_heads: int, n: int) -> Callable[[Any], Verdict]:
    expected = alibi_bias(num_heads, n)  # (H, n, n)
    i, j = torch.arange(n, dtype=torch.float64)[:, None], torch.arange(n, dtype=torch.float64)[None, :]
    slopes = alibi_slopes(num_heads)[:, None, None]  # (H, 1, 1)
    from_zero = (2.0 ** (-8.0 * torch.arange(num_heads, dtype=torch.float64) / num_heads))[:, None, None]
    mistakes = {
        "the sign is flipped: keys further back get a larger score": (
            slopes * (i - j), "a key d places back loses slope * d: the bias is -slope * (i - j)."),
        "this is Bloom's slope * j: equal after a causal softmax, but not the bias itself": (
            slopes * j.expand(n, n), "write the bias as the paper does, -slope * (i - j); Bloom's form differs from "
                                     "it by slope * i, the same for a whole row."),
        "you used |i - j|: the same under a causal mask, but keys to the right should get +slope * (j - i)": (
            -slopes * (i - j).abs(), "write -slope * (i - j) for every i and j; the causal mask removes j > i "
                                     "later."),
        "your slopes start at 2^0 = 1 (h counted from 0)": (
            -from_zero * (i - j), "head h (from 0) has slope 2 ** (-8 * (h + 1) / num_heads): the first is "
                                  "2 ** (-8 / num_heads), not 1."),
        "your slopes are in reverse order": (
            -slopes.flip(0) * (i - j), "head 0 has the largest slope, 2 ** (-8 / num_heads)."),
        "your slopes are those of 8 heads, 2^-(h+1), whatever num_heads is": (
            -(2.0 ** -(torch.arange(num_heads, dtype=torch.float64) + 1))[:, None, None] * (i - j),
            "the exponent is -8 (h + 1) / num_heads: 8 heads give 1/2 ... 1/256, 4 heads 1/4 ... 1/256."),
        "the exponent is rounded down (// instead of /)": (
            -(2.0 ** -((8 * (torch.arange(num_heads) + 1)) // num_heads).to(torch.float64))[:, None, None] * (i - j),
            "divide with /, not //: for 16 heads the slopes are 2^-0.5, 2^-1, 2^-1.5, ..."),
        "the keys to the right of the query got 0 (the distance clamped)": (
            -slopes * (i - j).clamp_min(0), "write -slope (i - j) for every i and j, also where j > i; the causal "
                                            "mask removes those keys later."),
    }

    def judge(got: Any) -> Verdict:
        if isinstance(got, Tensor) and got.is_floating_point() and torch.isinf(got).any():
            return wrong("your bias holds -inf: that is the causal mask.",
                         "leave the mask out: the exercise asks for -slope (i - j) for every i and j, and the model "
                         "adds the mask separately.")
        return compare_tensors(got, expected, name="your bias", likely_mistakes=mistakes, atol=1e-6,
                               rtol=1e-6)  # a float32 answer is right

    return judge


@checker
def check_alibi(answer: Any) -> Verdict:
    """Exercise 12: ``alibi(num_heads, n)``, ALiBi's ``(num_heads, n, n)`` bias for a power-of-two head count."""
    cases = [((h, n), f"for num_heads = {h}, n = {n}", _judge_alibi(h, n)) for h, n in ((4, 5), (2, 9), (16, 3))]
    return judge_function(answer, cases, watched=_TODAY_LIBRARY, example="alibi(num_heads, n)",
                          refusal="which the exercise asks you to write yourself",
                          lines="turn Press et al.'s rule for the slopes (section 12.5) into head h's slope, and give "
                                "query i and key j -slope (i - j): one (n, n) matrix per head. (Bloom's "
                                "build_alibi_tensor adds slope · j instead, which differs by slope · i in each row: "
                                "section 12.5.1.)",
                          success="for 2, 4 and 16 heads: zero on the diagonal, -slope_h for the key one place back, "
                                  "each head its own slope.")


@prediction_checker(choices=("units", "tens", "both", "neither"))
def check_softcap_prediction(choice: str, change_units: float | Callable[[], float],
                             change_tens: float | Callable[[], float], cap: float) -> Verdict:
    """Prediction 12: does a soft cap change the weights (by more than 0.05) of scores of ``"units"``,
    ``"tens"``, ``"both"`` or ``"neither"``? Each change may be a function that measures it (:func:`measure_now`)."""
    change_units, change_tens = measure_now(change_units), measure_now(change_tens)
    units, tens = change_units > 0.05, change_tens > 0.05
    happened = {(False, True): "tens", (True, True): "both", (True, False): "units", (False, False): "neither"}[
        (units, tens)]
    measured = (f"the largest change of a weight: {change_units:.3f} for scores of a few units, {change_tens:.2f} "
                f"for scores of tens")
    if choice == happened:
        return correct(f"{measured}. tanh(t) ≈ t while |t| is well below 1, so {cap:g}·tanh(s/{cap:g}) ≈ s for "
                       f"scores well below {cap:g}; near and above it they are squashed.")
    return wrong(f"not what was measured ({measured}).",
                 f"compare {cap:g}·tanh(s/{cap:g}) with s for s = 2 and for s = 20: tanh(t) ≈ t only while t is "
                 "small.")
