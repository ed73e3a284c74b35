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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

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
    "attention_entropy",
    "softmax_grad_norm",
    "softmax_statistics",
    "Attention",
    "AttentionHead",
    "ConcatHeadsAttention",
    "MultiHeadAttention",
    "attention_parameters",
    "attention_flops",
    "SKIP_KINDS",
    "AttentionStack",
    "signal_through_stack",
    "depth_sweep",
]


# --------------------------------------------------------------------------------------------
# Input checks: every message names the argument, what was expected and what was received.
# --------------------------------------------------------------------------------------------

def _shape(t: Tensor) -> list[int]:
    return list(t.shape)


def _check_tensor(name: str, t: object, *, min_ndim: int = 1, ndim: int | None = None) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float32 or float64), got dtype {t.dtype} "
            f"with shape {_shape(t)}; convert it with {name}.float()"
        )
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {_shape(t)} ({t.ndim} dimensions)")
    if t.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {_shape(t)} ({t.ndim} dimensions)"
        )
    return t


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def _check_heads(chan: int, num_heads: int, chan_name: str = "chan", where: str = "") -> int:
    _check_positive_int("num_heads", num_heads)
    if chan % num_heads != 0:
        raise ValueError(
            f"{chan_name}={chan}{where} is not divisible by num_heads={num_heads}: each head gets "
            f"{chan_name} / num_heads = {chan / num_heads:g} features, which must be a whole number "
            f"(try num_heads in {[h for h in range(1, chan + 1) if chan % h == 0]})"
        )
    return chan // num_heads


def broadcast_shape(*shapes: tuple[int, ...] | torch.Size) -> tuple[int, ...] | None:
    """The shape that ``shapes`` broadcast to under PyTorch's rules, or ``None`` if they do not.

    Plain Python on purpose: ``torch.broadcast_shapes`` imports sympy on its first call, which
    costs seconds at the start of every notebook.
    """
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _check_mask(mask: object, scores_shape: torch.Size) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"mask must be boolean (True = may attend) or floating (added to the scores), got dtype "
            f"{mask.dtype} with shape {_shape(mask)}; for 0/1 integers use mask.bool()"
        )
    if broadcast_shape(mask.shape, scores_shape) != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {_shape(mask)} cannot broadcast to the scores' shape {list(scores_shape)} "
            f"(..., N_q, N_k); a key-padding mask for (B, H, N_q, N_k) scores has shape (B, 1, 1, N_k)"
        )
    return mask


# --------------------------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------------------------

def causal_mask(n_q: int, n_k: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal mask, ``True`` where query ``i`` may attend to key ``j`` (``j <= i``).

    Shape ``(n_q, n_k)`` (``n_k`` defaults to ``n_q``). Aligned at the top-left corner, like
    ``scaled_dot_product_attention(..., is_causal=True)`` in PyTorch.
    """
    _check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else _check_positive_int("n_k", n_k)
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor | list[int], n: int) -> Tensor:
    """Boolean key-padding mask from sequence lengths, ``True`` for real (non-padding) keys.

    ``lengths``: ``(B,)`` integers in ``[0, n]``. Returns shape ``(B, 1, n)``, which broadcasts over
    the query rows of ``(B, N_q, n)`` scores; insert a head axis (``mask[:, None]``) for
    ``(B, H, N_q, n)`` scores (the modules in this file do that themselves).
    """
    _check_positive_int("n", n)
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got dtype {lengths.dtype} shape {_shape(lengths)}")
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

def _check_qkv(q: object, k: object, v: object) -> tuple[Tensor, Tensor, Tensor]:
    q = _check_tensor("q", q, min_ndim=2)
    k = _check_tensor("k", k, min_ndim=2)
    v = _check_tensor("v", v, min_ndim=2)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k (last dimension) to be dot-multiplied: "
            f"q has shape {_shape(q)} (d_k={q.shape[-1]}), k has shape {_shape(k)} (d_k={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of tokens N_k (second-to-last dimension), one value per key: "
            f"k has shape {_shape(k)} (N_k={k.shape[-2]}), v has shape {_shape(v)} (N_k={v.shape[-2]})"
        )
    if broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2]) is None:
        raise ValueError(
            f"the batch dimensions of q {_shape(q)}, k {_shape(k)} and v {_shape(v)} do not broadcast "
            "(everything before the last two dimensions must match or be 1)"
        )
    return q, k, v


def attention_scores(q: Tensor, k: Tensor, *, scale: float | None = None) -> Tensor:
    """Scaled scores ``q @ k^T * scale``: ``(..., N_q, d_k), (..., N_k, d_k) -> (..., N_q, N_k)``.

    ``scale=None`` means ``1 / sqrt(d_k)``; any number, ``0.0`` included, is used as given.
    """
    q = _check_tensor("q", q, min_ndim=2)
    k = _check_tensor("k", k, min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k (last dimension): q has shape {_shape(q)}, "
            f"k has shape {_shape(k)}"
        )
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return (q @ k.transpose(-2, -1)) * scale  # (..., N_q, N_k)


def _attend(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | None, dropout_p: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The formula itself; returns ``(out, scores, weights)``. Inputs already checked."""
    scores = attention_scores(q, k, scale=scale)  # (..., N_q, N_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
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
    q, k, v = _check_qkv(q, k, v)
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p}")
    out, _, weights = _attend(q, k, v, mask, scale, float(dropout_p))
    return (out, weights) if return_weights else out


def attention_entropy(weights: Tensor) -> Tensor:
    """Entropy (in nats) of each attention row: ``(..., N_q, N_k) -> (..., N_q)``.

    ``log(N_k)`` for uniform weights, ``0`` for one-hot weights. Zero weights contribute zero.
    """
    weights = _check_tensor("weights", weights, min_ndim=1)
    logs = torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))
    return -(weights * logs).sum(dim=-1)


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------

def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., N, chan) -> (..., H, N, chan // H)``: head ``h`` gets features ``h*head_dim:(h+1)*head_dim``."""
    x = _check_tensor("x", x, min_ndim=2)
    head_dim = _check_heads(x.shape[-1], num_heads, chan_name="x.shape[-1]", where=f" (x has shape {_shape(x)})")
    x = x.reshape(*x.shape[:-1], num_heads, head_dim)  # (..., N, H, head_dim)
    return x.transpose(-3, -2)  # (..., H, N, head_dim)


def merge_heads(x: Tensor) -> Tensor:
    """``(..., H, N, head_dim) -> (..., N, H * head_dim)``, the inverse of :func:`split_heads`."""
    x = _check_tensor("x", x, min_ndim=3)
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
        """Check and store ``dim``, ``chan``, ``num_heads``, ``head_dim`` and ``scale`` (seed 000's sizes)."""
        self.dim = _check_positive_int("dim", dim)
        self.chan = _check_positive_int("chan", chan)
        self.num_heads = num_heads
        self.head_dim = _check_heads(chan, num_heads)
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
    """Seed 000's attention block: fused QKV projection, heads, output projection, skip through V.

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
        x = _check_tensor("x", x, ndim=3)
        B, N, C = x.shape
        if C != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {_shape(x)} (last dimension {C})")
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
    """One head with its own query/key/value projections, seed 002's ``SimplisticHead`` done right
    (it uses its ``dim`` argument instead of a global): ``(B, N, dim) -> (B, N, head_dim)``."""

    def __init__(self, dim: int, head_dim: int, bias: bool = False, scale: float | None = None) -> None:
        super().__init__()
        self.dim = _check_positive_int("dim", dim)
        self.head_dim = _check_positive_int("head_dim", head_dim)
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
        x = _check_tensor("x", x, ndim=3)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {_shape(x)}")
        B, N, H = x.shape[0], x.shape[1], self.num_heads
        if mask is not None:  # read the mask exactly as Attention does, then give head h its own slice
            mask = _check_mask(_batch_mask(mask), torch.Size((B, H, N, N))).expand(B, H, N, N)  # (B, H, N, N)
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
    """Seed 004's multi-head attention with separate Q, K, V and output projections.

    ``forward(query (B, N_q, d_model), key (B, N_k, kdim), value (B, N_k, vdim)) -> (B, N_q, d_model)``.
    Self-attention passes the same tensor three times (or only ``query``). Each head scales by
    ``head_dim ** -0.5`` (seed 004 divided by ``sqrt(d_model)``, a bug lesson 05 measures).

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
        self.d_model = _check_positive_int("d_model", d_model)
        self.num_heads = num_heads
        self.head_dim = _check_heads(d_model, num_heads, chan_name="d_model")
        self.kdim = d_model if kdim is None else _check_positive_int("kdim", kdim)
        self.vdim = d_model if vdim is None else _check_positive_int("vdim", vdim)
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
            _check_tensor(name, t, ndim=3)
            if t.shape[-1] != width:
                raise ValueError(f"{name} must have shape (B, N, {width}), got {_shape(t)} (last dimension {t.shape[-1]})")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same batch size and number of tokens N_k: key has shape "
                f"{_shape(key)}, value has shape {_shape(value)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(f"query and key must have the same batch size: query {_shape(query)}, key {_shape(key)}")
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


# --------------------------------------------------------------------------------------------
# Counting: the parameters and the floating-point operations of the Attention layer
# --------------------------------------------------------------------------------------------

SOFTMAX_FLOPS_PER_SCORE = 5  # per score: compare (the row's max), subtract it, exp, add to the row's sum, divide


def attention_parameters(dim: int, chan: int, *, qkv_bias: bool = False) -> dict[str, int]:
    """The learnable numbers of :class:`Attention` ``(dim, chan, num_heads, qkv_bias)``, by part.

    Returns ``{"qkv weight": 3*chan*dim, "qkv bias": 3*chan (0 without qkv_bias),
    "proj weight": chan*chan, "proj bias": chan}``; the layer's total is the sum of the values.
    There is no ``num_heads`` argument because the count does not depend on it: the heads share
    out the same ``chan`` features, they add no weights.
    """
    _check_positive_int("dim", dim)
    _check_positive_int("chan", chan)
    if not isinstance(qkv_bias, bool):
        raise TypeError(f"qkv_bias must be True or False, got {qkv_bias!r}")
    return {
        "qkv weight": 3 * chan * dim,
        "qkv bias": 3 * chan if qkv_bias else 0,
        "proj weight": chan * chan,
        "proj bias": chan,
    }


def attention_flops(
    batch: int, tokens: int, dim: int, chan: int, num_heads: int, *, qkv_bias: bool = False
) -> dict[str, int]:
    """Floating-point operations of one forward pass of :class:`Attention` on ``x (batch, tokens, dim)``.

    One entry per step, in the order of the forward pass (``B = batch``, ``N = tokens``,
    ``H = num_heads``, ``head_dim = chan // H``); a matrix product counts 2 FLOPs per
    multiply-add, an element-wise step 1 per element:

    - ``"qkv projection"``: ``2*B*N*dim*3*chan``
    - ``"scores (q @ k^T)"``: ``2*B*H*N*N*head_dim``
    - ``"scale"``: ``B*H*N*N``
    - ``"softmax"``: ``SOFTMAX_FLOPS_PER_SCORE * B*H*N*N`` (max, subtract, exp, sum, divide)
    - ``"weights @ v"``: ``2*B*H*N*N*head_dim``
    - ``"output projection"``: ``2*B*N*chan*chan``
    - ``"bias adds"``: ``B*N*chan``, plus ``B*N*3*chan`` with ``qkv_bias``
    - ``"skip add"``: ``B*N*chan``

    The four matrix products are what ``torch.utils.flop_counter.FlopCounterMode`` counts.
    Splitting into heads and merging them only moves numbers: 0 FLOPs.
    """
    B = _check_positive_int("batch", batch)
    N = _check_positive_int("tokens", tokens)
    _check_positive_int("dim", dim)
    _check_positive_int("chan", chan)
    head_dim = _check_heads(chan, num_heads)
    if not isinstance(qkv_bias, bool):
        raise TypeError(f"qkv_bias must be True or False, got {qkv_bias!r}")
    H = num_heads
    return {
        "qkv projection": 2 * B * N * dim * 3 * chan,
        "scores (q @ k^T)": 2 * B * H * N * N * head_dim,
        "scale": B * H * N * N,
        "softmax": SOFTMAX_FLOPS_PER_SCORE * B * H * N * N,
        "weights @ v": 2 * B * H * N * N * head_dim,
        "output projection": 2 * B * N * chan * chan,
        "bias adds": B * N * chan + (B * N * 3 * chan if qkv_bias else 0),
        "skip add": B * N * chan,
    }


# --------------------------------------------------------------------------------------------
# Measuring softmax saturation (lesson 02: why scores are divided by sqrt(d_k))
# --------------------------------------------------------------------------------------------

def softmax_grad_norm(scores: Tensor, upstream: Tensor) -> Tensor:
    """Size of the gradient that reaches the scores through a row softmax: ``(..., N_k) -> (...)``.

    For ``loss = (upstream * softmax(scores, dim=-1)).sum()`` the gradient with respect to
    ``scores`` is ``p * (upstream - (p * upstream).sum(-1, keepdim=True))``, ``p`` being the
    weights; this returns its Euclidean norm over each row. ``upstream`` has the shape of
    ``scores``: the gradient arriving at the weights from later layers. A saturated row (one
    weight near 1, the rest near 0) lets almost nothing through, so its norm is near 0.
    """
    scores = _check_tensor("scores", scores, min_ndim=1)
    upstream = _check_tensor("upstream", upstream, min_ndim=1)
    if upstream.shape != scores.shape:
        raise ValueError(
            f"upstream must have the shape of scores (one gradient entry per weight): scores has shape "
            f"{_shape(scores)}, upstream has shape {_shape(upstream)}"
        )
    p = torch.softmax(scores, dim=-1)  # (..., N_k)
    grad = p * (upstream - (p * upstream).sum(dim=-1, keepdim=True))  # (..., N_k)
    return grad.norm(dim=-1)  # (...)


def softmax_statistics(scores: Tensor, upstream: Tensor | None = None) -> dict[str, float]:
    """How peaked ``softmax(scores, dim=-1)`` is, as plain numbers averaged over the rows.

    ``scores (..., N_k)`` are the softmax's input, already scaled. Returns a dict with
    ``variance`` (of all the scores), ``max_weight`` (the mean over rows of each row's largest
    weight: ``1 / N_k`` when uniform, ``1`` when one-hot), ``entropy`` (the mean of
    :func:`attention_entropy`, in nats: ``log(N_k)`` uniform, ``0`` one-hot) and, when
    ``upstream`` (same shape as ``scores``) is given, ``grad_norm`` (the mean of
    :func:`softmax_grad_norm`).
    """
    scores = _check_tensor("scores", scores, min_ndim=1)
    weights = torch.softmax(scores, dim=-1)  # (..., N_k)
    stats = {
        "variance": scores.to(torch.float64).var().item() if scores.numel() > 1 else 0.0,  # float64: stable digits
        "max_weight": weights.amax(dim=-1).mean().item(),
        "entropy": attention_entropy(weights).mean().item(),
    }
    if upstream is not None:
        stats["grad_norm"] = softmax_grad_norm(scores, upstream).mean().item()
    return stats


# --------------------------------------------------------------------------------------------
# Stacks of attention layers: what the skip connection does to signal and gradient
# --------------------------------------------------------------------------------------------

SKIP_KINDS = ("identity", "values", "none")


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run many tiny tensor operations on one thread, then restore the thread count.

    A stack measurement is thousands of operations on tensors of a few hundred numbers: extra threads
    cannot speed them up, and on a busy machine their synchronisation made them 10-30x slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_skip(skip: object) -> str:
    if skip not in SKIP_KINDS:
        raise ValueError(f"skip must be one of {list(SKIP_KINDS)}, got {skip!r}")
    return skip  # type: ignore[return-value]


class AttentionStack(nn.Module):
    """``depth`` of seed 000's :class:`Attention` layers in a row, joined by a chosen skip connection.

    ``x (B, N, dim) -> (B, N, chan)``: layer 0 maps ``dim -> chan``, the others ``chan -> chan``.
    With ``projected_l`` the output projection of layer ``l`` and ``v_l`` its merged values
    (both ``(B, N, chan)``), the next hidden state is

    - ``skip="identity"``: ``x_{l+1} = x_l + projected_l``, the usual residual (needs ``dim == chan``);
    - ``skip="values"``: ``x_{l+1} = projected_l + v_l``, seed 000's skip through V (what
      :class:`Attention` returns);
    - ``skip="none"``: ``x_{l+1} = projected_l``.

    ``skip`` is a plain attribute, so one set of weights can be compared under all three wirings.
    """

    def __init__(self, depth: int, dim: int, chan: int, num_heads: int = 1, skip: str = "identity") -> None:
        super().__init__()
        _check_positive_int("depth", depth)
        self.dim = _check_positive_int("dim", dim)
        self.chan = _check_positive_int("chan", chan)
        self.skip = _check_skip(skip)
        self.layers = nn.ModuleList(
            Attention(dim if i == 0 else chan, chan, num_heads) for i in range(depth)
        )

    @property
    def depth(self) -> int:
        return len(self.layers)

    def forward(self, x: Tensor, *, depth: int | None = None, return_hidden: bool = False):
        """``x (B, N, dim) -> (B, N, chan)`` through the first ``depth`` layers (default: all).

        With ``return_hidden`` also the list ``[x_0, x_1, ..., x_depth]`` of hidden states.
        """
        x = _check_tensor("x", x, ndim=3)
        skip = _check_skip(self.skip)
        depth = self.depth if depth is None else _check_positive_int("depth", depth)
        if depth > self.depth:
            raise ValueError(f"depth={depth} is more than the stack's {self.depth} layers")
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {_shape(x)} (last dimension {x.shape[-1]})")
        if skip == "identity" and self.dim != self.chan:
            raise ValueError(
                f"skip='identity' adds x to the attention output, so x must be as wide as the output: "
                f"x has shape {_shape(x)} (dim={self.dim}) but the output has chan={self.chan} features; "
                f"use dim == chan, or skip='values' or skip='none'"
            )
        hidden = [x]
        for layer in self.layers[:depth]:
            out, inter = layer(x, return_intermediates=True)  # each (B, N, chan)
            if skip == "identity":
                x = x + inter["projected"]  # (B, N, chan)
            elif skip == "values":
                x = out  # projected + merged v, (B, N, chan)
            else:
                x = inter["projected"]  # (B, N, chan)
            hidden.append(x)
        return (x, hidden) if return_hidden else x

    def extra_repr(self) -> str:
        return f"skip={self.skip!r}"


def signal_through_stack(stack: AttentionStack, x: Tensor, *, depth: int | None = None) -> dict[str, Tensor]:
    """How big the signal and the gradient are at every layer of ``stack`` for the input ``x (B, N, dim)``.

    Runs the first ``depth`` layers (default: all) and returns

    - ``"rms"``: ``(depth + 1,)`` the root mean square of ``x_0`` (the input), ``x_1``, ..., ``x_depth``;
    - ``"spread"``: ``(depth + 1,)`` how different the tokens are: the standard deviation over the
      token axis, averaged over batch and features; 0 when every token carries the same vector (a
      spread below ``1e-12`` times the RMS is rounding noise and reported as exactly 0);
    - ``"grad_norm"``: ``(depth,)`` the norm of the gradient of the loss ``||x_depth||`` with respect to
      all parameters of layer ``l`` (``l = 0`` is the first layer). The loss's gradient at the output,
      ``x_depth / ||x_depth||``, has norm 1 whatever the depth, so the numbers compare across depths.

    Gradients are returned, not accumulated: the parameters' ``.grad`` are left untouched.
    """
    if not isinstance(stack, AttentionStack):
        raise TypeError(f"stack must be an attn_helpers.AttentionStack, got {type(stack).__name__}")
    with torch.enable_grad(), _one_thread():
        out, hidden = stack(x, depth=depth, return_hidden=True)
        layers = stack.layers[: len(hidden) - 1]
        params = [list(layer.parameters()) for layer in layers]
        grads = torch.autograd.grad(out.norm(), [p for group in params for p in group])
    rms = torch.stack([h.detach().pow(2).mean().sqrt() for h in hidden])  # (depth + 1,)
    spread = torch.stack([h.detach().std(dim=1).mean() for h in hidden])  # (depth + 1,)
    spread = spread.masked_fill(spread < 1e-12 * rms, 0.0)  # below rounding noise: the tokens are equal
    norms, start = [], 0
    for group in params:
        chunk = grads[start:start + len(group)]
        start += len(group)
        norms.append(torch.sqrt(sum(g.pow(2).sum() for g in chunk)))
    return {"rms": rms, "spread": spread, "grad_norm": torch.stack(norms)}  # (depth + 1,) x 2, (depth,)


def depth_sweep(stack: AttentionStack, x: Tensor, depths: Sequence[int]) -> dict[str, Tensor]:
    """The output's size and the first layer's gradient for several depths of ``stack``, at once.

    For every ``L`` in ``depths`` (each in ``[1, stack.depth]``), with ``x (B, N, dim)`` as input and
    the first ``L`` layers: ``"rms"`` and ``"spread"`` of ``x_L`` and ``"grad_norm"``, the norm of the
    gradient of ``||x_L||`` with respect to the first layer's parameters; each ``(len(depths),)``.
    The same numbers as :func:`signal_through_stack` at each depth, from one forward pass.
    """
    if not isinstance(stack, AttentionStack):
        raise TypeError(f"stack must be an attn_helpers.AttentionStack, got {type(stack).__name__}")
    depths = [_check_positive_int("depths[i]", int(L)) for L in depths]
    if not depths:
        raise ValueError("depths must name at least one depth, got none")
    if max(depths) > stack.depth:
        raise ValueError(f"depths {depths} go beyond the stack's {stack.depth} layers")
    first = list(stack.layers[0].parameters())
    with torch.enable_grad(), _one_thread():
        _, hidden = stack(x, depth=max(depths), return_hidden=True)  # hidden[L]: (B, N, chan)
        grads = []
        for L in depths:
            g = torch.autograd.grad(hidden[L].norm(), first, retain_graph=True)
            grads.append(torch.sqrt(sum(t.pow(2).sum() for t in g)))
    rms = torch.stack([hidden[L].detach().pow(2).mean().sqrt() for L in depths])  # (len(depths),)
    spread = torch.stack([hidden[L].detach().std(dim=1).mean() for L in depths])  # (len(depths),)
    spread = spread.masked_fill(spread < 1e-12 * rms, 0.0)  # below rounding noise: the tokens are equal
    return {"rms": rms, "spread": spread, "grad_norm": torch.stack(grads)}
