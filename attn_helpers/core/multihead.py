"""Walkthrough 004's multi-head attention, parameter for parameter ``torch.nn.MultiheadAttention``."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .arguments import check_heads, check_positive_int, check_probability, check_query_key_value
from .attention import attend
from .heads import merge_heads, split_heads
from .masks import mask_for_heads
from .observers import Traceable

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Traceable):
    """Multi-head attention with separate Q, K, V and output projections.

    ``forward(query (B, N_q, d_model), key (B, N_k, kdim), value (B, N_k, vdim)) -> (B, N_q, d_model)``.
    Self-attention passes the same tensor three times (or only ``query``). Each head scales by
    ``head_dim ** -0.5`` (walkthrough 004 divided by ``sqrt(d_model)``, a bug lesson 05 measures).
    ``bias`` sets the biases of all four projections; ``qkv_bias`` (q/k/v) and ``proj_bias`` (output) set
    them apart. Masks use this package's convention (``True`` = may attend, or additive), shaped
    ``(N_q, N_k)``, ``(B, N_q, N_k)`` (e.g. from :func:`padding_mask`) or ``(B, H, N_q, N_k)``.

    Same parameters and numbers as ``torch.nn.MultiheadAttention(..., batch_first=True)``:
    see :meth:`from_torch` and :meth:`to_torch`.
    """

    AXES = {
        "query": "batch queries d_model", "key": "batch keys kdim", "value": "batch keys vdim",
        "q": "batch queries d_model", "k": "batch keys d_model", "v": "batch keys d_model",
        "q_heads": "batch H queries head_dim", "k_heads": "batch H keys head_dim",
        "v_heads": "batch H keys head_dim",
        "scores": "batch H queries keys", "weights": "batch H queries keys",
        "heads": "batch H queries head_dim", "merged": "batch queries d_model", "out": "batch queries d_model",
    }

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0, kdim: int | None = None,
                 vdim: int | None = None, *, qkv_bias: bool | None = None, proj_bias: bool | None = None) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = num_heads
        self.head_dim = check_heads(d_model, num_heads, chan_name="d_model")
        self.kdim = d_model if kdim is None else check_positive_int("kdim", kdim)
        self.vdim = d_model if vdim is None else check_positive_int("vdim", vdim)
        self.dropout = check_probability("dropout", dropout)
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.q_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.k_proj = nn.Linear(self.kdim, d_model, bias=qkv_bias)
        self.v_proj = nn.Linear(self.vdim, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias if proj_bias is None else proj_bias)

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``(B, N_q, d_model), (B, N_k, kdim), (B, N_k, vdim) -> (B, N_q, d_model)``; with
        ``return_intermediates`` also a dict (see ``AXES``)."""
        query, key, value = check_query_key_value(query, key, value, self.d_model, self.kdim, self.vdim)
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, N_q|N_k, d_model)
        q_heads, k_heads, v_heads = (split_heads(t, self.num_heads) for t in (q, k, v))  # (B, H, N_q|N_k, head_dim)
        dropout_p = self.dropout if self.training else 0.0
        heads, scores, weights = attend(q_heads, k_heads, v_heads, mask=mask_for_heads(mask), dropout_p=dropout_p)
        merged = merge_heads(heads)  # (B, N_q, d_model)
        out = self.out_proj(merged)  # (B, N_q, d_model)
        inter = dict(query=query, key=key, value=value, q=q, k=k, v=v, q_heads=q_heads, k_heads=k_heads,
                     v_heads=v_heads, scores=scores, weights=weights, heads=heads, merged=merged, out=out)
        return self._report(inter, return_intermediates)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy a ``torch.nn.MultiheadAttention(batch_first=True)`` into a new module with equal outputs."""
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}")
        if not module.batch_first:
            raise ValueError("module must be built with batch_first=True (inputs (B, N, d_model)); got batch_first=False")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn are not part of this lesson's module; build it without them")
        has_bias = module.in_proj_bias is not None
        new = cls(module.embed_dim, module.num_heads, bias=has_bias, dropout=module.dropout,
                  kdim=module.kdim, vdim=module.vdim)
        new = new.to(module.out_proj.weight.device, module.out_proj.weight.dtype)
        d = module.embed_dim
        with torch.no_grad():
            if module._qkv_same_embed_dim:
                weights = module.in_proj_weight.split(d, dim=0)  # 3 x (d, d)
            else:
                weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
            for layer, w in zip((new.q_proj, new.k_proj, new.v_proj), weights):
                layer.weight.copy_(w)
            if has_bias:
                for layer, b in zip((new.q_proj, new.k_proj, new.v_proj), module.in_proj_bias.split(d)):
                    layer.bias.copy_(b)
            new.out_proj.load_state_dict(module.out_proj.state_dict())
        new.train(module.training)  # an eval-mode copy must not apply dropout
        return new

    def to_torch(self) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention(batch_first=True)`` with this module's weights."""
        has_bias = self.q_proj.bias is not None
        if has_bias != (self.out_proj.bias is not None):
            raise ValueError(f"torch.nn.MultiheadAttention has one bias flag for all four projections; this module "
                             f"has qkv_bias={has_bias} and proj_bias={self.out_proj.bias is not None}")
        ref = nn.MultiheadAttention(self.d_model, self.num_heads, dropout=self.dropout, bias=has_bias,
                                    kdim=self.kdim, vdim=self.vdim, batch_first=True)
        ref = ref.to(self.q_proj.weight.device, self.q_proj.weight.dtype)
        with torch.no_grad():
            if ref._qkv_same_embed_dim:
                ref.in_proj_weight.copy_(torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
            else:
                ref.q_proj_weight.copy_(self.q_proj.weight)
                ref.k_proj_weight.copy_(self.k_proj.weight)
                ref.v_proj_weight.copy_(self.v_proj.weight)
            if has_bias:
                ref.in_proj_bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
            ref.out_proj.load_state_dict(self.out_proj.state_dict())
        ref.train(self.training)
        return ref

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}")
