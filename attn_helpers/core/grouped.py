"""Grouped-query attention: ``H`` query heads share ``G`` key/value heads (``G = H``: multi-head, ``G = 1``:
multi-query), as a function and as the layer of Llama-style models (:class:`GroupedQueryAttention`, with
rotary positions). A smaller ``G`` shrinks the KV cache by ``H / G``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .arguments import (broadcast_shape, check_heads, check_kv_heads, check_mask, check_positive_int, check_tensor,
                        check_tokens, shape_of)
from .attention import scaled_dot_product_attention
from .heads import merge_heads, split_heads
from .masks import mask_for_heads
from .observers import Traceable
from .positions import DEFAULT_BASE, apply_rope, check_rope_settings

__all__ = ["grouped_query_attention", "GroupedQueryAttention"]


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
    per_group = check_kv_heads(H, G, f" (q has shape {shape_of(q)}, k has shape {shape_of(k)})")
    q_rows = q.reshape(*q.shape[:-3], G, per_group * n_q, q.shape[-1])  # (..., G, H/G * N_q, d_k)
    if mask is not None:
        scores_shape = broadcast_shape(q.shape[:-2], k.shape[:-3] + (H,)) + (n_q, k.shape[-2])
        mask = check_mask(mask, torch.Size(scores_shape)).expand(scores_shape)  # (..., H, N_q, N_k)
        mask = mask.reshape(*scores_shape[:-3], G, per_group * n_q, k.shape[-2])  # (..., G, H/G * N_q, N_k)
    out = scaled_dot_product_attention(q_rows, k, v, mask, scale=scale)  # (..., G, H/G * N_q, d_v)
    return out.reshape(*out.shape[:-3], H, n_q, v.shape[-1])  # (..., H, N_q, d_v)


class GroupedQueryAttention(Traceable):
    """The attention layer of Llama-style models: grouped-query heads with rotary positions.

    ``x (B, N, d_model) -> (B, N, d_model)``: ``q_proj`` makes ``num_heads`` query heads of ``head_dim =
    d_model // num_heads``, ``k_proj`` and ``v_proj`` make ``num_kv_heads`` key/value heads; with ``rope=True``
    q and k are rotated at their positions (:func:`apply_rope`); then :func:`grouped_query_attention` and
    ``out_proj``. ``bias`` sets all four biases (Llama's ``attention_bias``); ``qkv_bias`` and ``proj_bias``
    set them apart. :func:`cached_attention_step` runs it with a :class:`KVCache` of ``num_kv_heads`` heads.
    """

    AXES = {
        "x": "batch tokens d_model",
        "q": "batch H tokens head_dim",
        "k": "batch kv_heads tokens head_dim",
        "v": "batch kv_heads tokens head_dim",
        "heads": "batch H tokens head_dim",
        "merged": "batch tokens d_model",
        "out": "batch tokens d_model",
    }

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, *, rope: bool = True,
                 base: float = DEFAULT_BASE, pairing: str = "half", bias: bool = False,
                 qkv_bias: bool | None = None, proj_bias: bool | None = None) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = check_heads(d_model, num_heads, chan_name="d_model")
        check_kv_heads(num_heads, num_kv_heads)
        self.rope = bool(rope)
        if self.rope:
            self.base, self.pairing = check_rope_settings(self.head_dim, base, pairing,
                                                          f" (d_model={d_model} / num_heads={num_heads})")
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.q_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias if proj_bias is None else proj_bias)

    def project(self, x: Tensor, positions: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """``x (B, N, d_model)`` at ``positions (N,)`` -> ``q (B, H, N, head_dim)``, ``k, v (B, G, N, head_dim)``,
        q and k rotated (with ``rope``; ``positions=None`` means ``0 .. N-1``)."""
        q = split_heads(self.q_proj(x), self.num_heads)  # (B, H, N, head_dim)
        k = split_heads(self.k_proj(x), self.num_kv_heads)  # (B, G, N, head_dim)
        v = split_heads(self.v_proj(x), self.num_kv_heads)  # (B, G, N, head_dim)
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
        (a causal model passes ``causal_mask(N)``); with ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        q, k, v = self.project(x, positions)  # (B, H, N, head_dim), (B, G, N, head_dim), (B, G, N, head_dim)
        heads = grouped_query_attention(q, k, v, mask_for_heads(mask))  # (B, H, N, head_dim)
        merged = merge_heads(heads)  # (B, N, d_model)
        out = self.out_proj(merged)  # (B, N, d_model)
        return self._report(dict(x=x, q=q, k=k, v=v, heads=heads, merged=merged, out=out), return_intermediates)

    def extra_repr(self) -> str:
        rope = f", rope base={self.base:g}, pairing={self.pairing}" if self.rope else ", rope=False"
        return f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}{rope}"
