"""Efficient attention (lesson 09): online softmax, tiled attention, a KV cache, grouped-query attention.

Their costs are counted and timed with :mod:`attn_helpers.measure`.

Imports torch only. Shapes use the series' notation (``B`` batch, ``H`` query heads, ``G`` key/value
heads or *groups*, ``N_q`` queries, ``N_k`` keys, ``d_k`` key width, ``d_v`` value width).
Masks follow :mod:`attn_helpers.attention`: boolean ``True`` = may attend, or floating = added to
the scores; a query row whose keys are all blocked gets a zero output, never NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from .arguments import broadcast_shape, check_mask, check_positive_int, check_qkv, check_tensor, shape_of

__all__ = [
    "online_softmax_update",
    "online_softmax",
    "tiled_attention",
    "KVCache",
    "cached_attention_step",
    "repeat_kv_heads",
    "grouped_query_attention",
]

# --------------------------------------------------------------------------------------------
# Online softmax: the statistics of a softmax, computed one block at a time
# --------------------------------------------------------------------------------------------

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
        raise ValueError(
            f"running_max and running_sum must have the shape of block without its last axis, "
            f"{shape_of(block)[:-1]}: got running_max {shape_of(running_max)}, running_sum "
            f"{shape_of(running_sum)}, block {shape_of(block)}"
        )
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


# --------------------------------------------------------------------------------------------
# Tiled attention (FlashAttention's loop, written in PyTorch)
# --------------------------------------------------------------------------------------------

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

    Same conventions and result as :func:`attn_helpers.scaled_dot_product_attention`:
    ``q (..., N_q, d_k)``, ``k (..., N_k, d_k)``, ``v (..., N_k, d_v)`` -> ``(..., N_q, d_v)``;
    ``mask`` boolean (``True`` = may attend) or floating (added), broadcastable to
    ``(..., N_q, N_k)``; ``scale=None`` means ``d_k ** -0.5`` (``0.0`` is used as given); a row whose
    keys are all blocked gives zeros. ``is_causal=True`` applies the causal mask of
    :func:`attn_helpers.causal_mask` without building it, and skips the key blocks that lie
    entirely in the future (it may be combined with ``mask``).

    For each block of ``block_size`` queries, the loop visits the key/value blocks and keeps, per query
    row, the running max ``m``, the running sum ``l`` of ``exp(score - m)`` and the running weighted sum
    ``acc`` of values, rescaling ``l`` and ``acc`` by ``exp(m_old - m_new)`` (the online softmax). The
    scores exist a tile at a time (``block_size`` by ``block_size`` per head, and a few temporaries of
    that size), so memory grows linearly with ``N``. A tuned version of this loop is
    ``benchmarks/tuned_tiled.py``, which ``benchmarks/attention.py`` races against PyTorch's kernel.
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
    out = q.new_zeros(*batch, n_q, d_v)  # (..., N_q, d_v), filled one query block at a time
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
                s = _masked(s, mask[..., i0:i1, j0:j1])
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
        out[..., i0:i1, :] = acc / l.masked_fill(l == 0, 1.0)  # a row that saw no key stays 0
    return out  # (..., N_q, d_v)


def _masked(s: Tensor, mask: Tensor) -> Tensor:
    """A tile of scores with its tile of ``mask`` applied: ``-inf`` where a boolean mask is False, else added."""
    return s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.to(s.dtype)


# --------------------------------------------------------------------------------------------
# KV cache for step-by-step decoding
# --------------------------------------------------------------------------------------------

class KVCache:
    """The keys and values of the tokens decoded so far, kept so each new token computes only its own.

    ``KVCache(max_tokens)``; the first :meth:`append` fixes the other sizes and allocates
    ``k (..., max_tokens, d_k)`` and ``v (..., max_tokens, d_v)`` once. Each :meth:`append` writes
    ``k_new (..., n_new, d_k)`` and ``v_new (..., n_new, d_v)`` after the tokens already stored and
    returns views of everything stored, ``(..., length, d_k)`` and ``(..., length, d_v)``.
    """

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = check_positive_int("max_tokens", max_tokens)
        self.length = 0
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store ``k_new (..., n_new, d_k)`` and ``v_new (..., n_new, d_v)``; return all stored keys and values."""
        k_new = check_tensor("k_new", k_new, min_ndim=2)
        v_new = check_tensor("v_new", v_new, min_ndim=2)
        if k_new.shape[:-1] != v_new.shape[:-1]:
            raise ValueError(
                f"k_new and v_new must agree on every axis but the last (one value per key): "
                f"k_new has shape {shape_of(k_new)}, v_new has shape {shape_of(v_new)}"
            )
        n_new = k_new.shape[-2]
        if self.k is None or self.v is None:
            self.k = k_new.new_zeros(*k_new.shape[:-2], self.max_tokens, k_new.shape[-1])  # (..., max_tokens, d_k)
            self.v = v_new.new_zeros(*v_new.shape[:-2], self.max_tokens, v_new.shape[-1])  # (..., max_tokens, d_v)
        expected = (*self.k.shape[:-2], "n_new", self.k.shape[-1])
        if k_new.shape[:-2] != self.k.shape[:-2] or k_new.shape[-1] != self.k.shape[-1] \
                or v_new.shape[-1] != self.v.shape[-1]:
            raise ValueError(
                f"k_new must have shape {list(expected)} and v_new a last axis of {self.v.shape[-1]}, like the "
                f"tokens already cached; got k_new {shape_of(k_new)}, v_new {shape_of(v_new)}"
            )
        if self.length + n_new > self.max_tokens:
            raise ValueError(
                f"the cache holds at most max_tokens={self.max_tokens} tokens; it has {self.length} and "
                f"k_new adds {n_new} (k_new has shape {shape_of(k_new)})"
            )
        self.k[..., self.length:self.length + n_new, :] = k_new
        self.v[..., self.length:self.length + n_new, :] = v_new
        self.length += n_new
        return self.k[..., :self.length, :], self.v[..., :self.length, :]  # (..., length, d_k), (..., length, d_v)

    def truncate(self, length: int) -> None:
        """Forget every token after the first ``length`` (to re-run a step, or drop rejected guesses)."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self.length:
            raise ValueError(f"length must be an int in [0, {self.length}] (the tokens cached), got {length!r}")
        self.length = length

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (for all ``max_tokens``; 0 before the first append)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def __repr__(self) -> str:
        shape = "empty" if self.k is None else f"k {shape_of(self.k)}, v {shape_of(self.v)}"
        return f"KVCache(length={self.length}, max_tokens={self.max_tokens}, {shape})"


def cached_attention_step(layer: MultiHeadAttention, x_new: Tensor, cache: KVCache) -> Tensor:
    """Self-attention of :class:`attn_helpers.MultiHeadAttention` for the newest token(s) only.

    ``x_new (B, n_new, d_model) -> (B, n_new, d_model)``: projects only the new tokens, appends
    their keys and values (``(B, H, n_new, head_dim)``) to ``cache``, and lets the new queries
    attend to every cached token (causally among the new ones). Feeding a sequence one token at a
    time gives the rows of ``layer(x, mask=causal_mask(N))``, with ``O(t)`` work at step ``t``
    instead of ``O(t^2)`` for re-running the layer on the whole prefix.
    """
    _check_step(layer, x_new, cache)
    H, n_new = layer.num_heads, x_new.shape[1]
    q = split_heads(layer.q_proj(x_new), H)  # (B, H, n_new, head_dim)
    k = split_heads(layer.k_proj(x_new), H)  # (B, H, n_new, head_dim)
    v = split_heads(layer.v_proj(x_new), H)  # (B, H, n_new, head_dim)
    past = cache.length  # tokens cached before this call
    k_all, v_all = cache.append(k, v)  # (B, H, past + n_new, head_dim): views of the cache's memory
    mask = None  # one new token may see every cached one
    if n_new > 1:  # a prefill: new token i (at position past + i) sees keys up to its own position
        rows = torch.arange(past, past + n_new, device=x_new.device)[:, None]  # (n_new, 1)
        mask = torch.arange(past + n_new, device=x_new.device)[None, :] <= rows  # (n_new, past + n_new)
    heads = scaled_dot_product_attention(q, k_all, v_all, mask)  # (B, H, n_new, head_dim)
    return layer.out_proj(merge_heads(heads))  # (B, n_new, d_model)


def _check_step(layer: object, x_new: object, cache: object) -> None:
    """The argument checks of :func:`cached_attention_step`, with errors that name what is wrong."""
    if not isinstance(layer, MultiHeadAttention):
        raise TypeError(f"layer must be an attn_helpers.MultiHeadAttention, got {type(layer).__name__}")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an attn_helpers.efficient.KVCache, got {type(cache).__name__}")
    x_new = check_tensor("x_new", x_new, ndim=3)
    if x_new.shape[-1] != layer.d_model or layer.kdim != layer.d_model or layer.vdim != layer.d_model:
        raise ValueError(
            f"x_new must have shape (B, n_new, d_model={layer.d_model}) for a self-attention layer "
            f"(kdim = vdim = d_model); got x_new {shape_of(x_new)}, kdim={layer.kdim}, vdim={layer.vdim}"
        )


# --------------------------------------------------------------------------------------------
# Grouped-query and multi-query attention
# --------------------------------------------------------------------------------------------

def _check_groups(num_heads: int, num_kv_heads: int, where: str) -> int:
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_heads={num_heads} query heads cannot be shared out evenly over {num_kv_heads} key/value "
            f"heads{where}: {num_heads} / {num_kv_heads} = {num_heads / num_kv_heads:g} query heads per group "
            f"(try {[g for g in range(1, num_heads + 1) if num_heads % g == 0]} key/value heads)"
        )
    return num_heads // num_kv_heads


def repeat_kv_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., G, N, d) -> (..., num_heads, N, d)``: each key/value head repeated for its group.

    Query head ``h`` uses key/value head ``h // (num_heads // G)``, so the copies of a head sit
    next to each other (``repeat_interleave`` on the heads axis, not ``repeat``, which would tile).
    """
    x = check_tensor("x", x, min_ndim=3)
    check_positive_int("num_heads", num_heads)
    per_group = _check_groups(num_heads, x.shape[-3], f" (x has shape {shape_of(x)}, heads on axis -3)")
    return x.repeat_interleave(per_group, dim=-3)  # (..., H, N, d)


def grouped_query_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, scale: float | None = None
) -> Tensor:
    """Attention where ``H`` query heads share ``G`` key/value heads, by reshaping, without copying K and V.

    ``q (..., H, N_q, d_k)``, ``k (..., G, N_k, d_k)``, ``v (..., G, N_k, d_v)`` -> ``(..., H, N_q, d_v)``,
    with ``H`` a multiple of ``G`` (``G = H``: multi-head; ``G = 1``: multi-query). The ``H/G`` query
    heads of a group are stacked as rows, ``(..., G, H/G * N_q, d_k)``, so each group's queries meet its
    one key/value head in an ordinary product (broadcasting a size-1 heads axis instead would make
    ``matmul`` expand K to ``H`` heads in memory). Equal to
    ``scaled_dot_product_attention(q, repeat_kv_heads(k, H), repeat_kv_heads(v, H), mask)``.
    ``mask`` as in :func:`attn_helpers.scaled_dot_product_attention`, broadcastable to ``(..., H, N_q, N_k)``.
    """
    q = check_tensor("q", q, min_ndim=3)
    k = check_tensor("k", k, min_ndim=3)
    v = check_tensor("v", v, min_ndim=3)
    if k.shape[-3] != v.shape[-3]:
        raise ValueError(f"k and v must have the same number of key/value heads (axis -3): k has shape "
                         f"{shape_of(k)}, v has shape {shape_of(v)}")
    H, G, n_q = q.shape[-3], k.shape[-3], q.shape[-2]
    per_group = _check_groups(H, G, f" (q has shape {shape_of(q)}, k has shape {shape_of(k)})")
    q_rows = q.reshape(*q.shape[:-3], G, per_group * n_q, q.shape[-1])  # (..., G, H/G * N_q, d_k)
    if mask is not None:
        scores_shape = broadcast_shape(q.shape[:-2], k.shape[:-3] + (H,)) + (n_q, k.shape[-2])
        mask = check_mask(mask, torch.Size(scores_shape)).expand(scores_shape)  # (..., H, N_q, N_k)
        mask = mask.reshape(*scores_shape[:-3], G, per_group * n_q, k.shape[-2])  # (..., G, H/G * N_q, N_k)
    out = scaled_dot_product_attention(q_rows, k, v, mask, scale=scale)  # (..., G, H/G * N_q, d_v)
    return out.reshape(*out.shape[:-3], H, n_q, v.shape[-1])  # (..., H, N_q, d_v)
