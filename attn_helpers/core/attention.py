"""Reference attention math: step functions and modules that return their intermediates on request.

Imports torch only. Shapes use the series' notation:

    B batch, N tokens (N_q queries, N_k keys), dim input width, chan projected width,
    H num_heads, head_dim = chan // H, d_k key width, d_v value width.

Masks follow one convention everywhere in this package, the one of
``torch.nn.functional.scaled_dot_product_attention``: a boolean mask is ``True`` where a query
*may attend* to a key; a floating mask is *added* to the scores (``0`` keeps, ``-inf`` blocks).
The other common convention, ``True`` = blocked (``Tensor.masked_fill`` and
``torch.nn.MultiheadAttention``'s ``attn_mask`` / ``key_padding_mask``), is converted explicitly
with :func:`blocked_to_keep` or ``mask_to_additive(mask, invert=True)``; it is never guessed.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .arguments import broadcast_shape, check_heads, check_mask, check_positive_int, check_qkv, check_tensor, shape_of

__all__ = [
    "broadcast_shape",
    "scaled_dot_product_attention",
    "attention_scores",
    "causal_mask",
    "padding_mask",
    "blocked_to_keep",
    "mask_to_additive",
    "split_heads",
    "merge_heads",
    "Attention",
    "AttentionHead",
    "ConcatHeadsAttention",
    "MultiHeadAttention",
]


# --------------------------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------------------------

def causal_mask(n_q: int, n_k: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal mask, ``True`` where query ``i`` may attend to key ``j`` (``j <= i``).

    Shape ``(n_q, n_k)`` (``n_k`` defaults to ``n_q``). Aligned at the top-left corner, like
    ``scaled_dot_product_attention(..., is_causal=True)`` in PyTorch.
    """
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor | list[int], n: int) -> Tensor:
    """Boolean key-padding mask from sequence lengths, ``True`` for real (non-padding) keys.

    ``lengths``: ``(B,)`` integers in ``[0, n]``. Returns shape ``(B, 1, n)``, which broadcasts over
    the query rows of ``(B, N_q, n)`` scores; insert a head axis (``mask[:, None]``) for
    ``(B, H, N_q, n)`` scores (the modules in this file do that themselves).
    """
    check_positive_int("n", n)
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got dtype {lengths.dtype} shape {shape_of(lengths)}")
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"lengths must lie in [0, n={n}], got {lengths.tolist()}")
    positions = torch.arange(n, device=lengths.device)  # (n,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, n)


def blocked_to_keep(mask: Tensor) -> Tensor:
    """Convert a boolean mask from the "True = blocked" convention (``masked_fill``,
    ``nn.MultiheadAttention``) to this package's "True = may attend". Same shape."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")
    return ~mask


def mask_to_additive(mask: Tensor, *, invert: bool = False, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a boolean mask into an additive one: ``0.0`` where attending is allowed, ``-inf`` where not.

    ``invert=False`` reads ``True`` as "may attend" (this package, PyTorch SDPA); ``invert=True``
    reads ``True`` as "blocked" (``masked_fill``, ``nn.MultiheadAttention``). Same shape as ``mask``.
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a boolean tensor, got {getattr(mask, 'dtype', type(mask).__name__)}; "
            "an additive mask is already in the form this function returns"
        )
    keep = ~mask if invert else mask
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~keep, float("-inf"))


# --------------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------------

def attention_scores(q: Tensor, k: Tensor, *, scale: float | None = None) -> Tensor:
    """Scaled scores ``q @ k^T * scale``: ``(..., N_q, d_k), (..., N_k, d_k) -> (..., N_q, N_k)``.

    ``scale=None`` means ``1 / sqrt(d_k)``; any number, ``0.0`` included, is used as given.
    """
    q = check_tensor("q", q, min_ndim=2)
    k = check_tensor("k", k, min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k (last dimension): q has shape {shape_of(q)}, "
            f"k has shape {shape_of(k)}"
        )
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return (q @ k.transpose(-2, -1)) * scale  # (..., N_q, N_k)


def _attend(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | None, dropout_p: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The formula itself; returns ``(out, scores, weights)``. Inputs already checked."""
    scores = attention_scores(q, k, scale=scale)  # (..., N_q, N_k)
    if mask is not None:
        mask = check_mask(mask, scores.shape)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)  # a float32 mask also serves float64 scores and vice versa
    # A query row whose every key is blocked has only -inf scores; softmax would give NaN (0/0).
    # We define its weights as all zeros, so its output is zero and no NaN reaches the gradient.
    dead_rows = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., N_q, 1)
    weights = torch.softmax(scores.masked_fill(dead_rows, 0.0), dim=-1)  # (..., N_q, N_k)
    weights = weights.masked_fill(dead_rows, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = weights @ v  # (..., N_q, d_v)
    return out, scores, weights


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``softmax(q @ k^T * scale + mask) @ v``, written to be read.

    Shapes: ``q (..., N_q, d_k)``, ``k (..., N_k, d_k)``, ``v (..., N_k, d_v)`` -> ``(..., N_q, d_v)``;
    the weights are ``(..., N_q, N_k)``, each row summing to one (before any dropout).

    ``mask``: boolean (``True`` = may attend) or floating (added to the scores), broadcastable to
    ``(..., N_q, N_k)``. ``scale=None`` means ``d_k ** -0.5``; ``scale=0.0`` really means zero
    (every weight equal). ``dropout_p`` drops weights like PyTorch's SDPA does (always, when > 0).

    A query row whose keys are *all* blocked (boolean ``False`` or ``-inf`` everywhere) gets zero
    weights and a zero output, never NaN. (A plain ``torch.softmax`` over such a row, and
    ``torch.nn.MultiheadAttention``, give NaN; an additive ``-1e9`` mask gives uniform weights.)
    With ``dropout_p > 0`` the returned weights are the ones after dropout, as used for the output.
    """
    q, k, v = check_qkv(q, k, v)
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p}")
    out, _, weights = _attend(q, k, v, mask, scale, float(dropout_p))
    return (out, weights) if return_weights else out


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------

def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., N, chan) -> (..., H, N, chan // H)``: head ``h`` gets features ``h*head_dim:(h+1)*head_dim``."""
    x = check_tensor("x", x, min_ndim=2)
    head_dim = check_heads(x.shape[-1], num_heads, chan_name="x.shape[-1]", where=f" (x has shape {shape_of(x)})")
    x = x.reshape(*x.shape[:-1], num_heads, head_dim)  # (..., N, H, head_dim)
    return x.transpose(-3, -2)  # (..., H, N, head_dim)


def merge_heads(x: Tensor) -> Tensor:
    """``(..., H, N, head_dim) -> (..., N, H * head_dim)``, the inverse of :func:`split_heads`."""
    x = check_tensor("x", x, min_ndim=3)
    x = x.transpose(-3, -2)  # (..., N, H, head_dim)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., N, chan)


# --------------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------------

Intermediates = dict[str, Tensor]


class _Traceable(nn.Module):
    """Lets :func:`attn_helpers.shapes.shape_trace` watch the intermediates of a forward pass.

    ``AXES`` names the axes of every intermediate, in the order the forward pass makes them.
    """

    AXES: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self._observers: list[Callable[[nn.Module, Intermediates], None]] = []

    def _set_sizes(self, dim: int, chan: int, num_heads: int, qk_scale: float | None) -> None:
        """Check and store ``dim``, ``chan``, ``num_heads``, ``head_dim`` and ``scale`` (walkthrough 000's sizes)."""
        self.dim = check_positive_int("dim", dim)
        self.chan = check_positive_int("chan", chan)
        self.num_heads = num_heads
        self.head_dim = check_heads(chan, num_heads)
        self.scale = self.head_dim ** -0.5 if qk_scale is None else float(qk_scale)

    def _report(self, inter: Intermediates, return_intermediates: bool):
        for observer in list(self._observers):
            observer(self, inter)
        return (inter["out"], inter) if return_intermediates else inter["out"]


def _batch_mask(mask: Tensor | None) -> Tensor | None:
    """Give a 3-D ``(B, N_q, N_k)`` mask a head axis so it broadcasts over ``(B, H, N_q, N_k)``."""
    if mask is not None and isinstance(mask, Tensor) and mask.ndim == 3:
        return mask[:, None]  # (B, 1, N_q, N_k)
    return mask


class Attention(_Traceable):
    """Walkthrough 000's attention block: fused QKV projection, heads, output projection, skip through V.

    ``x (B, N, dim) -> (B, N, chan)``. One ``Linear(dim, 3 * chan)`` makes q, k and v; each is
    split into ``num_heads`` heads of ``head_dim = chan // num_heads``; the merged heads go through
    ``proj = Linear(chan, chan)``; and because ``dim`` may differ from ``chan``, the skip connection
    adds the merged *values* ``v`` (already ``chan`` wide) instead of ``x``.

    ``qk_scale=None`` means ``head_dim ** -0.5``; any number, ``0.0`` included, is used as given
    (the seed's ``qk_scale or ...`` silently ignored ``0.0``).
    """

    AXES = {
        "x": "batch tokens dim",
        "qkv": "batch tokens 3*chan",
        "qkv_heads": "qkv batch heads tokens head_dim",
        "q": "batch heads tokens head_dim",
        "k": "batch heads tokens head_dim",
        "v": "batch heads tokens head_dim",
        "scores": "batch heads queries keys",
        "weights": "batch heads queries keys",
        "heads": "batch heads tokens head_dim",
        "merged": "batch tokens chan",
        "projected": "batch tokens chan",
        "skip": "batch tokens chan",
        "out": "batch tokens chan",
    }

    def __init__(
        self, dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, qk_scale: float | None = None
    ) -> None:
        super().__init__()
        self._set_sizes(dim, chan, num_heads, qk_scale)
        self.qkv = nn.Linear(dim, 3 * chan, bias=qkv_bias)
        self.proj = nn.Linear(chan, chan)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``x (B, N, dim) -> (B, N, chan)``; with ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tensor("x", x, ndim=3)
        B, N, C = x.shape
        if C != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {shape_of(x)} (last dimension {C})")
        H, hd = self.num_heads, self.head_dim
        qkv = self.qkv(x)  # (B, N, 3*chan)
        qkv_heads = qkv.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, N, head_dim)
        q, k, v = qkv_heads.unbind(0)  # each (B, H, N, head_dim)
        heads, scores, weights = _attend(q, k, v, _batch_mask(mask), self.scale, 0.0)  # heads (B, H, N, head_dim)
        merged = merge_heads(heads)  # (B, N, chan)
        projected = self.proj(merged)  # (B, N, chan)
        skip = merge_heads(v)  # (B, N, chan): the values, heads flattened back
        out = projected + skip  # (B, N, chan)
        inter = dict(x=x, qkv=qkv, qkv_heads=qkv_heads, q=q, k=k, v=v, scores=scores, weights=weights,
                     heads=heads, merged=merged, projected=projected, skip=skip, out=out)
        return self._report(inter, return_intermediates)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, chan={self.chan}, num_heads={self.num_heads}, head_dim={self.head_dim}, scale={self.scale:g}"


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
        out, _, weights = _attend(q, k, v, mask, self.scale, 0.0)
        return out, weights, v


class ConcatHeadsAttention(_Traceable):
    """:class:`Attention` computed the seed-002 way: ``num_heads`` separate :class:`AttentionHead`
    modules whose outputs are concatenated, then ``proj`` and the skip through V.

    Same constructor and same numbers as :class:`Attention` once the weights are copied with
    :meth:`from_attention`; slower, and written to show what the tensor method replaces.
    """

    AXES = {
        "x": "batch tokens dim",
        "weights": "batch heads queries keys",
        "heads": "batch heads tokens head_dim",
        "merged": "batch tokens chan",
        "projected": "batch tokens chan",
        "skip": "batch tokens chan",
        "out": "batch tokens chan",
    }

    def __init__(
        self, dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, qk_scale: float | None = None
    ) -> None:
        super().__init__()
        self._set_sizes(dim, chan, num_heads, qk_scale)
        self.heads = nn.ModuleList(
            AttentionHead(dim, self.head_dim, bias=qkv_bias, scale=self.scale) for _ in range(num_heads)
        )
        self.proj = nn.Linear(chan, chan)

    @classmethod
    def from_attention(cls, module: Attention) -> "ConcatHeadsAttention":
        """A copy of ``module`` with the weights of its fused ``qkv`` layer cut into per-head layers.

        Rows ``[0, chan)`` of ``qkv.weight`` make q, ``[chan, 2*chan)`` make k, ``[2*chan, 3*chan)``
        make v; inside each block, head ``h`` owns rows ``h*head_dim : (h+1)*head_dim``.
        """
        if not isinstance(module, Attention):
            raise TypeError(f"module must be an attn_helpers.Attention, got {type(module).__name__}")
        new = cls(module.dim, module.chan, module.num_heads, qkv_bias=module.qkv.bias is not None,
                  qk_scale=module.scale)
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
        x = check_tensor("x", x, ndim=3)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {shape_of(x)}")
        B, N, H = x.shape[0], x.shape[1], self.num_heads
        if mask is not None:  # read the mask exactly as Attention does, then give head h its own slice
            mask = check_mask(_batch_mask(mask), torch.Size((B, H, N, N))).expand(B, H, N, N)  # (B, H, N, N)
        results = [head(x, None if mask is None else mask[:, h]) for h, head in enumerate(self.heads)]
        # H x ((B, N, hd), (B, N, N), (B, N, hd))
        merged = torch.cat([out for out, _, _ in results], dim=-1)  # (B, N, chan)
        skip = torch.cat([v for _, _, v in results], dim=-1)  # (B, N, chan)
        projected = self.proj(merged)  # (B, N, chan)
        out = projected + skip  # (B, N, chan)
        inter = dict(
            x=x,
            weights=torch.stack([w for _, w, _ in results], dim=1),  # (B, H, N, N)
            heads=torch.stack([o for o, _, _ in results], dim=1),  # (B, H, N, head_dim)
            merged=merged, projected=projected, skip=skip, out=out,
        )
        return self._report(inter, return_intermediates)


class MultiHeadAttention(_Traceable):
    """Walkthrough 004's multi-head attention with separate Q, K, V and output projections.

    ``forward(query (B, N_q, d_model), key (B, N_k, kdim), value (B, N_k, vdim)) -> (B, N_q, d_model)``.
    Self-attention passes the same tensor three times (or only ``query``). Each head scales by
    ``head_dim ** -0.5`` (walkthrough 004 divided by ``sqrt(d_model)``, a bug lesson 05 measures).

    Same parameters and numbers as ``torch.nn.MultiheadAttention(..., batch_first=True)``:
    see :meth:`from_torch` and :meth:`to_torch`. Masks use this package's convention
    (``True`` = may attend, or additive), shaped ``(N_q, N_k)``, ``(B, N_q, N_k)`` (e.g. from
    :func:`padding_mask`) or ``(B, H, N_q, N_k)``.
    """

    AXES = {
        "query": "batch queries d_model",
        "key": "batch keys kdim",
        "value": "batch keys vdim",
        "q": "batch queries d_model",
        "k": "batch keys d_model",
        "v": "batch keys d_model",
        "q_heads": "batch heads queries head_dim",
        "k_heads": "batch heads keys head_dim",
        "v_heads": "batch heads keys head_dim",
        "scores": "batch heads queries keys",
        "weights": "batch heads queries keys",
        "heads": "batch heads queries head_dim",
        "merged": "batch queries d_model",
        "out": "batch queries d_model",
    }

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        kdim: int | None = None,
        vdim: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = num_heads
        self.head_dim = check_heads(d_model, num_heads, chan_name="d_model")
        self.kdim = d_model if kdim is None else check_positive_int("kdim", kdim)
        self.vdim = d_model if vdim is None else check_positive_int("vdim", vdim)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(self.kdim, d_model, bias=bias)
        self.v_proj = nn.Linear(self.vdim, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        return_intermediates: bool = False,
    ):
        """``(B, N_q, d_model), (B, N_k, kdim), (B, N_k, vdim) -> (B, N_q, d_model)``."""
        key = query if key is None else key
        value = key if value is None else value
        for name, t, width in (("query", query, self.d_model), ("key", key, self.kdim), ("value", value, self.vdim)):
            check_tensor(name, t, ndim=3)
            if t.shape[-1] != width:
                raise ValueError(f"{name} must have shape (B, N, {width}), got {shape_of(t)} (last dimension {t.shape[-1]})")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same batch size and number of tokens N_k: key has shape "
                f"{shape_of(key)}, value has shape {shape_of(value)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(f"query and key must have the same batch size: query {shape_of(query)}, key {shape_of(key)}")
        H = self.num_heads
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, N_q|N_k, d_model)
        q_heads, k_heads, v_heads = (split_heads(t, H) for t in (q, k, v))  # (B, H, N_q|N_k, head_dim)
        dropout_p = self.dropout if self.training else 0.0
        heads, scores, weights = _attend(q_heads, k_heads, v_heads, _batch_mask(mask), None, dropout_p)
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


