"""The attention formula, ``softmax(q @ k^T * scale + mask) @ v``, one step a line (lessons 02-04), its heads
(05) and two steps of today's models (12). Masks follow :mod:`.masks`: boolean ``True`` = may attend, or floating =
added to the scores.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from .arguments import (broadcast_shape, check_heads, check_mask, check_probability, check_qk, check_qkv, check_tensor,
                        shape_of)
from .masks import apply_mask

__all__ = ["attention_scores", "attend", "scaled_dot_product_attention", "split_heads", "merge_heads",
           "softcap_scores", "softmax_with_sinks"]


def attention_scores(q: Tensor, k: Tensor, *, scale: float | None = None) -> Tensor:
    """Lessons 07 and 11: ``q @ k^T * scale``, ``(..., N_q, d_k), (..., N_k, d_k) -> (..., N_q, N_k)``; ``scale=None`` means
    ``d_k ** -0.5``, any number (``0.0`` included) is used as given."""
    q, k = check_qk(q, k)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return (q @ k.transpose(-2, -1)) * scale  # (..., N_q, N_k)


def attend(
    q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | None = None, scale: float | None = None, dropout_p: float = 0.0,
    softcap: float | None = None, sinks: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Lessons 03a, 07 and 12: ``(out, scores, weights)`` of ``q (..., N_q, d_k)``, ``k (..., N_k, d_k)``, ``v (..., N_k, d_v)``:
    ``out (..., N_q, d_v)``, ``scores`` (scaled, capped, masked) and ``weights`` (rows sum to one), ``(..., N_q, N_k)``.

    ``mask``: boolean (``True`` = may attend) or floating (added), broadcastable to ``(..., N_q, N_k)``. A row whose
    keys are all blocked gets zero weights, never NaN. ``dropout_p`` drops weights as PyTorch's SDPA does. Lesson 12:
    ``softcap`` (Gemma 2, :func:`softcap_scores`) and ``sinks (H,)`` (gpt-oss, :func:`softmax_with_sinks`).
    """
    q, k, v = check_qkv(q, k, v)
    dropout_p = check_probability("dropout_p", dropout_p)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., N_q, N_k)
    if softcap is not None:
        scores = softcap_scores(scores, softcap)  # (..., N_q, N_k): squashed into (-softcap, softcap)
    if mask is not None:
        scores = apply_mask(scores, check_mask(mask, scores.shape))  # (..., N_q, N_k)
    # A row whose every key is blocked has only -inf scores; softmax would give NaN (0/0). Its weights are zeros.
    dead_rows = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., N_q, 1)
    live = scores.masked_fill(dead_rows, 0.0)  # (..., N_q, N_k)
    weights = torch.softmax(live, dim=-1) if sinks is None else softmax_with_sinks(live, sinks)  # (..., N_q, N_k)
    del live  # gone before the next (..., N_q, N_k) tensor is made: at most three are alive at once (lesson 09)
    weights = weights.masked_fill(dead_rows, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = weights @ v  # (..., N_q, d_v)
    return out, scores, weights


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *,
                                 scale: float | None = None, dropout_p: float = 0.0, return_weights: bool = False,
                                 softcap: float | None = None,
                                 sinks: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """Lesson 04: :func:`attend`'s ``out`` ``(..., N_q, d_v)`` under PyTorch's name, ``softmax(q @ k^T * scale + mask)
    @ v``; ``return_weights=True`` also returns the weights ``(..., N_q, N_k)``."""
    out, _, weights = attend(q, k, v, mask=mask, scale=scale, dropout_p=dropout_p, softcap=softcap, sinks=sinks)
    return (out, weights) if return_weights else out


# --- Heads (lesson 05): cut the feature axis into H heads and glue them back ---

def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Lesson 05: ``(..., N, chan) -> (..., H, N, chan // H)``; head ``h`` gets features ``h*head_dim:(h+1)*head_dim``."""
    x = check_tensor("x", x, min_ndim=2)
    head_dim = check_heads(x.shape[-1], num_heads, chan_name="x.shape[-1]", where=f" (x has shape {shape_of(x)})")
    x = x.reshape(*x.shape[:-1], num_heads, head_dim)  # (..., N, H, head_dim)
    return x.transpose(-3, -2)  # (..., H, N, head_dim)


def merge_heads(x: Tensor) -> Tensor:
    """Lesson 05: ``(..., H, N, head_dim) -> (..., N, H * head_dim)``, the inverse of :func:`split_heads`."""
    x = check_tensor("x", x, min_ndim=3)
    x = x.transpose(-3, -2)  # (..., N, H, head_dim)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., N, chan)


# --- Two steps of today's models (lesson 12), used by attend ---

def softcap_scores(scores: Tensor, cap: float) -> Tensor:
    """Lesson 12: Gemma 2's soft-capping, ``cap * tanh(scores / cap)``: scores squashed into ``(-cap, cap)``."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0:
        raise ValueError(f"softcap must be a number greater than 0, got {cap!r}")
    return cap * torch.tanh(scores / cap)  # (..., N_q, N_k)


def softmax_with_sinks(scores: Tensor, sinks: Tensor) -> Tensor:
    """Lesson 12: gpt-oss's softmax with one more logit per head, a *sink*, whose weight is dropped:
    ``scores (..., H, N_q, N_k)``, ``sinks (H,)`` -> ``exp(scores) / (exp(sinks[h]) + Σ_j exp(scores))``, same shape."""
    if not isinstance(sinks, Tensor) or not sinks.is_floating_point() or sinks.ndim not in (1, 2):
        raise TypeError(f"sinks must be a floating tensor of one logit per head, shape (H,), got "
                        f"{getattr(sinks, 'dtype', type(sinks).__name__)} {list(getattr(sinks, 'shape', []))}")
    rows = sinks[:, None] if sinks.ndim == 1 else sinks  # (H, 1), or (H, N_q): one per head and query row
    if scores.ndim < 3 or broadcast_shape(rows.shape, scores.shape[:-1]) != tuple(scores.shape[:-1]):
        raise ValueError(f"sinks of shape {shape_of(sinks)} must give one logit per head of the scores (..., H, N_q, "
                         f"N_k), got scores of shape {shape_of(scores)}")
    sink = rows.to(scores.dtype)[..., None].expand(*scores.shape[:-1], 1)  # (..., H, N_q, 1)
    return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]  # (..., H, N_q, N_k): sink dropped
