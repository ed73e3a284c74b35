"""Checkers for 09 · Efficient attention: one online-softmax step, the size of a KV cache, and
repeating key/value heads for grouped-query attention.

Each judge recomputes the right answer from the exercise's own inputs and recognises the typical
wrong answers (the old sum not rescaled, K or V forgotten, query heads counted instead of groups,
``repeat`` instead of ``repeat_interleave``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..efficient import online_softmax_update, repeat_kv_heads
from ..measure import kv_cache_bytes
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong

__all__ = ["check_online_softmax_step", "check_kv_cache_size", "check_repeat_kv"]


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
