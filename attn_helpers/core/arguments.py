"""Input checks for the helpers: every message names the argument, what was expected and what was received.

Imports torch only. The math modules call these first, so their own bodies read like the formula.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["shape_of", "check_tensor", "check_positive_int", "check_heads", "broadcast_shape", "check_mask",
           "check_qkv"]


def shape_of(t: Tensor) -> list[int]:
    return list(t.shape)


def check_tensor(name: str, t: object, *, min_ndim: int = 1, ndim: int | None = None) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float32 or float64), got dtype {t.dtype} "
            f"with shape {shape_of(t)}; convert it with {name}.float()"
        )
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {shape_of(t)} ({t.ndim} dimensions)")
    if t.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {shape_of(t)} ({t.ndim} dimensions)"
        )
    return t


def check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def check_heads(chan: int, num_heads: int, chan_name: str = "chan", where: str = "") -> int:
    check_positive_int("num_heads", num_heads)
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


def check_mask(mask: object, scores_shape: torch.Size) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"mask must be boolean (True = may attend) or floating (added to the scores), got dtype "
            f"{mask.dtype} with shape {shape_of(mask)}; for 0/1 integers use mask.bool()"
        )
    if broadcast_shape(mask.shape, scores_shape) != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {shape_of(mask)} cannot broadcast to the scores' shape {list(scores_shape)} "
            f"(..., N_q, N_k); a key-padding mask for (B, H, N_q, N_k) scores has shape (B, 1, 1, N_k)"
        )
    return mask


def check_qkv(q: object, k: object, v: object) -> tuple[Tensor, Tensor, Tensor]:
    q = check_tensor("q", q, min_ndim=2)
    k = check_tensor("k", k, min_ndim=2)
    v = check_tensor("v", v, min_ndim=2)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k (last dimension) to be dot-multiplied: "
            f"q has shape {shape_of(q)} (d_k={q.shape[-1]}), k has shape {shape_of(k)} (d_k={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of tokens N_k (second-to-last dimension), one value per key: "
            f"k has shape {shape_of(k)} (N_k={k.shape[-2]}), v has shape {shape_of(v)} (N_k={v.shape[-2]})"
        )
    if broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2]) is None:
        raise ValueError(
            f"the batch dimensions of q {shape_of(q)}, k {shape_of(k)} and v {shape_of(v)} do not broadcast "
            "(everything before the last two dimensions must match or be 1)"
        )
    return q, k, v
