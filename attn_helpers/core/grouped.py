"""Grouped-query attention: ``H`` query heads share ``G`` key/value heads (``G = H``: multi-head, ``G = 1``:
multi-query), as a function and as the layer of Llama-style models (:class:`GroupedQueryAttention`, with
rotary positions). A smaller ``G`` shrinks the KV cache by ``H / G``.

Lesson 12 adds the steps of today's models to the layer, each off by default: QK-norm (Qwen3 per head, OLMo 2
over the whole projection), another scale (Gemma 2), soft-capped scores (Gemma 2) and sinks (gpt-oss);
:meth:`GroupedQueryAttention.from_transformers` copies such a layer from the ``transformers`` package.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .arguments import (broadcast_shape, check_heads, check_kv_heads, check_mask, check_positive_int, check_tensor,
                        check_tokens, shape_of)
from .attention import attend
from .heads import merge_heads, split_heads
from .masks import mask_for_heads
from .observers import Traceable
from .positions import DEFAULT_BASE, apply_rope, check_rope_settings

__all__ = ["grouped_query_attention", "GroupedQueryAttention", "TRANSFORMERS_LAYERS"]


def grouped_query_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, scale: float | None = None,
    softcap: float | None = None, sinks: Tensor | None = None,
) -> Tensor:
    """Attention where ``H`` query heads share ``G`` key/value heads, by reshaping, without copying K and V.

    ``q (..., H, N_q, d_k)``, ``k (..., G, N_k, d_k)``, ``v (..., G, N_k, d_v)`` -> ``(..., H, N_q, d_v)``,
    with ``H`` a multiple of ``G`` (``G = H``: multi-head; ``G = 1``: multi-query). The ``H/G`` query
    heads of a group are stacked as rows, ``(..., G, H/G * N_q, d_k)``, so each group's queries meet its
    one key/value head in an ordinary product (broadcasting a size-1 heads axis instead would make
    ``matmul`` expand K to ``H`` heads in memory). Equal to
    ``scaled_dot_product_attention(q, repeat_kv_heads(k, H), repeat_kv_heads(v, H), mask)``.
    ``mask`` as in :func:`attn_helpers.scaled_dot_product_attention`, broadcastable to ``(..., H, N_q, N_k)``;
    ``softcap`` and ``sinks (H,)`` as in :func:`attn_helpers.core.attend` (lesson 12).
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
    """The attention layer of Llama-style models: grouped-query heads with rotary positions.

    ``x (B, N, d_model) -> (B, N, d_model)``: ``q_proj`` makes ``num_heads`` query heads of ``head_dim``
    features (default ``d_model // num_heads``), ``k_proj`` and ``v_proj`` make ``num_kv_heads`` key/value heads;
    with ``rope=True`` q and k are rotated at their positions (:func:`apply_rope`); then
    :func:`grouped_query_attention` and ``out_proj``. ``bias`` sets all four biases (Llama's ``attention_bias``);
    ``qkv_bias`` and ``proj_bias`` set them apart. :func:`cached_attention_step` runs it with a :class:`KVCache`
    of ``num_kv_heads`` heads.

    The steps of lesson 12, each off by default and each one line of :meth:`project` or :meth:`forward`:

    - ``qk_norm="head"``: an RMSNorm over each head's ``head_dim`` features of q and of k (Qwen3);
      ``qk_norm="projection"``: over the whole q projection and the whole k projection (OLMo 2); ``eps`` is theirs;
    - ``scale``: the scores' factor (``None``: ``head_dim ** -0.5``; Gemma 2 uses ``query_pre_attn_scalar ** -0.5``);
    - ``softcap``: scores squashed to ``softcap * tanh(scores / softcap)`` before the mask (Gemma 2);
    - ``sinks=True``: one learned logit per query head in each row's softmax, its weight dropped (gpt-oss).

    A sliding window is not a setting: it is the mask the caller passes (:func:`sliding_window_mask`); ``window``
    only records the window of a copied layer (``None``: a global layer).
    """

    AXES = {
        "x": "batch tokens d_model",
        "q": "batch H tokens head_dim",
        "k": "batch kv_heads tokens head_dim",
        "v": "batch kv_heads tokens head_dim",
        "heads": "batch H tokens head_dim",
        "merged": "batch tokens H*head_dim",
        "out": "batch tokens d_model",
    }

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
