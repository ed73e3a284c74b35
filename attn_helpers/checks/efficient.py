"""Checkers for 09 · Efficient attention: one online-softmax step, the size of a KV cache, repeating
key/value heads for grouped-query attention, a prediction of what the cache saves, and the learner's
own greedy generation loop with a KV cache.

Each judge recomputes the right answer from the exercise's own inputs and recognises the typical
wrong answers (the old sum not rescaled, K or V forgotten, query heads counted instead of groups,
``repeat`` instead of ``repeat_interleave``).
"""

from __future__ import annotations

import math
from copy import deepcopy
from typing import Any

import torch
from torch import Tensor

from ..efficient import online_softmax_update, repeat_kv_heads
from ..generation import generate_greedy
from ..measure import kv_cache_bytes
from ._core import Verdict, as_number, checker, compare_tensors, correct, error_text, wrong
from ._predict import prediction_checker

__all__ = ["check_online_softmax_step", "check_kv_cache_size", "check_repeat_kv", "check_cache_flops_prediction",
           "check_generate_with_cache"]


# ------------------------------------------------------------------------------ online softmax


@checker
def check_online_softmax_step(answer: Any, running_max: Tensor, running_sum: Tensor, block: Tensor) -> Verdict:
    """Exercise: fold ``block (b,)`` into ``running_max`` and ``running_sum`` (one row); answer ``(new_max, new_sum)``."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return wrong(f"the answer should be a pair (new_max, new_sum), got {answer!r}.",
                     "write answer = (new_max, new_sum).")
    got = [as_number(a, name, hint="the running max and the running sum are one number each for one row of scores.")
           for a, name in zip(answer, ("new_max", "new_sum"))]
    for g in got:
        if isinstance(g, Verdict):
            return g
    got_max, got_sum = got  # type: ignore[misc]
    new_max, new_sum = (t.item() for t in online_softmax_update(running_max, running_sum, block))
    m, l = running_max.item(), running_sum.item()
    block_max = block.max().item()

    def block_sum(reference: float) -> float:
        return torch.exp(block - reference).sum().item()

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)

    if not close(got_max, new_max):
        if close(got_max, m):
            return wrong(f"new_max = {got_max:.4f} is the old running max, but the block has a larger score "
                         f"({block_max:.4f}).", "new_max = max(running_max, block.max()).")
        return wrong(f"new_max = {got_max:.4f}, expected the largest score seen so far.",
                     "new_max = max(running_max, block.max()).")
    if close(got_sum, new_sum):
        return correct(f"new_max = {new_max:.4f}, new_sum = {new_sum:.4f}: the old sum shrank by "
                       f"exp(running_max - new_max) = {math.exp(m - new_max):.4f} before the block's terms were added.")
    mistakes = {
        "you added the block's terms without rescaling the old sum": l + block_sum(new_max),
        "you rescaled the old sum by exp(new_max - running_max), upside down": l * math.exp(new_max - m) + block_sum(new_max),
        "you subtracted the old running max inside the block's exponentials": l + block_sum(m),
        "you summed only the block (the old sum was dropped)": block_sum(new_max),
    }
    for cause, value in mistakes.items():
        if close(got_sum, value):
            return wrong(f"new_sum = {got_sum:.4f} is what you get when {cause}.",
                         "the old sum was computed relative to the old max: rescale it with "
                         "exp(running_max - new_max), then add exp(block - new_max).sum().")
    return wrong(f"new_sum = {got_sum:.4f}, expected a different value.",
                 "new_sum = running_sum * exp(running_max - new_max) + exp(block - new_max).sum().")


# ------------------------------------------------------------------------------ KV cache size


@checker
def check_kv_cache_size(answer: Any, *, num_layers: int, num_heads: int, num_kv_heads: int, head_dim: int,
                        seq_len: int, dtype_bytes: int, batch: int = 1) -> Verdict:
    """Exercise: the bytes of a grouped-query model's KV cache for the given sizes."""
    if isinstance(answer, Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or int(answer) != answer:
        return wrong(f"the answer should be a whole number of bytes, got {answer!r}.",
                     "multiply the sizes together: the result is an int.")
    got = int(answer)
    sizes = dict(num_layers=num_layers, head_dim=head_dim, seq_len=seq_len, batch=batch, dtype_bytes=dtype_bytes)
    expected = kv_cache_bytes(num_kv_heads=num_kv_heads, **sizes)
    if got == expected:
        return correct(f"{expected:,} bytes = {expected / 2 ** 30:.3g} GiB; with one key/value head per query head "
                       f"it would be {num_heads // num_kv_heads} times as much.")
    mistakes = {
        "you counted the keys but not the values (or the other way round)": (
            expected // 2, "the cache holds keys AND values: a factor of 2."),
        f"you used all {num_heads} query heads instead of the {num_kv_heads} key/value heads": (
            kv_cache_bytes(num_kv_heads=num_heads, **sizes),
            "in grouped-query attention only the key/value heads are cached: use G, not H."),
        "you forgot the layers": (
            expected // num_layers, "every layer keeps its own cache: multiply by num_layers."),
        "you counted bits instead of bytes": (
            expected * 8, "dtype_bytes is already in bytes (float16 = 2 bytes); do not multiply by 8."),
        "you used 4 bytes per number (float32)": (
            expected // dtype_bytes * 4, f"the cache is stored in {dtype_bytes}-byte numbers here."),
    }
    for cause, (value, hint) in mistakes.items():
        if got == value:
            return wrong(f"{got:,} is what you get when {cause}.", hint)
    return wrong(f"{got:,} bytes; expected {expected / got:.3g} times that." if got else "0 bytes cannot be right.",
                 "bytes = 2 (K and V) x layers x batch x G x seq_len x head_dim x dtype_bytes.")


# ------------------------------------------------------------------------------ repeat K/V heads


@checker
def check_repeat_kv(answer: Any, k: Tensor, num_heads: int) -> Verdict:
    """Exercise: turn ``k (B, G, N, d)`` into ``(B, num_heads, N, d)`` so query head ``h`` meets key/value head ``h // (H / G)``."""
    per_group = num_heads // k.shape[1]
    expected = repeat_kv_heads(k, num_heads)  # (B, H, N, d)
    mistakes = {
        "you tiled the heads with repeat (heads 0, 1, 0, 1, ...)": (
            k.repeat(1, per_group, 1, 1),
            f"query head h must use key/value head h // {per_group}, so the copies of one head sit next to each "
            f"other (0, 0, ..., 1, 1, ...): use repeat_interleave({per_group}, dim=1)."),
        "you repeated the tokens instead of the heads": (
            k.repeat_interleave(per_group, dim=2),
            "the heads are axis 1 of (B, G, N, d): repeat_interleave along dim=1."),
        "you repeated the head_dim features instead of the heads": (
            k.repeat_interleave(per_group, dim=3),
            "the heads are axis 1 of (B, G, N, d): repeat_interleave along dim=1."),
    }
    return compare_tensors(answer, expected, name="your repeated k", likely_mistakes=mistakes,
                           success=f"{list(expected.shape)}: each of the {k.shape[1]} key/value heads serves "
                                   f"{per_group} query heads in a row.")


# ------------------------------------------------------------------------------ predict: what the cache saves


@prediction_checker
def check_cache_flops_prediction(prediction: Any, flops_no_cache: int, flops_cache: int, t: int) -> Verdict:
    """Predict before you run: how many times more matrix-product FLOPs re-running the layer on all ``t``
    tokens spends on the newest token than one cached step (``flops_no_cache / flops_cache``, measured)."""
    got = as_number(prediction, "your prediction", hint="write one number, e.g. prediction = 10.")
    if isinstance(got, Verdict):
        return got
    ratio = flops_no_cache / flops_cache
    explain = (f"measured: {flops_no_cache:,} FLOPs re-running the layer on {t} tokens, {flops_cache:,} for one "
               f"cached step, {ratio:,.0f} times as many. Re-running recomputes all {t} rows (projections and "
               f"scores), of which only the newest is new; the cached step does one row of each.")
    if math.isclose(got, ratio, rel_tol=0.2):
        return correct(explain)
    if got > 1 and math.isclose(got, ratio * t, rel_tol=0.5):
        return wrong(f"you predicted {got:,.0f}, about t² = {t * t:,}. {explain}",
                     "the cached step is not free: its one query still meets all t cached keys, so its cost grows "
                     "like t too; the ratio of the two is t, not t².")
    if got <= 1.5:
        return wrong(f"you predicted {got:g}: about the same work. {explain}",
                     "without a cache the layer projects and attends from every one of the t tokens again.")
    return wrong(f"you predicted {got:,.4g}. {explain}",
                 "count the rows: re-running computes t output rows, the cached step one.")


# ------------------------------------------------------------------------------ write the cached generation loop


def _recording(model: Any) -> tuple[Any, list[tuple[str, int, int]]]:
    """A copy of ``model`` whose ``step`` and ``forward`` note each call: (kind, new tokens, tokens cached before)."""
    copy = deepcopy(model)
    calls: list[tuple[str, int, int]] = []
    step, forward = copy.step, copy.forward

    def recorded_step(tokens_new: Tensor, cache: Any) -> Tensor:
        calls.append(("step", int(tokens_new.shape[-1]), int(getattr(cache, "length", -1))))
        return step(tokens_new, cache)

    def recorded_forward(tokens: Tensor) -> Tensor:
        calls.append(("forward", int(tokens.shape[-1]), 0))
        return forward(tokens)

    copy.step, copy.forward = recorded_step, recorded_forward
    return copy, calls


@checker
def check_generate_with_cache(answer: Any, model: Any, prompt: Tensor, num_new: int) -> Verdict:
    """Exercise: a function ``generate_with_cache(model, prompt, num_new) -> tokens (B, N_prompt + num_new)``:
    greedy decoding that fills a ``KVCache`` with the prompt once (the prefill) and then feeds
    ``model.step`` one new token per step. Run on ``model`` and ``prompt``; compared with the loop
    without the cache, token for token, and with the calls it made."""
    if not callable(answer):
        return wrong(f"the answer should be a function, got {type(answer).__name__} {answer!r:.60}.",
                     "define it with def, then write answer = generate_with_cache (no brackets).")
    expected = generate_greedy(model, prompt, num_new, use_cache=False)  # (B, N_prompt + num_new)
    n_prompt = prompt.shape[1]
    recorder, calls = _recording(model)
    try:
        with torch.no_grad():
            got = answer(recorder, prompt.clone(), num_new)
    except Exception as problem:  # the learner's code failed: say how, never a traceback
        text = error_text(problem)
        hint = ("each step feeds only the newest token; the cache already holds the others' keys and values."
                if "max_tokens" in text else "run your function on the prompt in a cell of its own to see where it fails.")
        return wrong(f"your function raised {text}", hint)
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        shape = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
        return wrong(f"your function returned {shape}; expected a tensor of shape {list(expected.shape)}: the "
                     f"{n_prompt} prompt tokens followed by the {num_new} new ones.",
                     "return torch.cat of the prompt and every chosen token, along dim=1.")
    forwards = [c for c in calls if c[0] == "forward"]
    steps = [c for c in calls if c[0] == "step"]
    if forwards:
        return wrong(f"your function called model(tokens) {len(forwards)} times: that runs every position again, "
                     "the loop without the cache.",
                     "with the cache, call only model.step(new_tokens, cache): the prompt once, then one token.")
    if not steps:
        return wrong("your function never called model.step, so nothing went through the cache.",
                     "logits = model.step(new_tokens, cache)[:, -1] gives the next token's scores.")
    if not torch.equal(got[:, :n_prompt], prompt):
        return wrong("the returned tokens do not start with the prompt.",
                     "start from tokens = prompt and append each new token with torch.cat(..., dim=1).")
    if steps[0][1] != n_prompt:
        return wrong(f"your first model.step fed {steps[0][1]} token(s), not the {n_prompt} of the prompt: the "
                     "cache never saw the whole prompt's keys and values.",
                     "the prefill: logits = model.step(prompt, cache)[:, -1], once, before the loop.")
    later = [n for _, n, _ in steps[1:] if n != 1]
    if later:
        return wrong(f"after the prefill, a step fed {later[0]} tokens: tokens already in the cache were fed again.",
                     "each step feeds only the newest token; the cache already holds the others' keys and values.")
    if not torch.equal(got, expected):
        first = int((got != expected).any(dim=0).nonzero()[0])
        return wrong(f"your tokens differ from the loop without the cache from position {first} on.",
                     "feed the token you just chose (the argmax of the last position's logits), then append it.")
    return correct(f"the same {num_new} tokens as the loop without the cache, with {len(steps)} calls of "
                   f"model.step: the prompt's {n_prompt} tokens once, then one token at a time.")
