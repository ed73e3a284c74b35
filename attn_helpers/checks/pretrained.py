"""Checkers for 11 · Inside a real pretrained transformer: head_dim from a config, the weight rows
that make one head, the keep mask of a padded batch, and a prediction about padding.

The three code exercises hand in a *function*; each judge runs it on the lesson's model and on other
sizes it makes up, so a number or a tensor copied from the lesson cannot pass, and recognises the
typical wrong answers (a constant, a float, columns instead of rows, every H-th row, the mask's
other convention, a missing query axis, a 0/1 float mask).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from .. import padding_mask, split_heads
from ._core import Verdict, checker, correct, wrong
from ._predict import as_choice, prediction_checker

__all__ = ["check_config_head_dim", "check_head_weights", "check_keep_mask", "check_padding_prediction"]

# Other encoders' sizes (hidden_size, num_attention_heads) the answers are also run on.
OTHER_SIZES = ((768, 12), (1024, 16), (384, 6), (256, 4))


def _not_a_function(answer: Any, call: str) -> Verdict | None:
    if callable(answer):
        return None
    return wrong(f"the answer should be a function, got {type(answer).__name__} {answer!r:.60}.",
                 f"define it with def, then write answer = the function's name (no brackets); the checker calls {call}.")


# ------------------------------------------------------------------------------ exercise 11.2: head_dim


@checker
def check_config_head_dim(answer: Callable[[Mapping[str, Any]], int], config: Mapping[str, Any]) -> Verdict:
    """Exercise: a function ``head_dim_of(config) -> int``, the width of one head, run on ``config``
    and on the sizes of other encoders (``OTHER_SIZES``)."""
    problem = _not_a_function(answer, "head_dim_of(config)")
    if problem:
        return problem
    configs = [dict(config)] + [{**config, "hidden_size": h, "num_attention_heads": n} for h, n in OTHER_SIZES]
    results = []
    for c in configs:
        got = answer(c)
        h, n = c["hidden_size"], c["num_attention_heads"]
        results.append(got)
        if isinstance(got, bool) or not isinstance(got, (int, float, Tensor)):
            return wrong(f"head_dim_of returned {got!r} for hidden_size={h}, num_attention_heads={n}; expected an int.",
                         "return a number computed from the config's entries.")
        if isinstance(got, float) or (isinstance(got, Tensor) and got.is_floating_point()):
            return wrong(f"head_dim_of returned {got!r}, a float, for hidden_size={h}, num_attention_heads={n}.",
                         "a width is used in reshapes, which need an int: divide with //.")
        if int(got) != h // n:
            same = len(set(int(r) for r in results)) == 1 and len(results) > 1
            if same:
                return wrong(f"head_dim_of returns {int(got)} for every config, but hidden_size={h} with "
                             f"num_attention_heads={n} has heads of {h // n}.",
                             "compute it from config['hidden_size'] and config['num_attention_heads'], "
                             "not as a constant for this model.")
            if int(got) == h:
                return wrong(f"head_dim_of returned hidden_size ({h}): the width of all heads together.",
                             "the heads share hidden_size between them: divide by num_attention_heads.")
            if int(got) == n:
                return wrong(f"head_dim_of returned the number of heads ({n}), not their width.",
                             "head_dim = hidden_size // num_attention_heads.")
            return wrong(f"head_dim_of returned {int(got)} for hidden_size={h}, num_attention_heads={n}; "
                         f"expected {h // n}.", "head_dim = hidden_size // num_attention_heads.")
    return correct(f"{config['hidden_size']} // {config['num_attention_heads']} = {results[0]} for this model, "
                   f"and the right width for {len(OTHER_SIZES)} other sizes too (768 // 12 = 64 is BERT-base's).")


# ------------------------------------------------------------------------------ exercise 11.3: weight rows of one head


def _weights_cases(q_proj: torch.nn.Linear, num_heads: int) -> list[tuple[Tensor, Tensor, int]]:
    cases = [(q_proj.weight.detach(), q_proj.bias.detach(), num_heads)]
    generator = torch.Generator().manual_seed(11)
    for hidden, heads in ((64, 4), (24, 3)):
        cases.append((torch.randn(hidden, hidden, generator=generator), torch.randn(hidden, generator=generator), heads))
    return cases


@checker
def check_head_weights(answer: Callable[..., tuple[Tensor, Tensor]], q_proj: torch.nn.Linear, x: Tensor,
                       num_heads: int) -> Verdict:
    """Exercise: a function ``head_weights(weight, bias, h, num_heads) -> (W_h, b_h)``: the rows of a
    ``Linear(hidden, hidden)``'s ``weight (hidden, hidden)`` and ``bias (hidden,)`` that make head
    ``h``'s features. Run for every head of ``q_proj`` (checked against ``split_heads(q_proj(x))``)
    and of two made-up sizes."""
    problem = _not_a_function(answer, "head_weights(weight, bias, h, num_heads)")
    if problem:
        return problem
    for weight, bias, heads in _weights_cases(q_proj, num_heads):
        hidden = weight.shape[0]
        head_dim = hidden // heads
        for h in range(heads):
            got = answer(weight, bias, h, heads)
            if not isinstance(got, (tuple, list)) or len(got) != 2 or not all(isinstance(t, Tensor) for t in got):
                return wrong(f"head_weights should return a pair of tensors (W_h, b_h), got {type(got).__name__}.",
                             "return weight[...], bias[...] with the same row selection for both.")
            w_h, b_h = got
            rows = slice(h * head_dim, (h + 1) * head_dim)
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
    weight, bias = q_proj.weight.detach(), q_proj.bias.detach()
    with torch.no_grad():
        q_heads = split_heads(q_proj(x), num_heads)  # (B, H, N, head_dim)
        diffs = [(x @ w_h.T + b_h - q_heads[:, h]).abs().max().item()
                 for h, (w_h, b_h) in enumerate(answer(weight, bias, g, num_heads) for g in range(num_heads))]
    return correct(f"for every head h, x @ W_h.T + b_h equals split_heads(q)[:, h] (largest difference below 1e-5: "
                   f"{max(diffs) < 1e-5}): head h is made by its own {weight.shape[0] // num_heads} rows of the projection.")


# ------------------------------------------------------------------------------ exercise 11.4: the keep mask of a padded batch


def _mask_cases(attention_mask: Tensor) -> list[Tensor]:
    return [attention_mask, torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])]


@checker
def check_keep_mask(answer: Callable[[Tensor], Tensor], attention_mask: Tensor) -> Verdict:
    """Exercise: a function ``keep_mask(attention_mask) -> mask``: from a tokenizer's ``attention_mask (B, N)``
    (1 = real token, 0 = padding) the boolean key-padding mask ``(B, 1, N)``, ``True`` = may attend
    (``(B, 1, 1, N)`` is accepted too). Run on ``attention_mask`` and on two made-up batches."""
    problem = _not_a_function(answer, "keep_mask(attention_mask)")
    if problem:
        return problem
    for mask in _mask_cases(attention_mask):
        B, N = mask.shape
        expected = padding_mask(mask.sum(dim=-1), N)  # (B, 1, N)
        got = answer(mask.clone())
        if not isinstance(got, Tensor):
            return wrong(f"keep_mask returned {type(got).__name__}, expected a boolean tensor.",
                         "build it with tensor operations on attention_mask.")
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
            return wrong(f"for attention_mask {mask.tolist()} your mask is {got[:, 0].tolist()}.",
                         "True exactly where attention_mask is 1.")
    return correct("True for every real key, False for every [PAD], one row per sequence shared by all its queries.")


# ------------------------------------------------------------------------------ exercise 11.1 (predict): padding


@prediction_checker
def check_padding_prediction(prediction: Any, max_difference: float, tolerance: float = 1e-5) -> Verdict:
    """Prediction: are a short sentence's attention weights (real tokens) the same alone and padded in a
    batch? ``max_difference``: the largest difference measured over every layer and head."""
    choice = as_choice(prediction, ["same", "different"])
    if isinstance(choice, Verdict):
        return choice
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
