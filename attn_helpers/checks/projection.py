"""Checkers for 01 · QKV projection: the fused layer's shape, splitting it, and one separate linear."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from ._core import Verdict, checker, compare_tensors, correct, judge_shape, wrong
from ._function import judge_function, random_cases
from ._guard import Watch
from ._predict import prediction_checker

__all__ = ["check_qkv_shape", "check_split_qkv", "check_key_layer", "check_weight_shape_prediction"]


_SHAPE_HINT = "write it like (B, N, something) with numbers, e.g. (2, 3, 4)."


@checker
def check_qkv_shape(answer: Any, B: int, N: int, dim: int, chan: int) -> Verdict:
    """Exercise 1: the shape of ``Linear(dim, 3 * chan)(x (B, N, dim))``."""
    split = ("is what you get after splitting the fused output.",
             "the layer itself returns one tensor with q, k and v concatenated on the last axis.")
    known = {(B, N, dim): ("is the input's shape.", "the layer changes the last axis from dim to 3 * chan."),
             (B, N, 3, chan): split, (3, B, N, chan): split,
             (B, N, 3 * dim): (f"uses the input width dim={dim}.", "a Linear(in, out) layer's output width is `out`; "
                                                                     "here out = 3 * chan, not 3 * dim."),
             (B, N, chan): ("is the shape of q alone.",
                            "the fused layer makes q, k and v at once: its output is 3 × chan wide.")}
    return judge_shape(answer, [B, N, 3 * chan], what="a shape", hint=_SHAPE_HINT, known=known,
                       success=f"{[B, N, 3 * chan]}: the layer keeps B and N and turns each token's {dim} numbers "
                               f"into 3 × {chan} = {3 * chan} (q, k and v side by side).",
                       order="a Linear layer only changes the last axis: (B, N, dim) -> (B, N, out).",
                       other=("is not the fused output's shape.",
                              "a Linear(dim, 3 * chan) turns (B, N, dim) into (B, N, 3 * chan)."))


def _judge_split(qkv: Tensor) -> Callable[[Any], Verdict]:
    """The judge of ``(q, k, v)`` from ``qkv (..., 3 * chan)``: three consecutive blocks of ``chan`` columns."""
    chan = qkv.shape[-1] // 3
    expected = qkv.split(chan, dim=-1)  # 3 x (..., chan)
    interleaved = qkv.reshape(*qkv.shape[:-1], chan, 3).unbind(-1)  # 3 x (..., chan): the wrong reshape
    names = ("q", "k", "v")

    def judge(answer: Any) -> Verdict:
        pieces = list(answer) if isinstance(answer, (tuple, list)) else []
        if (qkv.dim() > 1 and pieces and all(isinstance(t, Tensor) and t.dim() == qkv.dim() for t in pieces)
                and all(t.shape[-1] == qkv.shape[-1] for t in pieces)):  # the last axis left whole
            axis = next((d for d in range(qkv.dim() - 1) if any(t.shape[d] != qkv.shape[d] for t in pieces)), None)
            if axis is None:  # one piece, all of qkv: a size at least as large as the axis it cut
                got = "one piece, the whole input" if len(pieces) == 1 else f"{len(pieces)} pieces, each the whole input"
                return wrong(f"your function returned {got} {list(qkv.shape)}: the size it split by is not smaller "
                             "than the axis it cut.",
                             "read chan from the input, chan = qkv.shape[-1] // 3 (a fixed number fits one width "
                             "only), and cut the last axis: qkv.split(chan, dim=-1).")
            got = "one piece, which keeps" if len(pieces) == 1 else f"{len(pieces)} pieces, which all keep"
            return wrong(f"your function returned {got} the whole last axis ({qkv.shape[-1]} columns): it cut "
                         f"axis {axis} (of size {qkv.shape[axis]}), not the last axis.",
                         "cut the last axis, whatever comes in front of it: qkv.split(chan, dim=-1), or slices "
                         "qkv[..., a:b]. (split and chunk cut axis 0 unless told otherwise: their default is dim=0.)")
        if not isinstance(answer, (tuple, list)) or len(answer) != 3:
            pieces = f" of {len(answer)} pieces" if isinstance(answer, (tuple, list)) else ""
            hint = (f"split(size, dim=-1) cuts pieces `size` columns wide; here chan = {chan}: read it from the "
                    "input, chan = qkv.shape[-1] // 3 (a fixed number fits one width only)."
                    if isinstance(answer, (tuple, list)) else
                    "return three tensors (q, k, v), each chan = qkv.shape[-1] // 3 columns wide.")
            return wrong(f"your function returned a {type(answer).__name__}{pieces}, not three tensors (q, k, v).",
                         hint)
        for name, got, right in zip(names, answer, expected):
            mistakes = {f"you took the slice that belongs to {other}": (
                expected[j], f"q is columns [0, chan), k is [chan, 2*chan), v is [2*chan, 3*chan); here chan = {chan}.")
                for j, other in enumerate(names) if other != name}
            mistakes["you reshaped the last axis to (chan, 3) and picked one of the 3"] = (
                interleaved[names.index(name)], "reshape(..., chan, 3) interleaves the features: q, k and v each own "
                "a contiguous block, so reshape to (..., 3, chan) or use split(chan, dim=-1).")
            verdict = compare_tensors(got, right, name=name, likely_mistakes=mistakes)
            if not verdict.ok:
                return verdict
        return correct("")

    return judge


@checker
def check_split_qkv(answer: Any) -> Verdict:
    """Exercise 1: ``my_split(qkv (..., 3 * chan)) -> (q, k, v)`` for any ``chan``, on three inputs."""
    # the first input's axis 0 (8) is longer than its chan (6): a split along it cuts, and the verdict can say so
    cases = [((qkv,), f"for qkv of shape {tuple(qkv.shape)} (chan = {qkv.shape[-1] // 3})", _judge_split(qkv))
             for qkv in random_cases(13, ((8, 4, 18), (30,), (2, 3, 2, 15)))]
    return judge_function(answer, cases, watched=Watch(), example="my_split(qkv)",
                          lines="chan is a third of qkv's last axis; cut that axis into three blocks of chan.",
                          # an index past the input's axes (the (30,) input has none in front); else the default
                          raised=lambda problem: (
                              "count the axes from the end, whatever comes in front of the last: chan = "
                              "qkv.shape[-1] // 3, and qkv[..., a:b] slices the last axis (the ... stands for every "
                              "axis before it)." if isinstance(problem, IndexError) else ""),
                          success="for three widths (chan 6, 10 and 5) and zero to two axes in front, q, k and v "
                                  "are the three consecutive blocks of chan columns.")


@checker
def check_key_layer(answer: Any, fused: nn.Linear, chan: int) -> Verdict:
    """Exercise 1: a separate ``nn.Linear(dim, chan)`` giving the fused layer's keys."""
    if not isinstance(answer, nn.Linear):
        return wrong(f"the answer should be an nn.Linear layer, got {type(answer).__name__}.",
                     "build `nn.Linear(dim, chan)` and copy the key rows of the fused weight matrix into it.")
    dim = fused.in_features
    if (answer.in_features, answer.out_features) != (dim, chan):
        return wrong(f"your layer maps {answer.in_features} -> {answer.out_features} features; the keys need "
                     f"{dim} -> {chan}.", "nn.Linear(in_features=dim, out_features=chan).")
    [x] = random_cases(0, [(2, 5, dim)])  # (B, N, dim)
    with torch.no_grad():
        blocks = fused(x).split(chan, dim=-1)  # 3 x (B, N, chan)
        got = answer(x)  # (B, N, chan)
        no_bias = blocks[1] - fused.bias[chan:2 * chan] if fused.bias is not None else None
    rows = f"rows [{chan}, {2 * chan}) of fused.weight (and of fused.bias)"
    mistakes = {
        "you copied the query rows [0, chan)": (blocks[0], f"the keys are the second block: {rows}."),
        "you copied the value rows [2*chan, 3*chan)": (blocks[2], f"the keys are the second block: {rows}."),
    }
    if no_bias is not None:
        mistakes["the weight matrix is right but the bias is missing"] = (
            no_bias, f"the fused layer has a bias too: copy fused.bias[{chan}:{2 * chan}] into your layer's bias.")
        for block, rows_of in ((0, "query's"), (2, "value's")):  # the right weight rows, a neighbour's bias
            bias_rows = f"fused.bias[{block * chan}:{(block + 1) * chan}]"
            mistakes[f"you copied the key rows of the weight matrix but the {rows_of} bias ({bias_rows})"] = (
                no_bias + fused.bias[block * chan:(block + 1) * chan],
                f"the bias needs the key rows too: copy fused.bias[{chan}:{2 * chan}] into your layer's bias.")
        if answer.bias is not None and not torch.allclose(answer.bias, fused.bias[chan:2 * chan], atol=1e-6):
            mistakes["you copied the key rows of the weight matrix but not of the bias"] = (
                no_bias + answer.bias.detach(), f"your layer still has its own random bias: copy "
                                                f"fused.bias[{chan}:{2 * chan}] into it as well.")
    weight = fused.weight.detach().to(answer.weight.dtype)  # (3 * chan, dim)
    mine = answer.weight.detach()  # (chan, dim)
    copy = f"fused.weight[{chan}:{2 * chan}]" + (f" and fused.bias[{chan}:{2 * chan}]" if fused.bias is not None else "")
    if not torch.allclose(got, blocks[1], atol=1e-5) and \
            not any(torch.allclose(mine, w, atol=1e-6) for w in weight.split(chan)):
        # rows copied from the fused layer, but not its key block: every third row (section 1.4.1's reshape
        # mistake, weight[1::3]) or another choice of rows
        every_third = [r for r in range(3) if torch.allclose(mine, weight[r::3], atol=1e-6)]
        if every_third:
            return wrong(f"your layer's weight is every third row of the fused layer's, fused.weight[{every_third[0]}::3]: "
                         "the fused weight does not interleave q, k and v row by row (section 1.4.1).",
                         f"q, k and v are three consecutive blocks of chan = {chan} rows; the keys are the second: {copy}.")
        if all(torch.isclose(row, weight, atol=1e-6).all(dim=-1).any() for row in mine):
            return wrong("each row of your layer's weight is a row of the fused layer's, but together they are not its "
                         "key block.", f"the keys are rows [{chan}, {2 * chan}), in order: {copy}.")
        # a new nn.Linear left as drawn: nothing to compare step by step
        return wrong("your layer's weight matrix is none of the fused layer's three blocks of rows: it was not copied "
                     "from the fused layer (a new nn.Linear starts with random parameters).",
                     f"copy the key rows into it: {copy} (under torch.no_grad(), with .copy_()).")
    return compare_tensors(got, blocks[1], name="your layer's output", likely_mistakes=mistakes,
                           success="your separate key layer gives exactly the fused layer's keys.")


@prediction_checker
def check_weight_shape_prediction(prediction: Any, layer: nn.Linear) -> Verdict:
    """Prediction 1: the shape of ``nn.Linear``'s ``weight``."""
    expected = list(layer.weight.shape)  # (out_features, in_features)
    return judge_shape(prediction, expected, what="a shape", hint=_SHAPE_HINT, order=None, known={
        tuple(expected[::-1]): (f"is the transpose of the stored weight matrix {expected}.",
                                "nn.Linear keeps its weight matrix as (out_features, in_features) and multiplies "
                                "by its transpose: x @ weight.mT.")},
        success=f"{expected}: nn.Linear stores one row per output number ({expected[0]}) and one column per input "
                f"number ({expected[1]}), and computes x @ weight.mT.",
        other=(f"is not the weight matrix's shape {expected}.",
               "the weight matrix has one row per output number and one column per input number."))
