"""Checkers for 05 · Multi-head reshaping: split and merge heads, the shapes on the way, view vs reshape, one
head against several (a prediction) and multi-head attention, each function run on inputs of the checker's own."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from ..core import Attention, merge_heads, scaled_dot_product_attention, split_heads
from ._core import Unreadable, Verdict, as_letter, checker, compare_tensors, correct, error_text, judge_shape, wrong
from ._function import judge_function
from ._guard import MASK_BUILDERS, TORCH_ATTENTION, TORCH_MULTI_HEAD, library
from ._predict import prediction_checker

__all__ = ["check_split_heads", "check_merge_heads", "check_head_shapes", "check_split_line",
           "check_heads_prediction", "check_multi_head_function"]


def run_option(code: str, namespace: Mapping[str, Any]) -> Any:
    """Evaluate an option's line of code in a copy of ``namespace``: its result, or the exception it raised."""
    try:
        return eval(code, {"torch": torch, "split_heads": split_heads, "merge_heads": merge_heads}, dict(namespace))
    except Exception as problem:  # the error is the lesson: report it, never raise it
        return problem


#: Exercise 5.6 refuses the split, the merge and whole layers (the library's, PyTorch's); an SDPA is allowed.
_MULTI_HEAD_REFUSED = (library(skip=(*MASK_BUILDERS, "scaled_dot_product_attention", "attend", "attention_scores"))
                       | TORCH_MULTI_HEAD)


def _raised_hint(problem: BaseException, default: str = "") -> str:
    """A non-contiguous view's failure explained; else ``default`` (empty: :func:`judge_function`'s own hint)."""
    if "view size is not compatible" in str(problem):
        return ("view cannot walk this tensor's memory with fixed steps (here it was not contiguous, as after "
                "the transpose of section 5.5.1): use reshape (or .contiguous().view).")
    return default


def _split_cases() -> list[tuple[Tensor, int]]:
    """``(x (B, N, chan), num_heads)``; the first has several heads and chan != N * head_dim."""
    generator = torch.Generator().manual_seed(52)
    return [(torch.randn(B, N, chan, generator=generator), num_heads)
            for B, N, chan, num_heads in ((2, 5, 12, 3), (1, 4, 10, 2), (3, 2, 16, 4), (2, 3, 5, 1))]


def _split_mistakes(x: Tensor, num_heads: int) -> dict[str, tuple[Tensor, str]]:
    B, N, chan = x.shape
    head_dim = chan // num_heads
    return {
        "you reshaped straight to (B, H, N, head_dim)": (
            x.reshape(B, num_heads, N, head_dim),
            "the shape is right but each head now holds pieces of several tokens: first split the last axis "
            "with reshape(B, N, H, head_dim), then swap tokens and heads with transpose(1, 2)."),
        "you split the features but did not move the heads axis": (
            x.reshape(B, N, num_heads, head_dim),
            "after reshape(B, N, H, head_dim) the heads axis is third; transpose(1, 2) brings it before the tokens."),
        "you transposed first, then reshaped: x.transpose(1, 2).reshape(B, H, N, head_dim)": (
            x.transpose(1, 2).reshape(B, num_heads, N, head_dim),
            "the transposed tensor is (B, chan, N), read feature by feature, so a head's rows mix features of several tokens "
            "(option (d) of exercise 5.5): reshape(B, N, H, head_dim) first, then transpose(1, 2)."),
        "you split chan into (head_dim, H) instead of (H, head_dim)": (
            x.reshape(B, N, head_dim, num_heads).permute(0, 3, 1, 2),
            "head h owns the block of features h*head_dim ... (h+1)*head_dim - 1, so the heads axis comes first: "
            "reshape(B, N, H, head_dim)."),
    }


def _merge_mistakes(heads: Tensor) -> dict[str, tuple[Tensor, str]]:
    B, H, N, head_dim = heads.shape
    chan = H * head_dim
    return {
        "you flattened without moving the heads axis back": (
            heads.reshape(B, N, chan),
            "the shape is right but the values are scrambled: first transpose(1, 2) to (B, N, H, head_dim), "
            "then reshape(B, N, chan)."),
        "you moved the heads axis but did not flatten": (
            heads.transpose(1, 2),
            "after transpose(1, 2) the shape is (B, N, H, head_dim); reshape(B, N, chan) joins the last two axes."),
        "you put each head's features in a stride instead of a block": (
            heads.permute(0, 2, 3, 1).reshape(B, N, chan),
            "head h's features must end up next to each other (columns h*head_dim ... (h+1)*head_dim - 1): "
            "use transpose(1, 2), which keeps (H, head_dim) in that order."),
    }


def _judge_reshaping(answer: Any, cases: list[tuple[tuple[Any, ...], Tensor, dict[str, tuple[Tensor, str]], str]],
                     *, what: str, example: str, lines: str, success: str) -> Verdict:
    """The learner's split or merge on every case ``(args, expected, mistakes, description)``."""
    return judge_function(answer, [(args, description, functools.partial(
        compare_tensors, expected=expected, name=f"your {what}", likely_mistakes=mistakes))
        for args, expected, mistakes, description in cases], watched=library(("split_heads", "merge_heads")),
        example=example, lines=lines, success=success, raised=_raised_hint)


@checker
def check_split_heads(answer: Callable[[Tensor, int], Tensor]) -> Verdict:
    """Exercise 5: ``my_split(x, num_heads)``, ``(B, N, chan) -> (B, H, N, head_dim)``, on four inputs (1 to 4 heads)."""
    cases = [((x, num_heads), split_heads(x, num_heads), _split_mistakes(x, num_heads),
              f"x {list(x.shape)} with num_heads={num_heads}") for x, num_heads in _split_cases()]
    return _judge_reshaping(
        answer, cases, what="split", example="my_split(x, num_heads)",
        lines="cut the last axis into (num_heads, head_dim) with a reshape, then swap the heads and tokens axes "
              "(section 5.1.2 does both steps on its example).",
        success="on four inputs of other sizes (1 to 4 heads), every head gets its own block of head_dim "
                "features of every token: (B, N, chan) -> (B, H, N, head_dim).")


@checker
def check_merge_heads(answer: Callable[[Tensor], Tensor]) -> Verdict:
    """Exercise 5: ``my_merge(heads)``, ``(B, H, N, head_dim) -> (B, N, chan)``, on four inputs (1 to 4 heads)."""
    cases = [((heads,), x, _merge_mistakes(heads), f"heads {list(heads.shape)}") for x, num_heads in _split_cases()
             for heads in [split_heads(x, num_heads).contiguous()]]  # (B, H, N, head_dim), stored like a head's output
    return _judge_reshaping(
        answer, cases, what="merge", example="my_merge(heads)",
        lines="swap the heads and tokens axes back, then join (H, head_dim) into one axis with a reshape "
              "(section 5.1.2 does both steps on its example).",
        success="on four inputs of other sizes (1 to 4 heads), the heads sit side by side again, head 0's "
                "features first: (B, H, N, head_dim) -> (B, N, chan).")


def _judge_head_shapes(B: int, N: int, dim: int, chan: int, H: int) -> Callable[[Any], Verdict]:
    """The judge of the learner's dict for these sizes, against a layer's own intermediates."""
    with torch.device("meta"):  # shapes without values: no weights drawn, the random state untouched
        _, inter = Attention(dim, chan, H)(torch.zeros(B, N, dim), return_intermediates=True)
    head_dim = chan // H
    known = {"qkv_heads": {(B, N, 3, H, head_dim): (
                 "is the shape before the permute.",
                 "permute(2, 0, 3, 1, 4) puts axis 2 (q/k/v) first, then batch, heads, tokens, head_dim.")},
             "scores": {(B, N, N): ("has no heads axis.", "every head scores all pairs of tokens: (B, H, N, N)."),
                        (B, H, N, head_dim): ("ends in head_dim.", "q @ k.transpose(-2, -1) contracts head_dim "
                                              "away: one score per (query, key) pair, (B, H, N, N).")}}

    def judge(answer: Any) -> Verdict:
        if not isinstance(answer, Mapping) or set(answer) != {"head_dim", "qkv_heads", "scores"}:
            return wrong(f"your function returned {answer!r:.80}, not a dict with the keys 'head_dim', 'qkv_heads' "
                         "and 'scores'.", "return {'head_dim': ..., 'qkv_heads': [...], 'scores': [...]}.")
        hd = answer["head_dim"]
        if isinstance(hd, bool) or not isinstance(hd, int):
            return wrong(f"head_dim should be a whole number, got {hd!r}.", "head_dim = chan // num_heads.")
        if hd == dim // H != head_dim:
            return wrong(f"head_dim={hd} is dim // num_heads.",
                         "the heads split the projected width chan, not the input width dim.")
        if hd != head_dim:
            return wrong(f"head_dim={hd} is not right: {H} heads of {hd} features make {H * hd}, not chan={chan}.",
                         "head_dim = chan // num_heads.")
        for key, axes in (("qkv_heads", "(3, B, H, N, head_dim)"), ("scores", "(B, H, N, N)")):
            verdict = judge_shape(answer[key], list(inter[key].shape), what=key, known=known[key], prefix=f"{key} ",
                                  order=f"{key} is {axes}.", other=("is not right.", f"{key} has the axes {axes}."))
            if not verdict.ok:
                return verdict
        return correct()

    return judge


_WORK_SHAPES_OUT = ("work the shapes out from the sizes: head_dim = chan // num_heads, then the reshape "
                    "(B, N, 3, H, head_dim) and the permute (2, 0, 3, 1, 4).")


@checker
def check_head_shapes(answer: Any) -> Verdict:
    """Exercise 5.4: ``head_shapes(B, N, dim, chan, num_heads)`` -> ``{"head_dim", "qkv_heads", "scores"}``."""
    # (B, N, dim, chan, num_heads); the first has dim != chan, so mixing the widths up shows
    sizes = ((5, 7, 30, 24, 3), (2, 11, 9, 40, 8), (3, 4, 16, 16, 1), (1, 6, 20, 12, 2))
    return judge_function(
        answer, [((B, N, dim, chan, H), f"for B={B}, N={N}, dim={dim}, chan={chan}, num_heads={H}",
                  _judge_head_shapes(B, N, dim, chan, H)) for B, N, dim, chan, H in sizes],
        watched=library() | TORCH_ATTENTION, example="head_shapes(B, N, dim, chan, num_heads)",
        calls="your function runs {}: the exercise is to predict the shapes without running one.",
        lines=_WORK_SHAPES_OUT, raised=_WORK_SHAPES_OUT,
        success="at four sizes the lesson never printed (1 to 8 heads), your head_dim, qkv_heads and scores are "
                "those of the layer's own intermediates.")


@checker
def check_split_line(answer: Any, options: Mapping[str, str], q: Tensor, num_heads: int, *,
                     mixes_sequences: Any = None) -> Verdict:
    """Exercise 5: the option letter whose line splits ``q (B, N, chan)`` into ``(B, H, N, head_dim)``, and
    (``mixes_sequences``) the letter whose row for sequence 0, head 1 holds sequence 1's numbers (each run)."""
    letter = as_letter(answer, options)
    B, N, chan = q.shape
    namespace = dict(q=q, B=B, N=N, chan=chan, num_heads=num_heads, head_dim=chan // num_heads)
    expected = split_heads(q, num_heads)
    got = run_option(options[letter], namespace)
    if isinstance(got, Tensor) and got.shape == expected.shape and torch.allclose(got, expected):
        return _judge_mixer(letter, mixes_sequences, options, namespace)
    code = options[letter]
    transposes_first = "transpose" in code and code.find("transpose") < max(code.find("view"), code.find("reshape"))
    order = ("it transposes before it splits: q.transpose(1, 2) is (B, chan, N), the features before the tokens, "
             "so cutting that into heads cuts across tokens, not each token's features. Split the last axis first, "
             "(B, N, H, head_dim), then transpose(1, 2).")
    if isinstance(got, Exception):
        if transposes_first:  # the order is the mistake: reshape, as PyTorch's message advises, would run it wrongly
            return wrong(f"({letter}) does not even run: {error_text(got)} (reshape would run, and still be wrong)",
                         order)
        return wrong(f"({letter}) does not even run: {error_text(got)}",
                     "for these sizes view cannot walk the transposed q with fixed steps (section 5.5.1).")
    if isinstance(got, Tensor) and got.shape == expected.shape:
        b, h, n = (int(i) for i in (~torch.isclose(got, expected)).any(dim=-1).nonzero()[0])  # first wrong row
        d = chan // num_heads
        said = (f"({letter}) has the right shape {list(got.shape)} but the wrong numbers: its row for sequence {b}, "
                f"head {h}, token {n} is {_short(got[b, h, n])}, but head {h}'s features of that token, "
                f"q[{b}, {n}, {h * d}:{(h + 1) * d}], are {_short(expected[b, h, n])}.")
        if B == num_heads and torch.allclose(got, expected.transpose(0, 1)):  # (H, B, N, head_dim): B == H hides it
            return wrong(said, f"it moves the heads in front of the sequences: its axes are (H, B, N, head_dim), which "
                               f"has the shape of (B, H, N, head_dim) only because B = num_heads = {B} here. After the "
                               "split (B, N, H, head_dim), keep the batch axis first and swap only the tokens and "
                               "the heads.")
        return wrong(said, order if transposes_first else
                     "every (head, token) row must be one token's block of head_dim features: split the last axis "
                     "first (B, N, H, head_dim), then swap the tokens and the heads.")
    shape = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
    return wrong(f"({letter}) gives {shape}, not {list(expected.shape)}.", "follow the shape after each operation.")


def _holds_only(values: Tensor, source: Tensor) -> bool:
    """Whether every number of ``values`` is one of ``source``'s (to float rounding)."""
    return bool(torch.isclose(values.reshape(-1, 1), source.reshape(1, -1)).any(dim=1).all())


def _judge_mixer(split: str, answer: Any, options: Mapping[str, str], namespace: Mapping[str, Any]) -> Verdict:
    """The second part of exercise 5: which option's row for sequence 0, head 1 (index ``[0, 1]``) holds numbers
    of sequence 1 (``q[1]``), each option run on ``q``; ``split`` is the first part's (right) letter."""
    q = namespace["q"]
    done = f"({split}) splits the features of each token into heads, then moves the heads before the tokens"
    if answer is None:
        return wrong(f"{done}; now the second part: mixes_sequences is still None.",
                     "write mixes_sequences = the letter of the option whose row for sequence 0, head 1 (index "
                     "[0, 1]) holds sequence 1's numbers: read each line's axes.")
    try:
        letter = as_letter(answer, options)
    except Unreadable as unreadable:
        return wrong(f"{done}; mixes_sequences: {unreadable.args[0]}", "write e.g. mixes_sequences = 'a'.")
    got = run_option(options[letter], namespace)
    if isinstance(got, Tensor) and got.dim() == 4 and len(got) > 0 and got.shape[1] > 1 and _holds_only(got[0, 1], q[1]):
        return correct(f"{done}. ({letter})'s row [0, 1] holds sequence 1's numbers: its first axis is not the "
                       "batch axis, whatever its shape says.")
    said = ("does not even run here" if isinstance(got, Exception) else
            "has no row [0, 1]" if not isinstance(got, Tensor) or got.dim() < 2 or got.shape[1] < 2 else
            "has a row [0, 1] with numbers of sequence 0 only" if _holds_only(got[0, 1], q[0]) else
            "has a row [0, 1] without sequence 1's numbers")
    return wrong(f"{done}; but for mixes_sequences, ({letter}) {said}.",
                 f"({letter}): {_batch_axis(options[letter], namespace, got)} Look for a line that moves another "
                 "axis in front of B.")


def _batch_axis(code: str, namespace: Mapping[str, Any], got: Any) -> str:
    """What ``code`` does with q's batch axis, found by running it (a ``view`` that raised, run with reshape)."""
    q, ran = namespace["q"], ""
    if isinstance(got, Exception) and ".view(" in code:
        got, ran = run_option(code.replace(".view(", ".reshape("), namespace), "with reshape in place of view, "
    if not isinstance(got, Tensor) or got.dim() < 1 or len(got) != len(q):
        return "read its axes one operation at a time."
    split = split_heads(q, namespace["num_heads"])
    same = got.shape == split.shape and torch.allclose(got, split)
    what = "it is the split itself, (B, H, N, head_dim)" if same else f"it gives {list(got.shape)}"
    if all(_holds_only(got[b], q[b]) for b in range(len(q))):
        return (f"{ran}{what}, and each [b, ...] of it holds sequence b's numbers only: its first axis is still "
                "the batch axis B, so index [0, ...] stays in sequence 0.")
    return f"{ran}{what}, and its [0, ...] holds numbers of another sequence, but not at row [0, 1]."


def _short(row: Tensor) -> str:
    """A row of numbers with two decimals, for a verdict."""
    return "[" + ", ".join(f"{value:.2f}" for value in row.tolist()) + "]"


@prediction_checker(choices=("same", "different"))
def check_heads_prediction(choice: str, out_one: Tensor, out_many: Tensor, num_heads: int,
                           tolerance: float = 1e-5) -> Verdict:
    """Prediction 5: is a 1-head layer's output ``"same"`` as a ``num_heads``-head layer's with the same parameters?"""
    if out_one.shape != out_many.shape:
        raise ValueError(f"out_one and out_many must have the same shape, got {list(out_one.shape)} and "
                         f"{list(out_many.shape)}")
    difference = (out_one - out_many).abs().max().item()
    same = difference < tolerance
    if choice == ("same" if same else "different"):
        return correct(f"the outputs differ by up to {difference:#.2g}, far above float rounding ({tolerance:g}): "
                       f"{num_heads} heads take {num_heads} softmaxes over narrow dot products, one head takes one "
                       "softmax over their sum." if not same else f"they agree to within {tolerance:g}.")
    if not same:
        return wrong(f"they differ by up to {difference:#.2g}, far above float rounding ({tolerance:g}).",
                     "the parameters and q, k, v are the same, but each head takes its own softmax over its own "
                     "head_dim-wide dot products; one wide head takes one softmax over the sum of those dot products.")
    return wrong(f"they agree to within {tolerance:g}.",
                 "compare the outputs' largest difference with float rounding (the tolerance).")


def _heads_attention(q: Tensor, k: Tensor, v: Tensor, divisor: float, axis: int = -1) -> Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=axis) @ v


def _judge_multi_head(num_heads: int, q: Tensor, k: Tensor, v: Tensor) -> Callable[[Any], Verdict]:
    B, N, chan = q.shape
    head_dim = chan // num_heads
    qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # each (B, H, N, head_dim)
    heads = scaled_dot_product_attention(qh, kh, vh)  # (B, H, N, head_dim)
    expected = merge_heads(heads)  # (B, N, chan)
    view_split = [t.reshape(B, num_heads, N, head_dim) for t in (q, k, v)]  # whole tokens per head
    mistakes = {
        "the scores are divided by sqrt(chan), the full width, not sqrt(head_dim)": (
            merge_heads(_heads_attention(qh, kh, vh, math.sqrt(chan))),
            f"each head's dot products run over head_dim = {head_dim} features, so divide by "
            f"sqrt(head_dim): walkthrough 004's bug of section 5.6."),
        "one wide head runs over all chan features (no split into heads)": (
            _heads_attention(q, k, v, math.sqrt(chan)),
            "split q, k and v into num_heads heads first: reshape(B, N, H, head_dim).transpose(1, 2)."),
        "one wide head runs over all chan features, divided by sqrt(head_dim)": (
            _heads_attention(q, k, v, math.sqrt(head_dim)),
            "split q, k and v into num_heads heads first: reshape(B, N, H, head_dim).transpose(1, 2); "
            "then each head's scores are over its own head_dim features."),
        "the scores are not scaled at all": (
            merge_heads(_heads_attention(qh, kh, vh, 1.0)),
            "divide each head's scores by sqrt(head_dim) before the softmax."),
        "the softmax runs over the queries (dim=-2)": (
            merge_heads(_heads_attention(qh, kh, vh, math.sqrt(head_dim), axis=-2)),
            "each query's attention weights over the keys sum to one: softmax(..., dim=-1)."),
        "q, k and v are reshaped straight to (B, H, N, head_dim), without the transpose": (
            merge_heads(_heads_attention(*view_split, math.sqrt(head_dim))),
            "that hands whole tokens to each head (section 5.5): reshape(B, N, H, head_dim), then transpose(1, 2)."),
        "q, k, v are split with reshape(B, H, N, head_dim) and the heads merged with reshape(B, N, chan), "
        "both without a transpose": (
            _heads_attention(*view_split, math.sqrt(head_dim)).reshape(B, N, chan),
            "the shapes fit, but each head gets whole tokens (section 5.5): split with reshape(B, N, H, head_dim) "
            "then transpose(1, 2), and merge with transpose(1, 2) then reshape(B, N, chan)."),
        "the heads are merged with a reshape alone, without moving the heads axis back": (
            heads.reshape(B, N, chan),
            "merge with transpose(1, 2) first, to (B, N, H, head_dim), then reshape(B, N, chan)."),
    }

    def judge(got: Any) -> Verdict:
        if not isinstance(got, Tensor):
            return wrong(f"your function returned {type(got).__name__}, not a tensor.",
                         "return the merged heads, one tensor of shape (B, N, chan).")
        if tuple(got.shape) == tuple(heads.shape):
            return wrong(f"your function returns {list(got.shape)}, the heads before merging.",
                         "merge them: transpose(1, 2) to (B, N, H, head_dim), then reshape(B, N, chan).")
        return compare_tensors(got, expected, name="your output", likely_mistakes=mistakes, atol=1e-4, rtol=1e-4)

    return judge


@checker
def check_multi_head_function(answer: Callable[[Tensor, Tensor, Tensor, int], Tensor]) -> Verdict:
    """Exercise 5.6: ``multi_head(q, k, v, num_heads) -> (B, N, chan)``: split, attend (an SDPA is allowed), merge."""
    g = torch.Generator().manual_seed(5)
    cases = []
    for B, N, chan, h in ((2, 5, 10, 2), (3, 4, 12, 3), (1, 6, 16, 4), (2, 3, 6, 1)):  # the first: several heads
        q, k, v = (2.0 * torch.randn(B, N, chan, generator=g) for _ in range(3))  # each (B, N, chan)
        cases.append(((q, k, v, h), f"q, k, v {list(q.shape)} with num_heads={h}", _judge_multi_head(h, q, k, v)))
    return judge_function(
        answer, cases,
        watched=_MULTI_HEAD_REFUSED, example="multi_head(q, k, v, num_heads)", refusal="which does part of the "
        "exercise for you", is_="your answer is {}: the exercise is to write the split, the attention and the merge.",
        lines="split q, k and v with your own reshape and transpose (exercise 5.2), attend in every head (your own "
              "softmax, or torch.nn.functional.scaled_dot_product_attention), and merge with your own transpose "
              "and reshape (exercise 5.3).",
        raised=lambda problem: _raised_hint(problem, "run it on these shapes yourself and print the shape after each "
                                            "step: split (B, N, chan) -> (B, H, N, head_dim), attend, merge back to "
                                            "(B, N, chan)."),
        success="with 1, 2, 3 and 4 heads on four sizes, your function gives split_heads, softmax(q_h k_h^T / "
                "sqrt(head_dim)) v_h in every head, and merge_heads, to within 1e-4.")
