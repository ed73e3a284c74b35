"""Heads: cut the feature axis into ``H`` heads and glue them back; share key/value heads between query heads.

``chan = H * head_dim``; query head ``h`` of grouped-query attention uses key/value head ``h // (H // G)``.
"""

from __future__ import annotations

from torch import Tensor

from .arguments import check_heads, check_kv_heads, check_positive_int, check_tensor, shape_of

__all__ = ["split_heads", "merge_heads", "repeat_kv_heads"]


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


def repeat_kv_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., G, N, d) -> (..., num_heads, N, d)``: each key/value head repeated for its group.

    Query head ``h`` uses key/value head ``h // (num_heads // G)``, so the copies of a head sit
    next to each other (``repeat_interleave`` on the heads axis, not ``repeat``, which would tile).
    """
    x = check_tensor("x", x, min_ndim=3)
    check_positive_int("num_heads", num_heads)
    per_group = check_kv_heads(num_heads, x.shape[-3], f" (x has shape {shape_of(x)}, heads on axis -3)")
    return x.repeat_interleave(per_group, dim=-3)  # (..., H, N, d)
