"""Multi-head latent attention (lesson 13): cache one small latent per token, rebuild every head from it.

DeepSeek-V2's attention (DeepSeek-AI, 2024, section 2.1), as ``transformers`` writes it in
``DeepseekV3Attention``: each token ``x_j`` is projected *down* to a latent ``c_j`` of ``kv_lora_rank`` numbers
(RMS-normalised) plus one rotary key ``k_rope_j`` of ``qk_rope_head_dim`` numbers shared by every head
("decoupled RoPE"). Only ``(c_j, k_rope_j)`` is cached. Every head's key and value are projected back *up* from
``c_j``: ``k_h = [W_UK_h c ; k_rope]``, ``v_h = W_UV_h c``. The absorbed form folds ``W_UK_h`` into the query and
``W_UV_h`` into the output projection, so the queries attend to the cached latents directly, as one shared
key/value head (multi-query attention over the latent).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from .arguments import check_positive_int, check_tokens
from .grouped import grouped_query_attention
from .heads import merge_heads, split_heads
from .masks import mask_for_heads
from .observers import Traceable
from .positions import DEFAULT_BASE, apply_rope, check_rope_settings

__all__ = ["LatentAttention"]


class LatentAttention(Traceable, nn.Module):
    """Multi-head latent attention: ``x (B, N, d_model) -> (B, N, d_model)``, caching ``c (B, N, kv_lora_rank)``
    and ``k_rope (B, N, qk_rope_head_dim)`` per token instead of ``H`` keys and values.

    ``LatentAttention(d_model, num_heads, kv_lora_rank=, qk_nope_head_dim=, qk_rope_head_dim=, v_head_dim=,
    q_lora_rank=None, base=10000.0, pairing="interleaved", bias=False, eps=1e-6)``. A query or key of a head
    has ``qk_nope_head_dim + qk_rope_head_dim`` features (the scores are scaled by that width's ``** -0.5``),
    a value ``v_head_dim``. ``q_lora_rank`` (an int) makes the query low-rank too: down to ``q_lora_rank``
    numbers, RMS-normalised, up to every head. ``pairing`` is how the rotary features pair up
    (``transformers``' ``rope_interleave=True`` is ``"interleaved"``). :meth:`from_transformers` copies a
    ``DeepseekV3Attention``.
    """

    AXES = {
        "x": "batch tokens d_model",
        "c": "batch tokens kv_lora_rank",
        "k_rope": "batch tokens qk_rope_head_dim",
        "q_nope": "batch H tokens qk_nope_head_dim",
        "q_rope": "batch H tokens qk_rope_head_dim",
        "q": "batch H tokens qk_head_dim",
        "k": "batch H tokens qk_head_dim",
        "v": "batch H tokens v_head_dim",
        "q_latent": "batch H tokens kv_lora_rank",
        "context": "batch H tokens kv_lora_rank",
        "heads": "batch H tokens v_head_dim",
        "out": "batch tokens d_model",
    }

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
        x = check_tokens("x", x, self.d_model, "d_model")
        c, k_rope = self.compress(x, positions)  # (B, N, r), (B, N, d_R): all the cache keeps
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
        pairs = [(module.kv_down, layer.kv_a_proj_with_mqa), (module.kv_up, layer.kv_b_proj),
                 (module.out_proj, layer.o_proj), (module.kv_norm, layer.kv_a_layernorm)]
        if module.q_lora_rank is None:
            pairs.append((module.q_proj, layer.q_proj))
        else:
            pairs += [(module.q_down, layer.q_a_proj), (module.q_norm, layer.q_a_layernorm), (module.q_up, layer.q_b_proj)]
        with torch.no_grad():
            for ours, theirs in pairs:
                ours.weight.copy_(theirs.weight)
                if getattr(ours, "bias", None) is not None:
                    ours.bias.copy_(theirs.bias)
        return module

    def extra_repr(self) -> str:
        q = f", q_lora_rank={self.q_lora_rank}" if self.q_lora_rank is not None else ""
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, kv_lora_rank={self.kv_lora_rank}, "
                f"qk_nope_head_dim={self.qk_nope_head_dim}, qk_rope_head_dim={self.qk_rope_head_dim}, "
                f"v_head_dim={self.v_head_dim}{q}, rope base={self.base:g}, pairing={self.pairing}")

