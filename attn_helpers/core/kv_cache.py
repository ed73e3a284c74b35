"""The KV cache of step-by-step decoding (lesson 09): keep the keys and values of the tokens so far, so each
new token computes only its own. Works for :class:`MultiHeadAttention` and :class:`GroupedQueryAttention`
(which caches its ``num_kv_heads`` heads and rotates q and k at their absolute positions).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .arguments import check_positive_int, check_tensor, check_tokens, shape_of
from .grouped import GroupedQueryAttention, grouped_query_attention
from .heads import merge_heads, split_heads
from .multihead import MultiHeadAttention

__all__ = ["KVCache", "cached_attention_step"]


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
    """Self-attention of ``layer`` for the newest token(s) only: ``x_new (B, n_new, d_model) -> (B, n_new, d_model)``.

    Projects only the new tokens, appends their keys and values (``(B, G, n_new, head_dim)``, ``G = H``
    for :class:`MultiHeadAttention`) to ``cache``, and lets the new queries attend to every cached token
    (causally among the new ones). Feeding a sequence one token at a time gives the rows of
    ``layer(x, mask=causal_mask(N))``, with ``O(t)`` work at step ``t`` instead of ``O(t^2)``.
    """
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
