"""The layers (lessons 05-07): ``x (B, N, dim) -> (B, N, chan)`` with ``H`` heads of ``head_dim = chan // H`` features.

Every forward ends with one tail, ``self._report(inter, return_intermediates)``: it hands the intermediates (named
in ``AXES``) to the observers of ``layer.add_observer(fn)`` and returns them on request (:func:`shape_trace`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.hooks import RemovableHandle

from .arguments import (check_heads, check_mask, check_positive_int, check_probability, check_query_key_value,
                        check_tokens)
from .attention import attend, merge_heads, split_heads
from .masks import mask_for_heads

__all__ = ["Intermediates", "Observer", "Traceable", "MultiHeadAttention", "Attention", "AttentionHead",
           "ConcatHeadsAttention", "TransformerBlock", "ACTIVATIONS"]

Intermediates = dict[str, Tensor]
Observer = Callable[[nn.Module, Intermediates], None]


class Traceable(nn.Module):
    """A module whose forward hands its intermediates to observers (lesson 05's shape traces); ``AXES`` names the
    axes of each intermediate (``"batch tokens chan"``), in the order the forward makes them."""

    AXES: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self._observers: OrderedDict[int, Observer] = OrderedDict()  # handle id -> observer, as torch's hooks

    def add_observer(self, observer: Observer) -> RemovableHandle:
        """Call ``observer(module, intermediates)`` after each forward pass until the handle's ``remove()``."""
        if not callable(observer):
            raise TypeError(f"observer must be callable as observer(module, intermediates), got {type(observer).__name__}")
        handle = RemovableHandle(self._observers)
        self._observers[handle.id] = observer
        return handle

    def notify_observers(self, inter: Intermediates) -> None:
        """Hand this forward pass's intermediates to every observer, oldest first."""
        for observer in list(self._observers.values()):
            observer(self, inter)

    def _report(self, inter: Intermediates, return_intermediates: bool):
        """Notify the observers; return ``inter["out"]``, or ``(inter["out"], inter)`` when asked."""
        self.notify_observers(inter)
        return (inter["out"], inter) if return_intermediates else inter["out"]


def _check_torch(module: object, kind: type, **flags: str) -> None:
    """``from_torch``'s checks: ``module`` is a ``torch.nn.<kind>`` built with ``flag=True`` for each of ``flags``."""
    if not isinstance(module, kind):
        raise TypeError(f"module must be a torch.nn.{kind.__name__}, got {type(module).__name__}")
    for flag, meaning in flags.items():
        if not getattr(module, flag):
            raise ValueError(f"module must be built with {flag}=True ({meaning}); got {flag}=False")


def _copied(new: nn.Module, old: nn.Module, layers: list, tensors: list = ()) -> nn.Module:
    """``new`` in ``old``'s device, dtype and train/eval mode, with ``(layer, weight, bias)`` of ``layers`` and
    ``(target, source)`` of ``tensors`` copied in (an eval-mode copy must not apply dropout)."""
    new = new.to(next(old.parameters()).device, next(old.parameters()).dtype)
    with torch.no_grad():
        for layer, weight, bias in layers:
            layer.weight.copy_(weight)
            if bias is not None:
                layer.bias.copy_(bias)
        for target, source in tensors:
            target.copy_(source)
    return new.train(old.training)


# --- Lesson 05: multi-head attention, as PyTorch builds it ---

class MultiHeadAttention(Traceable):
    """Lesson 05: multi-head attention with separate Q, K, V and output projections, parameter for parameter
    ``torch.nn.MultiheadAttention(batch_first=True)`` (:meth:`from_torch`, :meth:`to_torch`).

    ``query (B, N_q, d_model), key (B, N_k, kdim), value (B, N_k, vdim) -> (B, N_q, d_model)``; each head scales by
    ``head_dim ** -0.5``. ``bias`` sets all four biases, ``qkv_bias`` and ``proj_bias`` set them apart. ``mask``:
    ``(N_q, N_k)``, ``(B, N_q, N_k)`` or ``(B, H, N_q, N_k)``, ``True`` = may attend, or additive.
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
        _check_torch(module, nn.MultiheadAttention, batch_first="inputs (B, N, d_model)")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn are not part of this lesson's module; build it without them")
        has_bias = module.in_proj_bias is not None
        new = cls(module.embed_dim, module.num_heads, bias=has_bias, dropout=module.dropout, kdim=module.kdim,
                  vdim=module.vdim)
        d = module.embed_dim
        if module.in_proj_weight is not None:  # kdim = vdim = embed_dim: one stacked (3d, d) weight
            weights = module.in_proj_weight.split(d)  # 3 x (d, d)
        else:
            weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        biases = module.in_proj_bias.split(d) if has_bias else (None,) * 3
        return _copied(new, module, [*zip((new.q_proj, new.k_proj, new.v_proj), weights, biases),
                                     (new.out_proj, module.out_proj.weight, module.out_proj.bias)])

    def to_torch(self) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention(batch_first=True)`` with this module's weights."""
        has_bias = self.q_proj.bias is not None
        if has_bias != (self.out_proj.bias is not None):
            raise ValueError(f"torch.nn.MultiheadAttention has one bias flag for all four projections; this module "
                             f"has qkv_bias={has_bias} and proj_bias={self.out_proj.bias is not None}")
        ref = nn.MultiheadAttention(self.d_model, self.num_heads, dropout=self.dropout, bias=has_bias,
                                    kdim=self.kdim, vdim=self.vdim, batch_first=True)
        ours = (self.q_proj, self.k_proj, self.v_proj)
        if ref.in_proj_weight is not None:
            weights = [(ref.in_proj_weight, torch.cat([p.weight for p in ours]))]
        else:
            weights = list(zip((ref.q_proj_weight, ref.k_proj_weight, ref.v_proj_weight), (p.weight for p in ours)))
        if has_bias:
            weights.append((ref.in_proj_bias, torch.cat([p.bias for p in ours])))
        return _copied(ref, self, [(ref.out_proj, self.out_proj.weight, self.out_proj.bias)], weights)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}")


# --- Lessons 06-07: the fused-QKV layer with its skip through V, and its heads one by one ---

def _set_sizes(module: nn.Module, dim: int, chan: int, num_heads: int, qk_scale: float | None) -> None:
    """Check and store ``dim``, ``chan``, ``num_heads``, ``head_dim`` and ``scale`` (walkthrough 000's sizes)."""
    module.dim = check_positive_int("dim", dim)
    module.chan = check_positive_int("chan", chan)
    module.num_heads = num_heads
    module.head_dim = check_heads(chan, num_heads)
    module.scale = module.head_dim ** -0.5 if qk_scale is None else float(qk_scale)


class Attention(Traceable):
    """Lessons 06-07: walkthrough 000's block, ``x (B, N, dim) -> (B, N, chan)``: one ``qkv = Linear(dim, 3 * chan)``,
    ``num_heads`` heads, ``proj = Linear(chan, chan)``, and (``dim`` may differ from ``chan``) a skip that adds the
    merged values ``v``, not ``x``. ``skip_through_v=False``: nanoGPT's ``CausalSelfAttention`` without its mask.
    ``qk_scale=None`` means ``head_dim ** -0.5``; any number, ``0.0`` included, is used as given.
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
        """``x (B, N, dim) -> (B, N, chan)``; ``mask`` ``(N, N)``, ``(B, N, N)`` or ``(B, H, N, N)``; ``positions (N,)``
        for layers that place q and k (:class:`RotaryAttention`)."""
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
        """Where a subclass tells ``q`` and ``k`` (``(B, H, N, head_dim)`` each) their positions; here they pass."""
        if positions is not None:
            raise ValueError(f"positions is for layers that use positions, such as RotaryAttention; "
                             f"{type(self).__name__} is order-blind and takes positions=None")
        return q, k

    def extra_repr(self) -> str:
        skip = "" if self.skip_through_v else ", skip_through_v=False"
        return f"dim={self.dim}, chan={self.chan}, num_heads={self.num_heads}, head_dim={self.head_dim}, scale={self.scale:g}{skip}"


class AttentionHead(nn.Module):
    """Lesson 05: one head with its own projections, walkthrough 002's ``SimplisticHead`` using its ``dim`` argument
    (not a global): ``(B, N, dim) -> (B, N, head_dim)``."""

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
    """Lesson 05: :class:`Attention` the walkthrough-002 way, ``num_heads`` :class:`AttentionHead` modules
    concatenated; the same numbers once :meth:`from_attention` copies the weights."""

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
        """A copy of ``module``: rows ``part * chan + h * head_dim ...`` of ``qkv.weight`` (part 0, 1, 2: q, k, v)
        become head ``h``'s layers."""
        if not isinstance(module, Attention):
            raise TypeError(f"module must be an attn_helpers.Attention, got {type(module).__name__}")
        new = cls(module.dim, module.chan, module.num_heads, qkv_bias=module.qkv.bias is not None,
                  qk_scale=module.scale, proj_bias=module.proj.bias is not None, skip_through_v=module.skip_through_v)
        C, hd, weight, bias = module.chan, module.head_dim, module.qkv.weight, module.qkv.bias
        rows = [(layer, slice(part * C + h * hd, part * C + (h + 1) * hd))
                for h, head in enumerate(new.heads) for part, layer in enumerate((head.query, head.key, head.value))]
        return _copied(new, module, [(layer, weight[r], None if bias is None else bias[r]) for layer, r in rows]
                       + [(new.proj, module.proj.weight, module.proj.bias)])

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


# --- Lesson 07: the transformer block around the attention ---

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class TransformerBlock(Traceable):
    """Lesson 07: the pre-LayerNorm block, ``x (B, N, d_model) -> (B, N, d_model)``, equal to
    ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` with the same arguments (its ``nhead`` is
    ``num_heads``)::

        residual = x + dropout(attention(norm_1(x)))
        out = residual + dropout(linear_2(dropout(activation(linear_1(norm_2(residual))))))
    """

    AXES = {**dict.fromkeys(("x", "normed_1", "attended", "residual", "normed_2"), "batch tokens d_model"),
            "ffn_hidden": "batch tokens dim_feedforward", "mlp": "batch tokens d_model", "out": "batch tokens d_model"}

    def __init__(self, d_model: int, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", layer_norm_eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.dim_feedforward = check_positive_int("dim_feedforward", dim_feedforward)
        self.dropout_p = check_probability("dropout", dropout)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.attention = MultiHeadAttention(d_model, num_heads, bias=bias, dropout=dropout)  # checks num_heads
        self.num_heads, self.head_dim = self.attention.num_heads, self.attention.head_dim
        self.norm_1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm_2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.linear_1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.linear_2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``x (B, N, d_model) -> out (B, N, d_model)``; with ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        normed_1 = self.norm_1(x)  # (B, N, d_model)
        attended = self.attention(normed_1, mask=mask)  # (B, N, d_model)
        residual = x + self.dropout(attended)  # (B, N, d_model): the first skip connection
        normed_2 = self.norm_2(residual)  # (B, N, d_model)
        ffn_hidden = ACTIVATIONS[self.activation](self.linear_1(normed_2))  # (B, N, dim_feedforward)
        mlp = self.linear_2(self.dropout(ffn_hidden))  # (B, N, d_model)
        out = residual + self.dropout(mlp)  # (B, N, d_model): the second skip connection
        inter = dict(x=x, normed_1=normed_1, attended=attended, residual=residual, normed_2=normed_2,
                     ffn_hidden=ffn_hidden, mlp=mlp, out=out)
        return self._report(inter, return_intermediates)

    @classmethod
    def from_torch(cls, module: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """Copy a ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` into a block with equal outputs."""
        _check_torch(module, nn.TransformerEncoderLayer, norm_first="a pre-LayerNorm block")
        attention = MultiHeadAttention.from_torch(module.self_attn)  # checks batch_first
        names = {F.relu: "relu", F.gelu: "gelu"}
        activation = module.activation if isinstance(module.activation, str) else names.get(module.activation)
        if activation not in ACTIVATIONS:
            raise ValueError(f"module.activation must be relu or gelu, got {module.activation!r}")
        new = cls(attention.d_model, attention.num_heads, module.linear1.out_features, module.dropout.p,
                  activation, module.norm1.eps, bias=module.linear1.bias is not None)
        new.attention = attention
        pairs = ((new.norm_1, module.norm1), (new.norm_2, module.norm2), (new.linear_1, module.linear1),
                 (new.linear_2, module.linear2))
        return _copied(new, module, [(ours, theirs.weight, theirs.bias) for ours, theirs in pairs])

    def to_torch(self) -> nn.TransformerEncoderLayer:
        """A ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` with this block's weights."""
        ref = nn.TransformerEncoderLayer(self.d_model, self.num_heads, self.dim_feedforward, self.dropout_p,
                                         self.activation, self.norm_1.eps, batch_first=True, norm_first=True,
                                         bias=self.linear_1.bias is not None)
        ref.self_attn = self.attention.to_torch()
        pairs = ((ref.norm1, self.norm_1), (ref.norm2, self.norm_2), (ref.linear1, self.linear_1),
                 (ref.linear2, self.linear_2))
        return _copied(ref, self, [(theirs, ours.weight, ours.bias) for theirs, ours in pairs])

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"dim_feedforward={self.dim_feedforward}, dropout={self.dropout_p}, activation={self.activation!r}")
