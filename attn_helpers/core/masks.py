"""Masks (lessons 03, 03a, 12): which keys each query may attend to.

One convention, that of ``torch.nn.functional.scaled_dot_product_attention``: a boolean mask is ``True`` where a
query *may attend*; a floating mask is *added* to the scores. ``True`` = blocked (``masked_fill``,
``nn.MultiheadAttention``) is converted explicitly (:func:`blocked_to_keep`, ``mask_to_additive(invert=True)``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .arguments import check_positive_int, shape_of

__all__ = ["causal_mask", "sliding_window_mask", "padding_mask", "blocked_to_keep", "mask_to_additive", "apply_mask", "mask_for_heads"]


def causal_mask(n_q: int, n_k: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Lesson 03: ``(n_q, n_k)``, ``True`` where query ``i`` may attend to key ``j <= i`` (top-left aligned, as
    PyTorch's ``is_causal=True``)."""
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def sliding_window_mask(n_q: int, n_k: int | None = None, *, window: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Lesson 12: ``(n_q, n_k)``, ``True`` where ``i - window < j <= i`` (Mistral's and Gemma 2's local layers,
    ``transformers.masking_utils.sliding_window_causal_mask_function``)."""
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int of at least 1 (the number of keys a query may see, its own "
                         f"included), got {window!r} for a ({n_q}, {n_k}) mask")
    i = torch.arange(n_q, device=device)[:, None]  # (n_q, 1): query positions
    j = torch.arange(n_k, device=device)[None, :]  # (1, n_k): key positions
    return (j <= i) & (j > i - window)  # (n_q, n_k)


def padding_mask(lengths: Tensor | list[int], n: int) -> Tensor:
    """Lesson 03: ``lengths (B,)`` -> ``(B, 1, n)``, ``True`` for real keys, broadcasting over the query rows."""
    check_positive_int("n", n)
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got dtype {lengths.dtype} shape {shape_of(lengths)}")
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"lengths must lie in [0, n={n}], got {lengths.tolist()}")
    positions = torch.arange(n, device=lengths.device)  # (n,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, n)


def blocked_to_keep(mask: Tensor) -> Tensor:
    """Lesson 03a: a "True = blocked" mask (``masked_fill``, ``nn.MultiheadAttention``) as "True = may attend"."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")
    return ~mask


def mask_to_additive(mask: Tensor, *, invert: bool = False, dtype: torch.dtype = torch.float32) -> Tensor:
    """Lesson 03a: ``0.0`` where attending is allowed, ``-inf`` where not; ``invert=True`` reads ``True`` as blocked."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor, got {getattr(mask, 'dtype', type(mask).__name__)}; "
                        "an additive mask is already in the form this function returns")
    keep = ~mask if invert else mask
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~keep, float("-inf"))


def apply_mask(scores: Tensor, mask: Tensor) -> Tensor:
    """Lesson 03: ``-inf`` where a boolean ``mask`` is ``False``, or a floating mask added; ``(..., N_q, N_k)``."""
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.to(scores.dtype)


def mask_for_heads(mask: Tensor | None) -> Tensor | None:
    """Lesson 05: a ``(B, N_q, N_k)`` mask as ``(B, 1, N_q, N_k)``, to broadcast over the heads; others unchanged."""
    if isinstance(mask, Tensor) and mask.ndim == 3:
        return mask[:, None]  # (B, 1, N_q, N_k)
    return mask
