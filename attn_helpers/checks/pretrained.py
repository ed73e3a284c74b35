"""Checkers for 11 · Inside a real pretrained transformer: the weight rows that make one head, the keep mask of a
padded batch (run on batches of the checker's own, any library function refused) and a prediction about padding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core import split_heads
from ._core import Verdict, checker, correct, wrong
from ._function import judge_function
from ._guard import Watch, library
from ._predict import prediction_checker

__all__ = ["check_head_rows", "check_keep_mask", "check_padding_prediction"]

def _judge_rows(weight: Tensor, bias: Tensor, h: int, heads: int) -> Any:
    hidden = weight.shape[0]
    head_dim = hidden // heads
    rows = slice(h * head_dim, (h + 1) * head_dim)

    def judge(got: Any) -> Verdict:
        if not isinstance(got, (tuple, list)) or len(got) != 2 or not all(isinstance(t, Tensor) for t in got):
            return wrong(f"head_rows should return a pair of tensors (W_h, b_h), got {type(got).__name__}.",
                         "return weight[...], bias[...] with the same row selection for both.")
        w_h, b_h = got
        if w_h.shape == (hidden, head_dim) and torch.equal(w_h, weight[:, rows]):
            return wrong(f"for head {h} you took columns {rows.start}-{rows.stop - 1} of the weight, shape "
                         f"{list(w_h.shape)}.", "a Linear's weight is (out_features, in_features): each ROW "
                         "makes one output feature, so the rows select a head; weight[rows] takes rows.")
        if w_h.shape != (head_dim, hidden):
            return wrong(f"for head {h} of {heads} (hidden {hidden}), W_h has shape {list(w_h.shape)}; expected "
                         f"{[head_dim, hidden]}: head_dim rows of the whole input width.",
                         "one head has head_dim = hidden // num_heads features, one row each.")
        if torch.equal(w_h, weight[h::heads]):
            return wrong(f"for head {h} you took every {heads}th row ({h}, {h + heads}, ...).",
                         "split_heads reshapes (..., hidden) to (..., num_heads, head_dim): head h gets the "
                         "contiguous block of rows h*head_dim up to (h+1)*head_dim, not every H-th row.")
        if not torch.equal(w_h, weight[rows]):
            other = [g for g in range(heads) if torch.equal(w_h, weight[g * head_dim:(g + 1) * head_dim])]
            if other:
                return wrong(f"for head {h} you returned the rows of head {other[0]}.",
                             "head h's rows start at h * head_dim and end before (h + 1) * head_dim.")
            return wrong(f"W_h for head {h} of {heads} is not rows {rows.start}-{rows.stop - 1} of the weight.",
                         "head h's rows are weight[h * head_dim:(h + 1) * head_dim].")
        if b_h.shape != (head_dim,) or not torch.equal(b_h, bias[rows]):
            return wrong(f"W_h is right for head {h}, but b_h (shape {list(b_h.shape)}) is not the same rows of "
                         f"the bias.", "the bias has one entry per output feature: take the same rows of it.")
        return correct()

    return judge


@checker
def check_head_rows(answer: Callable[..., tuple[Tensor, Tensor]], q_proj: torch.nn.Linear, x: Tensor,
                    num_heads: int) -> Verdict:
    """Exercise 11.2: ``head_rows(weight, bias, h, num_heads) -> (W_h, b_h)``, the rows that make head ``h``."""
    g = torch.Generator().manual_seed(11)
    layers = [(q_proj.weight.detach(), q_proj.bias.detach(), num_heads), *(
        (torch.randn(hidden, hidden, generator=g), torch.randn(hidden, generator=g), heads) for hidden, heads in
        ((64, 4), (24, 3)))]
    cases = [((w, b, h, heads), "", _judge_rows(w, b, h, heads)) for w, b, heads in layers for h in range(heads)]
    hd = q_proj.out_features // num_heads  # a right answer's rows are these, exactly (torch.equal)
    with torch.no_grad():
        q_heads = split_heads(q_proj(x), num_heads)  # (B, H, N, head_dim)
        gap = max((x @ q_proj.weight[h * hd:(h + 1) * hd].T + q_proj.bias[h * hd:(h + 1) * hd] - q_heads[:, h])
                  .abs().max().item() for h in range(num_heads))
    return judge_function(answer, cases, watched=Watch(), example="head_rows(weight, bias, h, num_heads)",
                          lines="head h's rows are a contiguous block of head_dim = hidden // num_heads rows, of "
                                "the weight and of the bias.",
                          success=f"for every head h, x @ W_h.T + b_h equals split_heads(q)[:, h] (largest difference "
                                  f"below 1e-5: {gap < 1e-5}): head h is made by its own {hd} rows of the projection.")


@checker
def check_keep_mask(answer: Callable[[Tensor], Tensor], attention_mask: Tensor) -> Verdict:
    """Exercise 11.3: ``keep_mask(attention_mask (B, N)) -> (B, 1, N)`` (or ``(B, 1, 1, N)``), True = may attend."""
    how = "compare attention_mask with 1 yourself and insert the query axis: (B, N) -> (B, 1, N)."
    masks = [attention_mask, torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), torch.tensor([[1, 1, 0], [1, 0, 0],
             [1, 1, 1]]), torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]])]  # the last padded on the left
    return judge_function(
        answer, [((mask,), "", _judge_keep_mask(mask)) for mask in masks],
        watched=library(skip=()),  # every export: the padding mask and the encoder (which builds this mask) too
        example="keep_mask(attention_mask)", lines=how, refusal="which builds this mask for you",
        is_="your function calls {}, {}.", raised="use only attention_mask itself; read B and N from its shape.",
        success="True for every real key, False for every [PAD] (on either side), one row per sequence shared by all "
                "its queries.")


def _judge_keep_mask(mask: Tensor) -> Any:
    B, N = mask.shape
    expected = (mask == 1)[:, None, :]  # (B, 1, N)

    def judge(got: Any) -> Verdict:
        if not isinstance(got, Tensor):
            return wrong(f"keep_mask returned {type(got).__name__}, expected a boolean tensor.",
                         "build it with tensor operations on attention_mask.")
        if got.dtype != torch.bool and not got.is_floating_point():
            return wrong(f"keep_mask returned a {got.dtype} tensor of 1s and 0s.",
                         "the attention functions refuse an integer mask with a TypeError (1 and 0 could mean "
                         "either convention): make it boolean, e.g. attention_mask == 1 or .bool().")
        if got.dtype != torch.bool and bool(((got == 0) | (got <= -1e4)).all()) and bool((got != 0).any()):
            return wrong(f"keep_mask returned a {got.dtype} tensor of 0s and large negative numbers: the additive form "
                         "of the mask (0 = may attend, -inf = blocked), which is added to the scores.",
                         "the exercise asks for the boolean keep mask, True = may attend: attention_mask == 1, "
                         "with the query axis inserted.")
        if got.dtype != torch.bool:
            return wrong(f"keep_mask returned a {got.dtype} tensor.",
                         "a float mask is ADDED to the scores (lesson 03): 1 and 0 would shift scores, not block them. "
                         "Make it boolean, e.g. attention_mask == 1 or .bool().")
        if got.shape == (B, N):
            return wrong(f"keep_mask returned shape {[B, N]}: against scores (B, H, N, N) it would line up with the "
                         f"last two axes, queries and keys, not batch and keys.",
                         "insert the query axis: mask[:, None, :] gives (B, 1, N), which broadcasts over the queries.")
        if got.shape not in ((B, 1, N), (B, 1, 1, N)):
            return wrong(f"for an attention_mask of shape {[B, N]}, keep_mask returned shape {list(got.shape)}.",
                         "the key-padding mask has shape (B, 1, N): one row of keys per sequence, shared by every query.")
        got = got.reshape(B, 1, N)
        if torch.equal(got, ~expected):
            return wrong("your mask is True at the padding: that is the masked_fill / nn.MultiheadAttention convention "
                         "(True = blocked).", "this series' convention is True = may attend: True for the real tokens.")
        if not torch.equal(got, expected):
            from_lengths = torch.arange(N) < mask.sum(dim=-1)[:, None]  # (B, N): the first `length` keys
            if torch.equal(got[:, 0], from_lengths):
                return wrong(f"for the left-padded attention_mask {mask.tolist()} your mask keeps the first "
                             "tokens: it was built from the lengths, as if the padding were always at the end.",
                             "read the 1s where they are: True exactly where attention_mask is 1.")
            return wrong(f"for attention_mask {mask.tolist()} your mask is {got[:, 0].tolist()}.",
                         "True exactly where attention_mask is 1.")
        return correct()

    return judge


@prediction_checker(choices=("same", "different"))
def check_padding_prediction(choice: str, max_difference: float, tolerance: float = 1e-5) -> Verdict:
    """Prediction 11: are a short sentence's weights the ``"same"`` alone and padded (``max_difference``: measured)?"""
    same = max_difference < tolerance
    if choice == ("same" if same else "different"):
        return correct(f"the largest difference is below {tolerance:g}: the mask gives every [PAD] key a weight of "
                       f"exactly 0, so the real tokens never see the padding." if same else
                       f"they differ by more than {tolerance:g}.")
    if same:
        return wrong(f"they are the same (largest difference below {tolerance:g}).",
                     "the key-padding mask sets every [PAD] key's score to -inf, so its weight is exactly 0 and the "
                     "softmax over the real keys is unchanged; position embeddings depend on the position, not on "
                     "what follows.")
    return wrong(f"they differ by more than {tolerance:g}.", "look at which keys the padded queries may attend to.")
