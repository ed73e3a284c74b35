"""Checkers for 03 · Softmax and masks and 03a · Mask conventions: a padding keep mask, the softmax axis,
a fully masked row, which convention a function reads, a blocked causal window, a boolean mask made additive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core import causal_mask, mask_to_additive, padding_mask
from ._core import Verdict, checker, compare_tensors, correct, wrong
from ._function import judge_function, random_cases
from ._guard import LIBRARY_ATTENTION, Watch, library
from ._predict import prediction_checker

__all__ = ["check_additive_mask", "check_window_blocked_mask", "check_convention_prediction", "check_masked_row_prediction",
           "check_padding_keep_mask", "check_softmax_axis"]


def _judge_window(n: int, window: int) -> Callable[[Any], Verdict]:
    """The judge of the ``(n, n)`` blocked mask that lets query i see keys ``i - window < j <= i`` only."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]  # (n, 1) queries, (1, n) keys
    window_of = lambda width: (j > i) | (j <= i - width)  # noqa: E731  (n, n): True = blocked
    expected = window_of(window)
    mistakes = {
        "you built the 'True = keep' mask (what scaled_dot_product_attention wants)": (
            ~expected, "masked_fill writes -inf where the mask is True: True must mark the keys a query may NOT see."),
        "you blocked only the future (a plain causal mask, no window)": (
            j > i, "also block the keys window or more places back: j <= i - window."),
        "you let each query see window + 1 keys (itself and window keys before it)": (
            window_of(window + 1), "a query sees window keys, its own included: block j <= i - window."),
        "you also blocked the query's own key": (
            (j >= i) | (j <= i - window), "a token may attend to itself: keep j == i visible."),
        "you let each query see the next window - 1 keys as well (a band, not a causal window)": (
            (j - i).abs() >= window, "a causal window hides every future key: block j > i too."),
        "you blocked only the keys too far back, and every future key stays visible": (
            j <= i - window, "a causal window is also causal: block the future, j > i, as well."),
        "you blocked only the keys more than window places back (window + 1 keys), and every future key stays visible": (
            j < i - window, "a causal window is also causal: block the future, j > i, as well; and a query sees "
                            "window keys, its own included."),
        "you let each query see the window keys before it but not itself": (
            (j >= i) | (j < i - window), "a token may attend to itself: the keys it sees are i - window < j <= i, "
                                         "the query's own key included."),
        "you let each query see window keys on either side (a band, not a causal window)": (
            (j - i).abs() > window, "a causal window hides every future key: block j > i too."),
        "you swapped the query and key axes (the mask is transposed)": (
            expected.mT, "rows are queries, columns keys: i = torch.arange(n)[:, None], j = torch.arange(n)[None, :]."),
    }
    if window > 1:
        mistakes["you let each query see window - 1 keys"] = (
            window_of(window - 1), "a query sees window keys, its own included: keep i - window < j <= i.")
        mistakes["you blocked only the keys window - 1 or more places back (window - 1 keys), and every future key "
                 "stays visible"] = (
            j <= i - window + 1, "a causal window is also causal: block the future, j > i, as well; and a query "
                                 "sees window keys, its own included.")

    return boolean_mask_judge(expected, mistakes, needs="masked_fill needs a boolean mask", example="j > i")


def boolean_mask_judge(expected: Tensor, mistakes: dict[str, tuple[Tensor, str]], *, needs: str,
                       example: str) -> Callable[[Any], Verdict]:
    """A boolean mask's judge: a non-boolean answer is told ``needs`` (``example`` gives booleans)."""
    def judge(got: Any) -> Verdict:
        if isinstance(got, Tensor) and got.dtype != torch.bool:
            return wrong(f"your function returns dtype {got.dtype}; {needs}.",
                         f"a comparison such as {example} gives booleans directly.")
        return compare_tensors(got, expected, name="your mask", likely_mistakes=mistakes)

    return judge


@checker
def check_window_blocked_mask(answer: Any) -> Verdict:
    """Exercise 3a: ``my_window_mask(n, window)``, the "True = blocked" ``(n, n)`` mask keeping ``i - window < j <= i``."""
    cases = [((n, window), f"for n = {n}, window = {window}", _judge_window(n, window))
             for n, window in ((12, 3), (9, 1), (7, 10))]
    return judge_function(answer, cases, watched=library(("sliding_window_mask",)),
                          example="my_window_mask(n, window)",
                          lines="with i = torch.arange(n)[:, None] and j = torch.arange(n)[None, :], block "
                                "(j > i) | (j <= i - window).",
                          success="for three sizes and windows, True on every future key and on every key window "
                                  "or more places back, False on the window keys a query may see.")


def _judge_axis(scores_t: Tensor) -> Callable[[Any], Verdict]:
    """The judge of weights for keys-first ``scores_t (..., N_k, N_q)``: a softmax over axis -2."""
    expected = torch.softmax(scores_t, dim=-2)  # (..., N_k, N_q): each column (one query) sums to one
    mistakes: dict[str, tuple[Tensor, str]] = {
        "you normalised over the last axis (dim=-1), which here is the queries": (
            torch.softmax(scores_t, dim=-1), "in this layout the keys are axis -2: one query's weights are a "
                                             "column, so softmax(dim=-2)."),
        "you returned the weights queries-first, (..., N_q, N_k)": (
            expected.mT, "keep the layout of the input, (..., N_k, N_q): a softmax over dim=-2 needs no transpose; "
                         "if you transposed to take it over the last axis, transpose the weights back."),
        "you forgot the softmax": (scores_t, "apply torch.softmax over the keys to turn scores into weights."),
    }
    for d in range(scores_t.ndim - 2):  # the batch-like axes in front, e.g. batch and heads
        mistakes[f"you normalised over axis {d} (a batch or head axis) instead of the keys"] = (
            torch.softmax(scores_t, dim=d), f"dim={d} mixes different sentences or heads; count from the end: "
                                            "dim=-2 is the keys here, whatever comes in front.")
    return lambda got: compare_tensors(got, expected, name="your weights", likely_mistakes=mistakes)


@checker
def check_softmax_axis(answer: Any) -> Verdict:
    """Exercise 3: ``my_weights(scores_t (..., N_k, N_q))``, the weights in the same layout."""
    cases = [((scores_t,), f"for scores_t of shape {axes} = {tuple(scores_t.shape)}", _judge_axis(scores_t))
             for scores_t, axes in zip(random_cases(33, [(2, 3, 5, 4), (3, 6, 2), (2, 2, 3, 4, 6)]),
                                       ("(B, H, N_k, N_q)", "(B, N_k, N_q)", "(B, H, 3, N_k, N_q)"))]
    return judge_function(answer, cases, watched=LIBRARY_ATTENTION, example="my_weights(scores_t)",
                          lines="torch.softmax(scores_t, dim=...) over the keys, counted from the end so that it is "
                                "the keys whatever comes in front.",
                          success="for scores with one, two and three axes in front, every query's weights over "
                                  "the keys sum to one: dim=-2 in this layout.",
                          raised="an axis counted from the front exists only for one number of axes; count from "
                                 "the end: dim=-2 is the keys here, whatever comes in front.")


def _judge_additive(blocked: Tensor, dtype: torch.dtype) -> Callable[[Any], Verdict]:
    """The judge of the additive form of ``blocked`` (``True`` = blocked) in ``dtype``: 0.0 / -inf."""
    expected = mask_to_additive(blocked, invert=True, dtype=dtype)  # 0.0 where allowed, -inf where blocked
    mistakes = {
        "you put -inf where the mask is False (read as True = may attend)": (
            mask_to_additive(blocked, dtype=dtype), "this mask says True = blocked: -inf goes where it is True, "
                                                    "masked_fill(blocked, float('-inf')), no ~."),
        "you turned the mask into 1.0 / 0.0": (
            blocked.to(dtype), "adding 1.0 to a score barely changes softmax and blocks nothing; blocked "
                               "positions need -inf so that exp(-inf) = 0."),
        "you multiplied the mask by -inf: 0 x -inf is nan, so every allowed position became nan": (
            blocked.to(dtype) * float("-inf"), "put -inf only where the mask is True (fill those places) instead of "
                                               "multiplying the whole mask by it."),
        "you used -1e9 instead of -inf": (
            torch.zeros(blocked.shape, dtype=torch.float64).masked_fill(blocked, -1e9),
            "-1e9 blocks too, but the exercise asks for float('-inf'); section 3a.6 shows what -1e9 does to a "
            "fully masked row, dtype by dtype."),
        "you used torch.finfo(dtype).min, the most negative finite number, instead of -inf": (
            torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, torch.finfo(dtype).min),
            "finfo(dtype).min blocks too, but the exercise asks for float('-inf'); like -1e9 (section 3a.6), "
            "a finite minimum leaves a fully masked row with weights that are not zero."),
    }

    def judge(got: Any) -> Verdict:
        if isinstance(got, Tensor) and got.dtype == torch.bool:
            return wrong("your function returns a boolean mask; an additive mask holds numbers (0.0 and -inf).",
                         "start from zeros in the dtype asked for and put -inf where blocked is True.")
        verdict = compare_tensors(got, expected, name="your additive mask", likely_mistakes=mistakes)
        if verdict.ok and got.dtype != dtype:
            return wrong(f"the values are right but the dtype is {got.dtype}, not {dtype}: scores + mask would "
                         f"change the scores' dtype.", "make the zeros in that dtype: torch.zeros(blocked.shape, "
                         "dtype=dtype).")
        return verdict

    return judge


#: The library's converters, and PyTorch's internal one watched by its name alone (the package reads no private
#: attribute of PyTorch): a learner's own function named ``_canonical_mask`` would be refused as well.
ADDITIVE_WATCH = library(("mask_to_additive", "apply_mask")) | Watch(
    {"_canonical_mask": "PyTorch's internal mask converter"})


@checker
def check_additive_mask(answer: Any) -> Verdict:
    """Exercise 3a: ``my_additive(blocked, dtype)``, 0.0 / -inf in ``dtype`` for a "True = blocked" mask."""
    g = torch.Generator().manual_seed(36)
    masks = [(~causal_mask(5), torch.float64), (torch.rand(2, 1, 6, generator=g) < 0.4, torch.float16),
             (~(causal_mask(3, 4)[None] & padding_mask([2, 4], 4)), torch.float32)]
    cases = [((blocked, dtype), f"for a blocked mask of shape {tuple(blocked.shape)} and dtype={dtype}",
              _judge_additive(blocked, dtype)) for blocked, dtype in masks]
    return judge_function(answer, cases, watched=ADDITIVE_WATCH, example="my_additive(blocked, dtype)",
                          lines="start from zeros in the dtype asked for, then put -inf where the mask is True.",
                          success="for three masks and three dtypes, 0.0 where a query may attend, -inf where it "
                                  "may not, in the dtype asked for.")


def _judge_keep(lengths: Tensor, n: int, side: str) -> Callable[[Any], Verdict]:
    """The judge of the keep mask ``(B, 1, n)`` of sentences of ``lengths`` padded to ``n`` tokens on ``side``."""
    positions = torch.arange(n)  # (n,)
    right = padding_mask(lengths, n)  # (B, 1, n): real tokens first
    first_real = n - lengths  # (B,): where a left-padded sentence starts
    left = (positions[None, :] >= first_real[:, None])[:, None, :]  # (B, 1, n): real tokens last
    expected = left if side == "left" else right
    if side == "left":
        likely_mistakes = {
            "you built the right-padded mask (real tokens first, padding_mask's layout)": (
                right, "here the padding comes FIRST: a sentence of length L has its real tokens at the last L "
                       "positions, n - L, ..., n - 1; compare the positions with n - lengths."),
            "you marked the padding instead of the real keys (the blocked convention)": (
                ~expected, "this lesson's masks say True = may attend: True on the last `length` positions."),
            "you compared the positions with the lengths, not with n - lengths": (
                (positions[None, :] >= lengths[:, None])[:, None, :],
                "a sentence of length L padded on the left starts at position n - L: positions >= n - lengths."),
            "you dropped the first real key (> instead of >=)": (
                (positions[None, :] > first_real[:, None])[:, None, :],
                "the first real token is at position n - L itself: keep positions >= n - L."),
        }
    else:
        likely_mistakes = {
            "you marked the padding instead of the real keys (the blocked convention)": (
                ~expected, "this lesson's masks say True = may attend: the real tokens are the first `length` ones."),
            "you kept one key too many (<= instead of <)": (
                (positions[None, :] <= lengths[:, None])[:, None, :],
                "positions count from 0: a sentence of length L has its real tokens at 0, ..., L - 1."),
        }
    success = (f"shape {list(expected.shape)}: the {'last' if side == 'left' else 'first'} `length` keys of each "
               "sentence are real, and the axis of size 1 lets the mask broadcast over every query row.")

    def judge(answer: Any) -> Verdict:
        if not isinstance(answer, Tensor):
            return wrong(f"your answer is a {type(answer).__name__}, not a tensor.",
                         "compare torch.arange(n) with the lengths, as in section 3.4.2.")
        if answer.dtype != torch.bool:
            return wrong(f"your mask has dtype {answer.dtype}; a keep mask is boolean.",
                         "a comparison such as positions < lengths gives booleans directly.")
        if answer.shape == expected.shape[::2] and torch.equal(answer, expected[:, 0]):
            return wrong(f"your mask {list(answer.shape)} has the right values but no query axis.",
                         "add an axis of size 1 for the queries, (B, 1, N_k), so it broadcasts over every query "
                         "row: [:, None, :].")
        return compare_tensors(answer, expected, name="your mask", likely_mistakes=likely_mistakes, success=success)

    return judge


@checker
def check_padding_keep_mask(answer: Any, lengths: Tensor, n: int, side: str = "right") -> Verdict:
    """Exercise 3: the keep mask ``(B, 1, n)`` of ``lengths`` padded to ``n``; ``side="left"`` (exercise 3.2):
    a function ``my_left_keep_mask(lengths, n)``, run on two more batches, ``padding_mask`` refused."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    lengths = torch.as_tensor(lengths)
    if side == "right":
        return _judge_keep(lengths, n, side)(answer)
    batches = [(lengths, n), (torch.tensor([2, 6, 1]), 7), (torch.tensor([4]), 4)]
    cases = [((lens, size), f"for lengths {lens.tolist()} and n = {size}", _judge_keep(lens, size, "left"))
             for lens, size in batches]
    return judge_function(answer, cases, watched=library(("padding_mask",)), example="my_left_keep_mask(lengths, n)",
                          lines="compare torch.arange(n) with n - lengths, then add the query axis of size 1.",
                          raised=lambda problem: (  # the positions and the lengths did not broadcast
                              "positions (n,) and lengths (B,) do not line up as they are: give the positions a "
                              "batch axis and the lengths a key axis, positions[None, :] and lengths[:, None], as "
                              "section 3.4.2 does, to compare them as (B, n); then add the query axis of size 1."
                              if "must match the size" in str(problem) else ""),
                          success="for three batches, the last `length` keys of each sentence are real, and the "
                                  "axis of size 1 lets the mask broadcast over every query row.")


@prediction_checker(choices=("nan", "uniform", "zeros"))
def check_masked_row_prediction(choice: str, row: Tensor) -> Verdict:
    """Prediction 3: what a softmax gives a row whose keys are all blocked."""
    uniform = bool(torch.allclose(row, torch.full_like(row, 1 / row.numel())))
    outcome = "nan" if row.isnan().any() else "zeros" if (row == 0).all() else "uniform" if uniform else "other"
    if choice == outcome:
        return correct(f"the row is {row.tolist()}: every score is -inf, so the row's maximum is -inf "
                       "too, and the softmax's first step, s - max = -inf - (-inf), is already NaN."
                       if outcome == "nan" else
                       f"the row is {row.tolist()}.")
    return wrong(f"the row is {row.tolist()}, which is {outcome}, not {choice}.",
                 "with every score -inf the row's maximum is -inf too, and s - max = -inf - (-inf) is NaN "
                 "before any exp (the literal formula would divide 0 by 0: NaN as well).")


@prediction_checker(choices=("keep", "blocked"))
def check_convention_prediction(choice: str, reads_true_as_keep: bool, function: str) -> Verdict:
    """Prediction 3a: does ``function`` read ``True`` as "keep" or "blocked"?"""
    actual = "keep" if reads_true_as_keep else "blocked"
    if choice == actual:
        return correct(f"{function} reads True as {actual!r}: only the mask of that convention reproduced our output.")
    return wrong(f"{function} reads True as {actual!r}, not {choice!r}: look at which mask reproduced our output.",
                 "the documentation of each function says which convention it uses; the computation above shows it.")
