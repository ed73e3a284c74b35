"""Lesson 07's attention layers: the fused-QKV :class:`Attention`, one :class:`AttentionHead`, and
:class:`ConcatHeadsAttention` (the same layer built from separate heads).

``x (B, N, dim) -> (B, N, chan)`` with ``H`` heads of ``head_dim = chan // H`` features. Every forward
returns its intermediates on request (``return_intermediates=True``), named in ``AXES``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .arguments import check_heads, check_mask, check_positive_int, check_tokens
from .attention import attend
from .heads import merge_heads
from .masks import mask_for_heads
from .observers import Intermediates, Traceable

__all__ = ["Attention", "AttentionHead", "ConcatHeadsAttention"]


def _set_sizes(module: nn.Module, dim: int, chan: int, num_heads: int, qk_scale: float | None) -> None:
    """Check and store ``dim``, ``chan``, ``num_heads``, ``head_dim`` and ``scale`` (walkthrough 000's sizes)."""
    module.dim = check_positive_int("dim", dim)
    module.chan = check_positive_int("chan", chan)
    module.num_heads = num_heads
    module.head_dim = check_heads(chan, num_heads)
    module.scale = module.head_dim ** -0.5 if qk_scale is None else float(qk_scale)


class Attention(Traceable):
    """Walkthrough 000's attention block: fused QKV projection, heads, output projection, skip through V.

    ``x (B, N, dim) -> (B, N, chan)``. One ``qkv = Linear(dim, 3 * chan)`` makes q, k and v; each is split
    into ``num_heads`` heads of ``head_dim = chan // num_heads``; the merged heads go through
    ``proj = Linear(chan, chan)``; and because ``dim`` may differ from ``chan``, the skip connection adds the
    merged *values* ``v`` (already ``chan`` wide) instead of ``x``. ``skip_through_v=False`` leaves that
    skip out: the layer is then the standard fused-QKV self-attention (nanoGPT's ``CausalSelfAttention``).

    ``qkv_bias`` is the bias of ``qkv``, ``proj_bias`` that of ``proj``. ``qk_scale=None`` means
    ``head_dim ** -0.5``; any number, ``0.0`` included, is used as given.
    """

    AXES = {
        "x": "batch tokens dim", "qkv": "batch tokens 3*chan", "qkv_heads": "qkv batch H tokens head_dim",
        **dict.fromkeys(("q", "k", "v"), "batch H tokens head_dim"),
        **dict.fromkeys(("scores", "weights"), "batch H queries keys"), "heads": "batch H tokens head_dim",
        **dict.fromkeys(("merged", "projected", "skip", "out"), "batch tokens chan"),
    }

    def __init__(self, dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, qk_scale: float | None = None,
                 *, proj_bias: bool = True, skip_through_v: bool = True) -> None:
        super().__init__()
        _set_sizes(self, dim, chan, num_heads, qk_scale)
        self.skip_through_v = bool(skip_through_v)
        self.qkv = nn.Linear(dim, 3 * chan, bias=qkv_bias)
        self.proj = nn.Linear(chan, chan, bias=proj_bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, positions: Tensor | None = None,
                return_intermediates: bool = False):
        """``x (B, N, dim) -> (B, N, chan)``; with ``return_intermediates`` also a dict (see ``AXES``).

        ``mask``: ``(N, N)``, ``(B, N, N)`` or ``(B, H, N, N)``. ``positions (N,)``: for layers that
        place ``q`` and ``k`` by position (:class:`RotaryAttention`); this layer is order-blind.
        """
        x = check_tokens("x", x, self.dim, "dim")
        B, N, _ = x.shape
        H, hd = self.num_heads, self.head_dim
        qkv = self.qkv(x)  # (B, N, 3*chan)
        qkv_heads = qkv.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, N, head_dim)
        q, k, v = qkv_heads.unbind(0)  # each (B, H, N, head_dim)
        inter = dict(x=x, qkv=qkv, qkv_heads=qkv_heads, q=q, k=k, v=v)
        q, k = self.add_positions(q, k, positions, inter)  # each (B, H, N, head_dim): RotaryAttention rotates them
        heads, scores, weights = attend(q, k, v, mask=mask_for_heads(mask), scale=self.scale)  # heads (B, H, N, head_dim)
        merged = merge_heads(heads)  # (B, N, chan)
        projected = self.proj(merged)  # (B, N, chan)
        inter.update(scores=scores, weights=weights, heads=heads, merged=merged, projected=projected)
        if not self.skip_through_v:  # the standard layer (nanoGPT's): the block around it adds its own skip of x
            return self._report({**inter, "out": projected}, return_intermediates)
        skip = merge_heads(v)  # (B, N, chan): the values, heads flattened back
        out = projected + skip  # (B, N, chan)
        return self._report({**inter, "skip": skip, "out": out}, return_intermediates)

    def add_positions(self, q: Tensor, k: Tensor, positions: Tensor | None, inter: Intermediates) -> tuple[Tensor, Tensor]:
        """The step between the head split and the scores where a subclass tells ``q`` and ``k`` their
        positions (``(B, H, N, head_dim)`` each, same shapes out; new intermediates go into ``inter``).
        :class:`Attention` has no positions: ``q`` and ``k`` pass unchanged."""
        if positions is not None:
            raise ValueError(f"positions is for layers that use positions, such as RotaryAttention; "
                             f"{type(self).__name__} is order-blind and takes positions=None")
        return q, k

    def extra_repr(self) -> str:
        skip = "" if self.skip_through_v else ", skip_through_v=False"
        return f"dim={self.dim}, chan={self.chan}, num_heads={self.num_heads}, head_dim={self.head_dim}, scale={self.scale:g}{skip}"


class AttentionHead(nn.Module):
    """One head with its own query/key/value projections, walkthrough 002's ``SimplisticHead`` done right
    (it uses its ``dim`` argument instead of a global): ``(B, N, dim) -> (B, N, head_dim)``."""

    def __init__(self, dim: int, head_dim: int, bias: bool = False, scale: float | None = None) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.scale = head_dim ** -0.5 if scale is None else float(scale)
        self.query = nn.Linear(dim, head_dim, bias=bias)
        self.key = nn.Linear(dim, head_dim, bias=bias)
        self.value = nn.Linear(dim, head_dim, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Returns ``(out, weights, v)``: ``(B, N, head_dim)``, ``(B, N, N)``, ``(B, N, head_dim)``."""
        q, k, v = self.query(x), self.key(x), self.value(x)  # each (B, N, head_dim)
        out, _, weights = attend(q, k, v, mask=mask, scale=self.scale)  # (B, N, head_dim), (B, N, N)
        return out, weights, v


class ConcatHeadsAttention(Traceable):
    """:class:`Attention` computed the seed-002 way: ``num_heads`` separate :class:`AttentionHead`
    modules whose outputs are concatenated, then ``proj`` and the skip through V.

    Same constructor and same numbers as :class:`Attention` once the weights are copied with
    :meth:`from_attention`; slower, and written to show what the tensor method replaces.
    """

    AXES = {name: Attention.AXES[name] for name in ("x", "weights", "heads", "merged", "projected", "skip", "out")}

    def __init__(self, dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, qk_scale: float | None = None,
                 *, proj_bias: bool = True, skip_through_v: bool = True) -> None:
        super().__init__()
        _set_sizes(self, dim, chan, num_heads, qk_scale)
        self.skip_through_v = bool(skip_through_v)
        self.heads = nn.ModuleList(
            AttentionHead(dim, self.head_dim, bias=qkv_bias, scale=self.scale) for _ in range(num_heads)
        )
        self.proj = nn.Linear(chan, chan, bias=proj_bias)

    @classmethod
    def from_attention(cls, module: Attention) -> "ConcatHeadsAttention":
        """A copy of ``module`` with the weights of its fused ``qkv`` layer cut into per-head layers.

        Rows ``[0, chan)`` of ``qkv.weight`` make q, ``[chan, 2*chan)`` make k, ``[2*chan, 3*chan)``
        make v; inside each block, head ``h`` owns rows ``h*head_dim : (h+1)*head_dim``.
        """
        if not isinstance(module, Attention):
            raise TypeError(f"module must be an attn_helpers.Attention, got {type(module).__name__}")
        new = cls(module.dim, module.chan, module.num_heads, qkv_bias=module.qkv.bias is not None,
                  qk_scale=module.scale, proj_bias=module.proj.bias is not None, skip_through_v=module.skip_through_v)
        new = new.to(module.qkv.weight.device, module.qkv.weight.dtype)
        C, hd = module.chan, module.head_dim
        with torch.no_grad():
            for h, head in enumerate(new.heads):
                for part, layer in enumerate((head.query, head.key, head.value)):
                    rows = slice(part * C + h * hd, part * C + (h + 1) * hd)
                    layer.weight.copy_(module.qkv.weight[rows])
                    if module.qkv.bias is not None:
                        layer.bias.copy_(module.qkv.bias[rows])
            new.proj.load_state_dict(module.proj.state_dict())
        return new

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``x (B, N, dim) -> (B, N, chan)``; with ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tokens("x", x, self.dim, "dim")
        B, N, H = x.shape[0], x.shape[1], self.num_heads
        if mask is not None:  # read the mask exactly as Attention does, then give head h its own slice
            mask = check_mask(mask_for_heads(mask), torch.Size((B, H, N, N))).expand(B, H, N, N)  # (B, H, N, N)
        results = [head(x, None if mask is None else mask[:, h]) for h, head in enumerate(self.heads)]
        # H x ((B, N, hd), (B, N, N), (B, N, hd))
        merged = torch.cat([out for out, _, _ in results], dim=-1)  # (B, N, chan)
        projected = self.proj(merged)  # (B, N, chan)
        inter = dict(x=x, weights=torch.stack([w for _, w, _ in results], dim=1),  # (B, H, N, N)
                     heads=torch.stack([o for o, _, _ in results], dim=1),  # (B, H, N, head_dim)
                     merged=merged, projected=projected)
        if self.skip_through_v:
            skip = torch.cat([v for _, _, v in results], dim=-1)  # (B, N, chan)
            inter.update(skip=skip, out=projected + skip)  # (B, N, chan)
        else:
            inter.update(out=projected)  # (B, N, chan)
        return self._report(inter, return_intermediates)
