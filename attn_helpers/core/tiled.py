"""Lesson 09's loop: the online softmax, and attention computed tile by tile with it (FlashAttention's idea).

Imports torch only. ``tiled_attention`` is written to be read; a version tuned for speed lives in
``benchmarks/tuned_tiled.py``, which ``benchmarks/attention.py`` races against PyTorch's kernel.
Masks follow :mod:`.masks`; a query row whose keys are all blocked gets a zero output, never NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .arguments import broadcast_shape, check_mask, check_positive_int, check_qkv, check_tensor, shape_of
from .masks import apply_mask

__all__ = ["online_softmax_update", "online_softmax", "tiled_attention"]


def _safe_max(m: Tensor) -> Tensor:
    """``m`` with ``-inf`` replaced by 0, so ``exp(s - m)`` is 0 (not NaN) on rows that saw only ``-inf``."""
    return m.masked_fill(torch.isneginf(m), 0.0)


def online_softmax_update(running_max: Tensor, running_sum: Tensor, block: Tensor) -> tuple[Tensor, Tensor]:
    """One step of the online softmax: fold a new block of scores into the running statistics.

    ``running_max (...)`` is the largest score seen so far (``-inf`` before the first block),
    ``running_sum (...)`` is ``sum(exp(s - running_max))`` over the scores seen so far (``0``
    before the first block), ``block (..., b)`` holds the next ``b`` scores of each row.
    Returns ``(new_max, new_sum)``, both ``(...)``::

        new_max = max(running_max, max(block))
        new_sum = running_sum * exp(running_max - new_max) + sum(exp(block - new_max))

    The factor ``exp(running_max - new_max)`` (at most 1) rescales the old sum to the new maximum.
    After the last block, ``softmax(s)_j = exp(s_j - new_max) / new_sum``.
    """
    block = check_tensor("block", block, min_ndim=1)
    running_max = check_tensor("running_max", running_max, min_ndim=0)
    running_sum = check_tensor("running_sum", running_sum, min_ndim=0)
    if running_max.shape != block.shape[:-1] or running_sum.shape != block.shape[:-1]:
        raise ValueError(f"running_max and running_sum must have the shape of block without its last axis, "
                         f"{shape_of(block)[:-1]}: got running_max {shape_of(running_max)}, running_sum "
                         f"{shape_of(running_sum)}, block {shape_of(block)}")
    new_max = torch.maximum(running_max, block.amax(dim=-1))  # (...)
    safe = _safe_max(new_max)  # (...)
    rescale = torch.exp(running_max - safe)  # (...), 0 when nothing was seen before
    new_sum = running_sum * rescale + torch.exp(block - safe[..., None]).sum(dim=-1)  # (...)
    return new_max, new_sum


def online_softmax(x: Tensor, *, block_size: int = 128) -> Tensor:
    """``softmax(x, dim=-1)`` computed from statistics gathered ``block_size`` entries at a time.

    ``x (..., n) -> (..., n)``. One pass over the blocks with :func:`online_softmax_update` finds
    each row's maximum and sum of exponentials without ever holding a whole row's exponentials;
    then ``exp(x - max) / sum``. A row of only ``-inf`` gives zeros (like this package's attention).
    """
    x = check_tensor("x", x, min_ndim=1)
    check_positive_int("block_size", block_size)
    running_max = x.new_full(x.shape[:-1], float("-inf"))  # (...)
    running_sum = x.new_zeros(x.shape[:-1])  # (...)
    for start in range(0, x.shape[-1], block_size):
        running_max, running_sum = online_softmax_update(running_max, running_sum, x[..., start:start + block_size])
    weights = torch.exp(x - _safe_max(running_max)[..., None])  # (..., n)
    return weights / running_sum.masked_fill(running_sum == 0, 1.0)[..., None]  # (..., n)


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    block_size: int = 256,
    is_causal: bool = False,
) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` block by block, never building the ``N_q x N_k`` matrix.

    Same arguments and result as :func:`attend`'s output, ``(..., N_q, d_v)``. ``is_causal=True`` applies
    :func:`causal_mask` without building it and skips the key blocks entirely in the future (``mask`` may be
    given too).

    For each block of ``block_size`` queries, the loop visits the key/value blocks and keeps, per query
    row, the running max ``m``, the running sum ``l`` of ``exp(score - m)`` and the running weighted sum
    ``acc`` of values, rescaling ``l`` and ``acc`` by ``exp(m_old - m_new)`` (the online softmax). The
    scores exist a tile at a time (``block_size`` by ``block_size`` per head, and a few temporaries of
    that size), so memory grows linearly with ``N``.
    """
    q, k, v = check_qkv(q, k, v)
    check_positive_int("block_size", block_size)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be True or False, got {is_causal!r}")
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    scores_shape = broadcast_shape(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
    if mask is not None:
        mask = check_mask(mask, torch.Size(scores_shape)).expand(scores_shape)  # (..., N_q, N_k)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])  # the output's leading axes
    context = q.new_zeros(*batch, n_q, d_v)  # (..., N_q, d_v), filled one query block at a time
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        q_blk = q[..., i0:i1, :] * scale  # (..., bq, d_k)
        m = q.new_full((*batch, i1 - i0, 1), float("-inf"))  # (..., bq, 1) running max
        l = q.new_zeros(*batch, i1 - i0, 1)  # (..., bq, 1) running sum of exp(s - m)
        acc = q.new_zeros(*batch, i1 - i0, d_v)  # (..., bq, d_v) running weighted sum of values
        last_key = min(n_k, i1) if is_causal else n_k  # causal: no key after the block's last query
        for j0 in range(0, last_key, block_size):
            j1 = min(j0 + block_size, last_key)
            s = q_blk @ k[..., j0:j1, :].mT  # (..., bq, bk): one tile of scores
            if mask is not None:
                s = apply_mask(s, mask[..., i0:i1, j0:j1])  # (..., bq, bk)
            if is_causal:
                rows = torch.arange(i0, i1, device=q.device)[:, None]  # (bq, 1) query positions
                cols = torch.arange(j0, j1, device=q.device)[None, :]  # (1, bk) key positions
                s = s.masked_fill(cols > rows, float("-inf"))  # key j is in query i's future
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            safe = _safe_max(m_new)  # (..., bq, 1): 0 where a row saw only -inf (exp gives 0, not NaN)
            p = torch.exp(s - safe)  # (..., bq, bk) unnormalised weights
            rescale = torch.exp(m - safe)  # (..., bq, 1): takes the old l and acc to the new max
            l = l * rescale + p.sum(dim=-1, keepdim=True)  # (..., bq, 1)
            acc = acc * rescale + p @ v[..., j0:j1, :]  # (..., bq, d_v)
            m = m_new
        context[..., i0:i1, :] = acc / l.masked_fill(l == 0, 1.0)  # a row that saw no key stays 0
    return context  # (..., N_q, d_v)


