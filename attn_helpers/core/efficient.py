"""Efficient attention: the same attention in less memory (09), and memories of other shapes (12, 13).

Lesson 09: the online softmax and tiled attention (FlashAttention's idea; ``benchmarks/tuned_tiled.py`` is the loop
tuned for speed), the KV cache, grouped-query attention (``H`` query heads share ``G`` key/value heads) and its
Llama-style layer, with lesson 12's steps. Lesson 13: DeepSeek-V2's multi-head latent attention (DeepSeek-AI, 2024,
section 2.1; ``transformers``' ``DeepseekV3Attention``), linear attention (Katharopoulos et al., 2020), the delta rule
(Schlag et al., 2021) and Gated DeltaNet (Yang et al., 2025). Layout ``(B, H, N, d)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .arguments import (broadcast_shape, check_heads, check_kv_heads, check_mask, check_positive_int, check_qkv,
                        check_tensor, check_tokens, shape_of)
from .attention import attend, merge_heads, split_heads
from .layers import MultiHeadAttention, Traceable
from .masks import apply_mask, mask_for_heads
from .positions import DEFAULT_BASE, apply_rope, check_rope_settings

__all__ = ["online_softmax_update", "online_softmax", "tiled_attention", "KVCache", "cached_attention_step",
           "repeat_kv_heads", "grouped_query_attention", "GroupedQueryAttention", "TRANSFORMERS_LAYERS",
           "LatentAttention", "elu_feature_map", "linear_attention", "linear_attention_step", "gated_delta_rule",
           "gated_delta_step", "gated_delta_chunk"]


# --- Lesson 09: the online softmax, and attention tile by tile ---

def _safe_max(m: Tensor) -> Tensor:
    """``m`` with ``-inf`` replaced by 0, so ``exp(s - m)`` is 0 (not NaN) on rows that saw only ``-inf``."""
    return m.masked_fill(torch.isneginf(m), 0.0)


def online_softmax_update(running_max: Tensor, running_sum: Tensor, block: Tensor) -> tuple[Tensor, Tensor]:
    """Lesson 09: fold ``block (..., b)`` into a row's running max (``-inf`` at first) and running sum of
    ``exp(s - running_max)`` (``0`` at first), both ``(...)``; returns ``(new_max, new_sum)``::

        new_max = max(running_max, max(block))
        new_sum = running_sum * exp(running_max - new_max) + sum(exp(block - new_max))
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
    """Lesson 09: ``softmax(x, dim=-1)``, ``(..., n) -> (..., n)``, from a max and a sum gathered ``block_size``
    entries at a time (:func:`online_softmax_update`), then ``exp(x - max) / sum``. A row of only ``-inf`` gives 0."""
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
    """Lesson 09: :func:`attend`'s output ``(..., N_q, d_v)`` tile by tile, never the ``N_q x N_k`` matrix.

    Per query row: running max ``m``, running sum ``l`` of ``exp(score - m)``, running weighted sum ``acc`` of
    values, ``l`` and ``acc`` rescaled by ``exp(m_old - m_new)``. ``is_causal=True`` masks the future without
    building the mask and skips the key blocks entirely in it (``mask`` may be given too).
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


# --- Lesson 09: the KV cache of step-by-step decoding ---

class KVCache:
    """Lesson 09: the keys and values of the tokens decoded so far. The first :meth:`append` allocates
    ``k (..., max_tokens, d_k)`` and ``v (..., max_tokens, d_v)`` once; each append writes after what is stored."""

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
            raise ValueError(f"k_new and v_new must agree on every axis but the last (one value per key): "
                             f"k_new has shape {shape_of(k_new)}, v_new has shape {shape_of(v_new)}")
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
            raise ValueError(f"the cache holds at most max_tokens={self.max_tokens} tokens; it has {self.length} and "
                             f"k_new adds {n_new} (k_new has shape {shape_of(k_new)})")
        self.k[..., self.length:self.length + n_new, :] = k_new
        self.v[..., self.length:self.length + n_new, :] = v_new
        self.length += n_new
        return self.k[..., :self.length, :], self.v[..., :self.length, :]  # (..., length, d_k), (..., length, d_v)

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (for all ``max_tokens``; 0 before the first append)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def __repr__(self) -> str:
        shape = "empty" if self.k is None else f"k {shape_of(self.k)}, v {shape_of(self.v)}"
        return f"KVCache(length={self.length}, max_tokens={self.max_tokens}, {shape})"


def cached_attention_step(layer: MultiHeadAttention | GroupedQueryAttention, x_new: Tensor, cache: KVCache) -> Tensor:
    """Lesson 09: ``layer``'s self-attention for the newest token(s) only, ``x_new (B, n_new, d_model) -> (B, n_new,
    d_model)``: their keys and values go into ``cache``, their queries attend to every cached token (causally among
    the new ones). Token by token it gives the rows of ``layer(x, mask=causal_mask(N))``."""
    _check_step(layer, x_new, cache)
    past, n_new = cache.length, x_new.shape[1]  # tokens cached before this call, tokens added by it
    positions = torch.arange(past, past + n_new, device=x_new.device)  # (n_new,): the new tokens' positions
    if isinstance(layer, GroupedQueryAttention):  # q (B, H, n_new, head_dim); k, v (B, G, n_new, head_dim)
        q, k, v = layer.project(x_new, positions if layer.rope else None)  # q and k rotated at their positions
    else:  # MultiHeadAttention: G = H key/value heads, no positions
        projections = (layer.q_proj, layer.k_proj, layer.v_proj)
        q, k, v = (split_heads(proj(x_new), layer.num_heads) for proj in projections)  # (B, H, n_new, head_dim)
    k_all, v_all = cache.append(k, v)  # (B, G, past + n_new, head_dim): views of the cache's memory
    mask = None  # one new token may see every cached one
    if n_new > 1:  # a prefill: new token i (at position past + i) sees keys up to its own position
        mask = torch.arange(past + n_new, device=x_new.device)[None, :] <= positions[:, None]  # (n_new, past + n_new)
    heads = grouped_query_attention(q, k_all, v_all, mask)  # (B, H, n_new, head_dim)
    return layer.out_proj(merge_heads(heads))  # (B, n_new, d_model)


def _check_step(layer: object, x_new: object, cache: object) -> None:
    """The argument checks of :func:`cached_attention_step`, with errors that name what is wrong."""
    if not isinstance(layer, (MultiHeadAttention, GroupedQueryAttention)):
        raise TypeError(f"layer must be an attn_helpers.MultiHeadAttention or GroupedQueryAttention, "
                        f"got {type(layer).__name__}")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an attn_helpers.KVCache, got {type(cache).__name__}")
    if isinstance(layer, GroupedQueryAttention) and not layer.plain:
        raise ValueError(f"cached_attention_step runs Llama-style layers; this one changes the scores ({layer.extra_repr()}): "
                         "scale, softcap and sinks are not applied here")
    if isinstance(layer, MultiHeadAttention) and not layer.kdim == layer.vdim == layer.d_model:
        raise ValueError(f"layer must be a self-attention layer (kdim = vdim = d_model={layer.d_model}); "
                         f"got kdim={layer.kdim}, vdim={layer.vdim}")
    check_tokens("x_new", x_new, layer.d_model, "d_model")


# --- Lesson 09: grouped-query attention (and lesson 12's steps in its layer) ---

def repeat_kv_heads(x: Tensor, num_heads: int) -> Tensor:
    """Lesson 09: ``(..., G, N, d) -> (..., num_heads, N, d)``; query head ``h`` uses key/value head
    ``h // (num_heads // G)``, so a head's copies sit side by side (``repeat_interleave``, not ``repeat``)."""
    x = check_tensor("x", x, min_ndim=3)
    check_positive_int("num_heads", num_heads)
    per_group = check_kv_heads(num_heads, x.shape[-3], f" (x has shape {shape_of(x)}, heads on axis -3)")
    return x.repeat_interleave(per_group, dim=-3)  # (..., H, N, d)


def grouped_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *,
                            scale: float | None = None, softcap: float | None = None,
                            sinks: Tensor | None = None) -> Tensor:
    """Lesson 09: ``q (..., H, N_q, d_k)``, ``k (..., G, N_k, d_k)``, ``v (..., G, N_k, d_v)`` -> ``(..., H, N_q, d_v)``.
    A group's ``H/G`` query heads, stacked as rows ``(..., G, H/G * N_q, d_k)``, meet its one key/value head in one
    product, K and V never copied (equal to ``attend`` on ``repeat_kv_heads(k, H)``); ``mask``, ``softcap`` and
    ``sinks (H,)`` as in :func:`attend`."""
    q, k, v = (check_tensor(name, t, min_ndim=3) for name, t in (("q", q), ("k", k), ("v", v)))
    if k.shape[-3] != v.shape[-3]:
        raise ValueError(f"k and v must have the same number of key/value heads (axis -3): k has shape "
                         f"{shape_of(k)}, v has shape {shape_of(v)}")
    H, G, n_q = q.shape[-3], k.shape[-3], q.shape[-2]
    per_group = check_kv_heads(H, G, f" (q has shape {shape_of(q)}, k has shape {shape_of(k)})")
    q_rows = q.reshape(*q.shape[:-3], G, per_group * n_q, q.shape[-1])  # (..., G, H/G * N_q, d_k)
    if mask is not None:
        scores_shape = broadcast_shape(q.shape[:-2], k.shape[:-3] + (H,)) + (n_q, k.shape[-2])
        mask = check_mask(mask, torch.Size(scores_shape)).expand(scores_shape)  # (..., H, N_q, N_k)
        mask = mask.reshape(*scores_shape[:-3], G, per_group * n_q, k.shape[-2])  # (..., G, H/G * N_q, N_k)
    if sinks is not None:  # one logit per query head -> one per row of its group
        if not isinstance(sinks, Tensor) or tuple(sinks.shape) != (H,):
            raise ValueError(f"sinks must hold one logit per query head, shape ({H},), got "
                             f"{list(getattr(sinks, 'shape', [])) or type(sinks).__name__} (q has shape {shape_of(q)})")
        sinks = sinks.reshape(G, per_group, 1).expand(G, per_group, n_q).reshape(G, per_group * n_q)  # (G, H/G * N_q)
    out, _, _ = attend(q_rows, k, v, mask=mask, scale=scale, softcap=softcap, sinks=sinks)  # (..., G, H/G * N_q, d_v)
    return out.reshape(*out.shape[:-3], H, n_q, v.shape[-1])  # (..., H, N_q, d_v)


QK_NORMS = (None, "head", "projection")

#: The ``transformers`` attention layers :meth:`GroupedQueryAttention.from_transformers` copies.
TRANSFORMERS_LAYERS = ("LlamaAttention", "MistralAttention", "Qwen3Attention", "Olmo2Attention", "Gemma2Attention",
                       "GptOssAttention")


class GroupedQueryAttention(Traceable):
    """Lessons 09 and 12: Llama's attention layer, ``x (B, N, d_model) -> (B, N, d_model)``: ``num_heads`` query heads
    share ``num_kv_heads`` key/value heads (:func:`grouped_query_attention`), q and k rotated with ``rope=True``.

    Lesson 12's steps, each off by default: ``qk_norm="head"`` (Qwen3) or ``"projection"`` (OLMo 2), an RMSNorm of q
    and k; ``scale`` (Gemma 2's ``query_pre_attn_scalar ** -0.5``); ``softcap`` (Gemma 2); ``sinks=True`` (gpt-oss).
    A sliding window is the mask the caller passes; ``window`` only records a copied layer's.
    """

    AXES = {"x": "batch tokens d_model", "q": "batch H tokens head_dim", "k": "batch kv_heads tokens head_dim",
            "v": "batch kv_heads tokens head_dim", "heads": "batch H tokens head_dim",
            "merged": "batch tokens H*head_dim", "out": "batch tokens d_model"}

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, *, rope: bool = True,
                 base: float = DEFAULT_BASE, pairing: str = "half", bias: bool = False,
                 qkv_bias: bool | None = None, proj_bias: bool | None = None, head_dim: int | None = None,
                 qk_norm: str | None = None, eps: float = 1e-6, scale: float | None = None,
                 softcap: float | None = None, sinks: bool = False, window: int | None = None) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        if head_dim is None:
            self.head_dim = check_heads(d_model, num_heads, chan_name="d_model")
        else:
            check_positive_int("num_heads", num_heads)
            self.head_dim = check_positive_int("head_dim", head_dim)
        check_kv_heads(num_heads, num_kv_heads)
        self.rope = bool(rope)
        if self.rope:
            where = f" (d_model={d_model} / num_heads={num_heads})" if head_dim is None else f" (head_dim={head_dim})"
            self.base, self.pairing = check_rope_settings(self.head_dim, base, pairing, where)
        if qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm must be one of {list(QK_NORMS)}, got {qk_norm!r}")
        for name, value in (("scale", scale), ("softcap", softcap)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"{name} must be None or a number greater than 0, got {value!r}")
        if window is not None:
            check_positive_int("window", window)
        self.qk_norm, self.softcap, self.window = qk_norm, softcap, window
        self.scale = self.head_dim ** -0.5 if scale is None else float(scale)
        width, kv_width = num_heads * self.head_dim, num_kv_heads * self.head_dim
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.q_proj = nn.Linear(d_model, width, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(width, d_model, bias=bias if proj_bias is None else proj_bias)
        if qk_norm is not None:  # RMSNorm over head_dim (per head) or over the whole projection
            self.q_norm = nn.RMSNorm(self.head_dim if qk_norm == "head" else width, eps=eps)
            self.k_norm = nn.RMSNorm(self.head_dim if qk_norm == "head" else kv_width, eps=eps)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None  # (H,): one logit per query head

    def project(self, x: Tensor, positions: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """``x (B, N, d_model)`` at ``positions (N,)`` -> ``q (B, H, N, head_dim)``, ``k, v (B, G, N, head_dim)``,
        q and k normalised (with ``qk_norm``) and rotated (with ``rope``; ``positions=None`` means ``0 .. N-1``)."""
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, N, H*head_dim), (B, N, G*head_dim) twice
        if self.qk_norm == "projection":
            q, k = self.q_norm(q), self.k_norm(k)  # OLMo 2: RMSNorm over all H*head_dim (G*head_dim) features
        q = split_heads(q, self.num_heads)  # (B, H, N, head_dim)
        k = split_heads(k, self.num_kv_heads)  # (B, G, N, head_dim)
        v = split_heads(v, self.num_kv_heads)  # (B, G, N, head_dim)
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)  # Qwen3: RMSNorm over each head's head_dim features
        if not self.rope:
            if positions is not None:
                raise ValueError("positions is for rope=True; this GroupedQueryAttention has no positions (rope=False)")
            return q, k, v
        positions = torch.arange(x.shape[1], device=x.device) if positions is None else positions  # (N,)
        q = apply_rope(q, positions, base=self.base, pairing=self.pairing)  # (B, H, N, head_dim)
        k = apply_rope(k, positions, base=self.base, pairing=self.pairing)  # (B, G, N, head_dim)
        return q, k, v

    def forward(self, x: Tensor, mask: Tensor | None = None, *, positions: Tensor | None = None,
                return_intermediates: bool = False):
        """``x (B, N, d_model) -> (B, N, d_model)``; ``mask`` ``(N, N)``, ``(B, N, N)`` or ``(B, H, N, N)``
        (a causal model passes ``causal_mask(N)``, a local layer ``sliding_window_mask(N, window=...)``); with
        ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        q, k, v = self.project(x, positions)  # (B, H, N, head_dim), (B, G, N, head_dim), (B, G, N, head_dim)
        heads = grouped_query_attention(q, k, v, mask_for_heads(mask), scale=self.scale, softcap=self.softcap,
                                        sinks=self.sinks)  # (B, H, N, head_dim)
        merged = merge_heads(heads)  # (B, N, H*head_dim)
        out = self.out_proj(merged)  # (B, N, d_model)
        return self._report(dict(x=x, q=q, k=k, v=v, heads=heads, merged=merged, out=out), return_intermediates)

    @property
    def plain(self) -> bool:
        """True when the layer has none of lesson 12's scores steps (default scale, no softcap, no sinks)."""
        return self.scale == self.head_dim ** -0.5 and self.softcap is None and self.sinks is None

    @classmethod
    def from_transformers(cls, layer: nn.Module) -> "GroupedQueryAttention":
        """A copy of a ``transformers`` attention layer (one of :data:`TRANSFORMERS_LAYERS`: Llama, Mistral, Qwen3,
        OLMo 2, Gemma 2, gpt-oss), with its weights, in its dtype. ``copy(x, mask=keep)`` equals the layer's eager
        forward on ``x`` at positions ``0 .. N-1`` given the same mask (as an additive ``(1, 1, N, N)`` tensor);
        ``copy.window`` is the layer's sliding window (``None`` for a global layer). Plain RoPE only
        (``rope_type="default"``)."""
        kind = type(layer).__name__
        if kind not in TRANSFORMERS_LAYERS:
            raise TypeError(f"layer must be one of the transformers attention layers {list(TRANSFORMERS_LAYERS)}, "
                            f"got {kind}")
        config = layer.config
        rope = dict(getattr(config, "rope_parameters", None) or {})
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"layer's config has rope_type={rope.get('rope_type')!r}; only plain RoPE "
                             "(rope_type='default') is copied")
        q_norm = getattr(layer, "q_norm", None)
        qk_norm = None if q_norm is None else "head" if q_norm.weight.numel() == layer.head_dim else "projection"
        window = getattr(layer, "sliding_window", None) if kind != "MistralAttention" else config.sliding_window
        copy = cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
                   base=rope.get("rope_theta", DEFAULT_BASE), qkv_bias=layer.q_proj.bias is not None,
                   proj_bias=layer.o_proj.bias is not None, head_dim=layer.head_dim, qk_norm=qk_norm,
                   eps=getattr(q_norm, "variance_epsilon", 1e-6), scale=layer.scaling,
                   softcap=getattr(layer, "attn_logit_softcapping", None), sinks=hasattr(layer, "sinks"),
                   window=window)
        copy = copy.to(layer.q_proj.weight.dtype)
        state = {name.replace("o_proj.", "out_proj.") if name.startswith("o_proj.") else name: value
                 for name, value in layer.state_dict().items()}  # the same names but the output projection's
        copy.load_state_dict(state)
        return copy

    def extra_repr(self) -> str:
        rope = f", rope base={self.base:g}, pairing={self.pairing}" if self.rope else ", rope=False"
        steps = "".join(f", {name}={value}" for name, value in (
            ("head_dim", self.head_dim if self.head_dim * self.num_heads != self.d_model else None),
            ("qk_norm", self.qk_norm), ("scale", None if self.scale == self.head_dim ** -0.5 else f"{self.scale:.4g}"),
            ("softcap", self.softcap), ("sinks", True if self.sinks is not None else None), ("window", self.window))
            if value is not None)
        return f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}{rope}{steps}"


# --- Lesson 13: multi-head latent attention ---

class LatentAttention(Traceable):
    """Lesson 13: multi-head latent attention, ``x (B, N, d_model) -> (B, N, d_model)``, caching per token only
    ``c (B, N, kv_lora_rank)`` and one rotary key ``k_rope (B, N, qk_rope_head_dim)`` shared by all heads.

    Every head's key and value come back *up* from ``c``: ``k_h = [W_UK_h c ; k_rope]``, ``v_h = W_UV_h c``; the
    absorbed form folds ``W_UK_h`` into the query and ``W_UV_h`` into the output projection. ``q_lora_rank``
    makes the query low-rank too; ``pairing="interleaved"`` is ``transformers``' ``rope_interleave=True``.
    """

    AXES = {"x": "batch tokens d_model", "c": "batch tokens kv_lora_rank", "k_rope": "batch tokens qk_rope_head_dim",
            "q_nope": "batch H tokens qk_nope_head_dim", "q_rope": "batch H tokens qk_rope_head_dim",
            "q": "batch H tokens qk_head_dim", "k": "batch H tokens qk_head_dim", "v": "batch H tokens v_head_dim",
            "q_latent": "batch H tokens kv_lora_rank", "context": "batch H tokens kv_lora_rank",
            "heads": "batch H tokens v_head_dim", "out": "batch tokens d_model"}

    def __init__(self, d_model: int, num_heads: int, *, kv_lora_rank: int, qk_nope_head_dim: int,
                 qk_rope_head_dim: int, v_head_dim: int, q_lora_rank: int | None = None,
                 base: float = DEFAULT_BASE, pairing: str = "interleaved", bias: bool = False,
                 eps: float = 1e-6) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("num_heads", num_heads), ("kv_lora_rank", kv_lora_rank),
                            ("qk_nope_head_dim", qk_nope_head_dim), ("qk_rope_head_dim", qk_rope_head_dim),
                            ("v_head_dim", v_head_dim)):
            check_positive_int(name, value)
        if q_lora_rank is not None:
            check_positive_int("q_lora_rank", q_lora_rank)
        self.base, self.pairing = check_rope_settings(qk_rope_head_dim, base, pairing, " (qk_rope_head_dim)")
        self.d_model, self.num_heads, self.kv_lora_rank, self.q_lora_rank = d_model, num_heads, kv_lora_rank, q_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.scale = self.qk_head_dim ** -0.5  # the width of a whole query/key head, not of the latent
        H = num_heads
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, H * self.qk_head_dim, bias=False)
        else:
            self.q_down = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_norm = nn.RMSNorm(q_lora_rank, eps=eps)
            self.q_up = nn.Linear(q_lora_rank, H * self.qk_head_dim, bias=False)
        self.kv_down = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias)  # W_DKV and W_KR, stacked
        self.kv_norm = nn.RMSNorm(kv_lora_rank, eps=eps)
        self.kv_up = nn.Linear(kv_lora_rank, H * (qk_nope_head_dim + v_head_dim), bias=False)  # W_UK and W_UV
        self.out_proj = nn.Linear(H * v_head_dim, d_model, bias=bias)

    # -- the cache: what one token leaves behind --------------------------------------------------
    def compress(self, x: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``x (B, N, d_model)`` -> the cached ``c (B, N, kv_lora_rank)`` and ``k_rope (B, N, qk_rope_head_dim)``
        (rotated at ``positions``, ``0 .. N-1`` by default)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        positions = torch.arange(x.shape[1], device=x.device) if positions is None else positions  # (N,)
        c, k_rope = self.kv_down(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)  # (B, N, r), (B, N, d_R)
        c = self.kv_norm(c)  # (B, N, kv_lora_rank)
        k_rope = apply_rope(k_rope, positions, base=self.base, pairing=self.pairing)  # (B, N, qk_rope_head_dim)
        return c, k_rope

    def queries(self, x: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``x (B, N, d_model)`` -> ``q_nope (B, H, N, qk_nope_head_dim)`` and ``q_rope (B, H, N, qk_rope_head_dim)``
        (rotated)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        positions = torch.arange(x.shape[1], device=x.device) if positions is None else positions  # (N,)
        if self.q_lora_rank is None:
            q = self.q_proj(x)  # (B, N, H * qk_head_dim)
        else:
            q = self.q_up(self.q_norm(self.q_down(x)))  # (B, N, q_lora_rank) -> (B, N, H * qk_head_dim)
        q = split_heads(q, self.num_heads)  # (B, H, N, qk_head_dim)
        q_nope, q_rope = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        q_rope = apply_rope(q_rope, positions, base=self.base, pairing=self.pairing)  # (B, H, N, qk_rope_head_dim)
        return q_nope, q_rope

    def up_matrices(self) -> tuple[Tensor, Tensor]:
        """The up-projections per head: ``W_UK (H, qk_nope_head_dim, kv_lora_rank)``, ``W_UV (H, v_head_dim,
        kv_lora_rank)``, so that head ``h``'s key part is ``W_UK[h] @ c`` and its value ``W_UV[h] @ c``."""
        w = self.kv_up.weight.view(self.num_heads, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank)
        return w.split([self.qk_nope_head_dim, self.v_head_dim], dim=1)  # (H, d_nope, r), (H, d_v, r)

    def expand(self, c: Tensor, k_rope: Tensor) -> tuple[Tensor, Tensor]:
        """Every head's key and value from the cache: ``c (B, N, r)``, ``k_rope (B, N, d_R)`` ->
        ``k (B, H, N, qk_nope_head_dim + d_R)``, ``v (B, H, N, v_head_dim)``."""
        kv = split_heads(self.kv_up(c), self.num_heads)  # (B, H, N, qk_nope_head_dim + v_head_dim)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)  # (B, H, N, d_nope), (B, H, N, d_v)
        k_rope = k_rope[:, None].expand(-1, self.num_heads, -1, -1)  # (B, H, N, d_R): one rotary key for all heads
        return torch.cat([k_nope, k_rope], dim=-1), v  # (B, H, N, qk_head_dim), (B, H, N, v_head_dim)

    # -- the forward, in either form -------------------------------------------------------------------
    def forward(self, x: Tensor, mask: Tensor | None = None, *, positions: Tensor | None = None,
                absorbed: bool = False, return_intermediates: bool = False):
        """``x (B, N, d_model) -> (B, N, d_model)``; ``mask`` ``(N, N)``, ``(B, N, N)`` or ``(B, H, N, N)``, True =
        may attend (a causal model passes ``causal_mask(N)``). ``absorbed=True`` attends to the latents directly
        (the same output up to rounding). With ``return_intermediates`` also a dict (see ``AXES``)."""
        c, k_rope = self.compress(x, positions)  # (B, N, r), (B, N, d_R): all the cache keeps (compress checks x)
        q_nope, q_rope = self.queries(x, positions)  # (B, H, N, d_nope), (B, H, N, d_R)
        inter: dict[str, Any] = dict(x=x, c=c, k_rope=k_rope, q_nope=q_nope, q_rope=q_rope)
        if not absorbed:
            q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, N, qk_head_dim)
            k, v = self.expand(c, k_rope)  # (B, H, N, qk_head_dim), (B, H, N, v_head_dim)
            heads = grouped_query_attention(q, k, v, mask_for_heads(mask), scale=self.scale)  # (B, H, N, d_v)
            out = self.out_proj(merge_heads(heads))  # (B, N, d_model)
            inter.update(q=q, k=k, v=v, heads=heads, out=out)
            return self._report(inter, return_intermediates)
        w_uk, w_uv = self.up_matrices()  # (H, d_nope, r), (H, d_v, r)
        q_latent = q_nope @ w_uk  # (B, H, N, r): W_UK folded into each head's query
        q = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, N, r + d_R)
        k = torch.cat([c, k_rope], dim=-1)[:, None]  # (B, 1, N, r + d_R): one key head, shared by all H
        context = grouped_query_attention(q, k, c[:, None], mask_for_heads(mask), scale=self.scale)  # (B, H, N, r)
        w_o = self.out_proj.weight.view(self.d_model, self.num_heads, self.v_head_dim).transpose(0, 1)  # (H, d_model, d_v)
        w_ov = w_o @ w_uv  # (H, d_model, r): W_UV folded into the output projection
        out = torch.einsum("bhnr,hdr->bnd", context, w_ov)  # (B, N, d_model): sum over heads of W_OV[h] @ context
        if self.out_proj.bias is not None:
            out = out + self.out_proj.bias
        inter.update(q_latent=q_latent, context=context, out=out)
        return self._report(inter, return_intermediates)

    def cache_numbers_per_token(self) -> int:
        """Numbers one token leaves in this layer's cache: ``kv_lora_rank + qk_rope_head_dim``."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    # -- from transformers -----------------------------------------------------------------------------
    @classmethod
    def from_transformers(cls, layer: nn.Module) -> "LatentAttention":
        """A copy of ``transformers``' ``DeepseekV3Attention`` ``layer`` (plain RoPE only: a config whose
        ``rope_parameters`` has ``rope_type`` "default"), giving the same output as its eager forward."""
        config = getattr(layer, "config", None)
        needed = ("kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj")
        if config is None or not all(hasattr(layer, name) for name in needed):
            raise TypeError(f"layer must be a transformers DeepseekV3Attention (with kv_a_proj_with_mqa, kv_b_proj, "
                            f"o_proj and a config), got {type(layer).__name__}")
        rope = dict(getattr(config, "rope_parameters", None) or {})
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"layer's config uses rope_type={rope.get('rope_type')!r}; LatentAttention copies plain "
                             f"RoPE only (rope_parameters={{'rope_type': 'default', 'rope_theta': ...}})")
        if config.num_key_value_heads != config.num_attention_heads:
            raise ValueError(f"layer's config has num_key_value_heads={config.num_key_value_heads} != "
                             f"num_attention_heads={config.num_attention_heads}; MLA expands the latent to every head")
        module = cls(config.hidden_size, config.num_attention_heads, kv_lora_rank=config.kv_lora_rank,
                     qk_nope_head_dim=config.qk_nope_head_dim, qk_rope_head_dim=config.qk_rope_head_dim,
                     v_head_dim=config.v_head_dim, q_lora_rank=config.q_lora_rank,
                     base=float(rope.get("rope_theta", DEFAULT_BASE)),
                     pairing="interleaved" if config.rope_interleave else "half",
                     bias=bool(config.attention_bias), eps=layer.kv_a_layernorm.variance_epsilon)
        module = module.to(dtype=layer.o_proj.weight.dtype)
        ours = {"q_a_proj": "q_down", "q_a_layernorm": "q_norm", "q_b_proj": "q_up", "kv_a_proj_with_mqa": "kv_down",
                "kv_a_layernorm": "kv_norm", "kv_b_proj": "kv_up", "o_proj": "out_proj"}  # transformers' name -> ours
        module.load_state_dict({ours.get(name.split(".")[0], name.split(".")[0]) + "." + name.split(".", 1)[1]: value
                                for name, value in layer.state_dict().items()})
        return module

    def extra_repr(self) -> str:
        q = f", q_lora_rank={self.q_lora_rank}" if self.q_lora_rank is not None else ""
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, kv_lora_rank={self.kv_lora_rank}, "
                f"qk_nope_head_dim={self.qk_nope_head_dim}, qk_rope_head_dim={self.qk_rope_head_dim}, "
                f"v_head_dim={self.v_head_dim}{q}, rope base={self.base:g}, pairing={self.pairing}")


# --- Lesson 13: linear attention and the gated delta rule ---

def elu_feature_map(x: Tensor) -> Tensor:
    """Lesson 13: Katharopoulos et al.'s feature map ``φ(x) = elu(x) + 1``: positive, same shape as ``x``."""
    return F.elu(x) + 1


def _check_qkv(q: object, k: object, v: object) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`check_qkv`, and ``q, k (B, H, N, d_k)``, ``v (B, H, N, d_v)``: one token each for every query, key, value."""
    q, k, v = check_qkv(*(check_tensor(name, t, ndim=4) for name, t in (("q", q), ("k", k), ("v", v))))
    if q.shape != k.shape or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"q, k (B, H, N, d_k) and v (B, H, N, d_v) must share B, H and N (one key and one value per "
                         f"query): q has shape {shape_of(q)}, k {shape_of(k)}, v {shape_of(v)}")
    return q, k, v


def linear_attention(q: Tensor, k: Tensor, v: Tensor, *, recurrent: bool = False) -> Tensor:
    """Lesson 13: causal linear attention (Katharopoulos et al., 2020), ``φ = elu + 1``: ``q, k (B, H, N, d_k)``,
    ``v (B, H, N, d_v)`` -> ``(B, H, N, d_v)``. ``recurrent=False``: ``A = tril(φ(q) φ(k)ᵀ)``, ``o = A v / A 1``;
    ``True``: one :func:`linear_attention_step` per token (the same outputs up to rounding)."""
    q, k, v = _check_qkv(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (B, H, N, d_k) each, every entry > 0
    if not recurrent:
        n = q.shape[-2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()  # (N, N): key j <= query i
        a = (phi_q @ phi_k.mT).masked_fill(~keep, 0.0)  # (B, H, N, N): φ(q_i)·φ(k_j), future keys zeroed
        return (a @ v) / a.sum(dim=-1, keepdim=True)  # (B, H, N, d_v): each row a weighted average of values
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d_k, d_v): S_0 = 0
    normalizer = q.new_zeros(*q.shape[:2], q.shape[-1])  # (B, H, d_k): z_0 = 0
    outputs = []
    for t in range(q.shape[-2]):
        o_t, state, normalizer = linear_attention_step(state, normalizer, phi_q[:, :, t], phi_k[:, :, t], v[:, :, t])
        outputs.append(o_t)  # (B, H, d_v): token t's output
    return torch.stack(outputs, dim=-2)  # (B, H, N, d_v)


def linear_attention_step(state: Tensor, normalizer: Tensor, phi_q: Tensor, phi_k: Tensor,
                          v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Lesson 13: one token of linear attention, ``S_t = S_{t-1} + φ(k_t) v_tᵀ``, ``z_t = z_{t-1} + φ(k_t)``,
    ``o_t = φ(q_t)ᵀ S_t / φ(q_t)ᵀ z_t``. ``state (..., d_k, d_v)``, ``normalizer (..., d_k)``, ``phi_q, phi_k (..., d_k)``
    (after the feature map), ``v (..., d_v)``; returns ``(o_t (..., d_v), state, normalizer)``."""
    state = check_tensor("state", state, min_ndim=2)
    for name, t in (("normalizer", normalizer), ("phi_q", phi_q), ("phi_k", phi_k)):
        if check_tensor(name, t).shape != state.shape[:-1]:
            raise ValueError(f"{name} must have shape (..., d_k) = {shape_of(state)[:-1]} to match state (..., d_k, d_v) "
                             f"= {shape_of(state)}, got {shape_of(t)}")
    if check_tensor("v", v).shape != state.shape[:-2] + state.shape[-1:]:
        raise ValueError(f"v must have shape (..., d_v) = {shape_of(state)[:-2] + shape_of(state)[-1:]} to match "
                         f"state (..., d_k, d_v) = {shape_of(state)}, got {shape_of(v)}")
    state = state + phi_k[..., :, None] * v[..., None, :]  # (..., d_k, d_v): S_t = S_{t-1} + φ(k_t) v_tᵀ
    normalizer = normalizer + phi_k  # (..., d_k): z_t = z_{t-1} + φ(k_t)
    numerator = (phi_q[..., None, :] @ state)[..., 0, :]  # (..., d_v): φ(q_t)ᵀ S_t
    denominator = (phi_q * normalizer).sum(dim=-1, keepdim=True)  # (..., 1): φ(q_t)ᵀ z_t
    return numerator / denominator, state, normalizer


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, *,
                     scale: float | None = None, chunk_size: int | None = None) -> Tensor:
    """Lesson 13: Gated DeltaNet (Yang et al., 2025), ``q, k (B, H, N, d_k)``, ``v (B, H, N, d_v)``, ``log_decay, beta
    (B, H, N)`` -> ``(B, H, N, d_v)``: ``S_t = exp(log_decay_t) (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ``,
    ``o_t = S_tᵀ (scale · q_t)`` (``scale=None``: ``d_k ** -0.5``). ``chunk_size``: chunk by chunk, the same outputs."""
    q, k, v = _check_qkv(q, k, v)
    for name, t in (("log_decay", log_decay), ("beta", beta)):
        if check_tensor(name, t, ndim=3).shape != k.shape[:3]:
            raise ValueError(f"{name} must have shape (B, H, N) = {shape_of(k)[:3]}, one number per head and token "
                             f"(k has shape {shape_of(k)}), got {shape_of(t)}")
    if bool((log_decay > 0).any()):
        raise ValueError(f"log_decay must be <= 0 (the state is multiplied by exp(log_decay) <= 1 each step); its "
                         f"largest entry is {float(log_decay.max()):.3g} (shape {shape_of(log_decay)})")
    log_decay, beta = log_decay.to(k.dtype), beta.to(k.dtype)
    q = q * (q.shape[-1] ** -0.5 if scale is None else float(scale))  # (B, H, N, d_k)
    size = 1 if chunk_size is None else check_positive_int("chunk_size", chunk_size)
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d_k, d_v): S_0 = 0
    outputs = []
    for start in range(0, q.shape[-2], size):
        if chunk_size is None:  # token by token, one gated_delta_step each
            o, state = gated_delta_step(state, *(t[:, :, start] for t in (q, k, v, log_decay, beta)))
            outputs.append(o[:, :, None])  # (B, H, 1, d_v): token start's output
        else:  # chunk by chunk, one gated_delta_chunk each (the last chunk may be shorter)
            o, state = gated_delta_chunk(state, *(t[:, :, start:start + size] for t in (q, k, v, log_decay, beta)))
            outputs.append(o)  # (B, H, L_c, d_v): the chunk's outputs
    return torch.cat(outputs, dim=-2)  # (B, H, N, d_v)


def gated_delta_step(state: Tensor, q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor,
                     beta: Tensor) -> tuple[Tensor, Tensor]:
    """Lesson 13: one token, ``S_t = α_t S_{t-1} + β_t k_t (v_t - α_t S_{t-1}ᵀ k_t)ᵀ``, ``o_t = S_tᵀ q_t``
    (``q`` already scaled); ``state (..., d_k, d_v)``, ``q, k (..., d_k)``, ``v (..., d_v)``, ``log_decay, beta (...)``."""
    state = log_decay[..., None, None].exp() * state  # (..., d_k, d_v): α_t S_{t-1}, the old state faded
    recalled = (k[..., None, :] @ state)[..., 0, :]  # (..., d_v): what the memory returns for k_t
    correction = beta[..., None] * (v - recalled)  # (..., d_v): β_t (v_t - recalled)
    state = state + k[..., :, None] * correction[..., None, :]  # (..., d_k, d_v): write k_t ⊗ correction
    return (q[..., None, :] @ state)[..., 0, :], state  # o_t = S_tᵀ q_t (..., d_v), S_t


def gated_delta_chunk(state: Tensor, q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor,
                      beta: Tensor) -> tuple[Tensor, Tensor]:
    """Lesson 13: one chunk of ``L_c`` tokens of the gated delta rule at once: returns ``(o (..., L_c, d_v), S (...,
    d_k, d_v))``, the same as ``L_c`` calls of :func:`gated_delta_step`.

    ``state (..., d_k, d_v)`` is the state before the chunk; ``q, k (..., L_c, d_k)`` (``q`` already scaled),
    ``v (..., L_c, d_v)``, ``log_decay, beta (..., L_c)``. With ``γ_i`` the summed ``log_decay`` from the chunk's start to
    token ``i``: ``T = I + strictly_lower(β_i (k_i·k_j) e^{γ_i-γ_j})``, ``U = T⁻¹ (β v)``, ``W = T⁻¹ (β e^γ k)``,
    ``corrections = U - W S``, ``o = (e^γ q) S + lower((q_i·k_j) e^{γ_i-γ_j}) corrections``,
    ``S <- e^{γ_{L_c}} S + (e^{γ_{L_c} - γ} k)ᵀ corrections``.
    """
    gamma = log_decay.cumsum(dim=-1)  # (..., L_c): log of the decay from the chunk's start to each token
    length = gamma.shape[-1]  # L_c, the chunk length
    lower = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()  # (L_c, L_c): j <= i
    decay_ij = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, float("-inf")).exp()  # (..., L_c, L_c)
    b = beta[..., None]  # (..., L_c, 1)
    system = (b * k @ k.mT * decay_ij).tril(-1) + torch.eye(length, dtype=q.dtype, device=q.device)  # (..., L_c, L_c): T
    u = torch.linalg.solve_triangular(system, b * v, upper=False, unitriangular=True)  # (..., L_c, d_v)
    w = torch.linalg.solve_triangular(system, b * gamma[..., None].exp() * k, upper=False, unitriangular=True)  # (..., L_c, d_k)
    corrections = u - w @ state  # (..., L_c, d_v): what each token writes, given the state before the chunk
    inside = (q @ k.mT) * decay_ij  # (..., L_c, L_c): reads of this chunk's own writes (decay_ij is 0 above the diagonal)
    o = gamma[..., None].exp() * q @ state + inside @ corrections  # (..., L_c, d_v): the old state read, plus the new
    to_end = (gamma[..., -1:] - gamma).exp()[..., None]  # (..., L_c, 1): decay from token i to the chunk's end
    state = gamma[..., -1, None, None].exp() * state + (to_end * k).mT @ corrections  # (..., d_k, d_v)
    return o, state

