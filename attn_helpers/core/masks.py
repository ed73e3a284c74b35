"""Masks: which keys each query may attend to.

One convention everywhere in this package, the one of ``torch.nn.functional.scaled_dot_product_attention``:
a boolean mask is ``True`` where a query *may attend* to a key; a floating mask is *added* to the scores
(``0`` keeps, ``-inf`` blocks). The other common convention, ``True`` = blocked (``Tensor.masked_fill`` and
``torch.nn.MultiheadAttention``'s ``attn_mask`` / ``key_padding_mask``), is converted explicitly with
:func:`blocked_to_keep` or ``mask_to_additive(mask, invert=True)``; it is never guessed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .arguments import check_positive_int, shape_of

__all__ = ["causal_mask", "sliding_window_mask", "padding_mask", "blocked_to_keep", "mask_to_additive", "apply_mask", "mask_for_heads"]


def causal_mask(n_q: int, n_k: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal mask, ``True`` where query ``i`` may attend to key ``j`` (``j <= i``).

    Shape ``(n_q, n_k)`` (``n_k`` defaults to ``n_q``). Aligned at the top-left corner, like
    ``scaled_dot_product_attention(..., is_causal=True)`` in PyTorch.
    """
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def sliding_window_mask(n_q: int, n_k: int | None = None, *, window: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Boolean sliding-window mask (lesson 12), ``True`` where query ``i`` may attend to key ``j``:
    ``j <= i`` and ``j > i - window``, the key of the query's own position and the ``window - 1`` before it.

    Shape ``(n_q, n_k)`` (``n_k`` defaults to ``n_q``), aligned at the top-left corner like :func:`causal_mask`;
    a ``window`` of ``n_q`` or more gives the causal mask. The rule of Mistral's and Gemma 2's local layers
    (``transformers.masking_utils.sliding_window_causal_mask_function``).
    """
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int of at least 1 (the number of keys a query may see, its own "
                         f"included), got {window!r} for a ({n_q}, {n_k}) mask")
    i = torch.arange(n_q, device=device)[:, None]  # (n_q, 1): query positions
    j = torch.arange(n_k, device=device)[None, :]  # (1, n_k): key positions
    return (j <= i) & (j > i - window)  # (n_q, n_k)


def padding_mask(lengths: Tensor | list[int], n: int) -> Tensor:
    """Boolean key-padding mask from sequence lengths, ``True`` for real (non-padding) keys.

    ``lengths``: ``(B,)`` integers in ``[0, n]``. Returns shape ``(B, 1, n)``, which broadcasts over
    the query rows of ``(B, N_q, n)`` scores; the layers give it a head axis themselves
    (:func:`mask_for_heads`).
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
        raise TypeError(f"mask must be a boolean tensor, got {getattr(mask, 'dtype', type(mask).__name__)}; "
                        "an additive mask is already in the form this function returns")
    keep = ~mask if invert else mask
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~keep, float("-inf"))


def apply_mask(scores: Tensor, mask: Tensor) -> Tensor:
    """``scores`` with ``mask`` applied: ``-inf`` where a boolean mask is ``False``, else the mask added.

    ``scores (..., N_q, N_k)``, ``mask`` broadcastable to it (already checked) -> ``(..., N_q, N_k)``.
    A float32 mask also serves float64 scores and vice versa.
    """
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.to(scores.dtype)


def mask_for_heads(mask: Tensor | None) -> Tensor | None:
    """Give a 3-D ``(B, N_q, N_k)`` mask a head axis, ``(B, 1, N_q, N_k)``, so it broadcasts over
    ``(B, H, N_q, N_k)`` scores; ``(N_q, N_k)``, 4-D masks and ``None`` are returned as they are."""
    if isinstance(mask, Tensor) and mask.ndim == 3:
        return mask[:, None]  # (B, 1, N_q, N_k)
    return mask
