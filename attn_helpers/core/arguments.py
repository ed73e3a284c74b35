"""Input checks for the helpers: every message names the argument, what was expected and what was received.

Imports torch only. The math modules call these first, so their own bodies read like the formula.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["shape_of", "check_tensor", "check_positive_int", "check_heads", "broadcast_shape", "check_mask",
           "check_qk", "check_qkv", "check_tokens", "check_token_ids", "check_query_key_value", "check_kv_heads", "check_probability"]


def shape_of(t: Tensor) -> list[int]:
    """``t.shape`` as a list, the way the messages print shapes: ``[2, 5, 8]``."""
    return list(t.shape)


def check_tensor(name: str, t: object, *, min_ndim: int = 1, ndim: int | None = None) -> Tensor:
    """``t`` checked to be a floating-point tensor with ``ndim`` (or at least ``min_ndim``) dimensions."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (float32 or float64), got dtype {t.dtype} "
                        f"with shape {shape_of(t)}; convert it with {name}.float()")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {shape_of(t)} ({t.ndim} dimensions)")
    if t.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {shape_of(t)} ({t.ndim} dimensions)"
        )
    return t


def check_positive_int(name: str, value: object) -> int:
    """``value`` checked to be an int of at least 1 (``True`` is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def check_heads(chan: int, num_heads: int, chan_name: str = "chan", where: str = "", most: int | None = None) -> int:
    """``head_dim = chan // num_heads``, or the package's one "is not divisible by num_heads" error, naming the width
    ``chan_name`` (``"d_model"``) followed by ``where`` (``" (x has shape [2, 5, 10])"``) and suggesting head counts
    up to ``most`` (an explorer's slider end; ``None``: ``chan``)."""
    check_positive_int("num_heads", num_heads)
    if chan % num_heads != 0:
        raise ValueError(f"{chan_name}={chan}{where} is not divisible by num_heads={num_heads}: each head gets "
                         f"{chan_name} / num_heads = {chan / num_heads:g} features, which must be a whole number "
                         f"(try num_heads in {[h for h in range(1, min(chan, most or chan) + 1) if chan % h == 0]})")
    return chan // num_heads


def broadcast_shape(*shapes: tuple[int, ...] | torch.Size) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to under PyTorch's rules, or ``None``. Plain Python on purpose:
    ``torch.broadcast_shapes`` imports sympy on its first call, which costs seconds at the start of every notebook."""
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def check_mask(mask: object, scores_shape: torch.Size) -> Tensor:
    """``mask`` checked to be boolean (True = may attend) or floating, broadcastable to ``scores_shape``."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"mask must be boolean (True = may attend) or floating (added to the scores), got dtype "
                        f"{mask.dtype} with shape {shape_of(mask)}; for 0/1 integers use mask.bool()")
    if broadcast_shape(mask.shape, scores_shape) != tuple(scores_shape):
        raise ValueError(f"mask of shape {shape_of(mask)} cannot broadcast to the scores' shape {list(scores_shape)} "
                         f"(..., N_q, N_k); a key-padding mask for (B, H, N_q, N_k) scores has shape (B, 1, 1, N_k)")
    return mask


def check_qk(q: object, k: object) -> tuple[Tensor, Tensor]:
    """``q (..., N_q, d_k)`` and ``k (..., N_k, d_k)`` checked to be dot-multiplied (the one check of q and k)."""
    q = check_tensor("q", q, min_ndim=2)
    k = check_tensor("k", k, min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k (last dimension) to be dot-multiplied: "
            f"q has shape {shape_of(q)} (d_k={q.shape[-1]}), k has shape {shape_of(k)} (d_k={k.shape[-1]})"
        )
    return q, k


def check_qkv(q: object, k: object, v: object) -> tuple[Tensor, Tensor, Tensor]:
    """``q (..., N_q, d_k)``, ``k (..., N_k, d_k)``, ``v (..., N_k, d_v)`` checked to fit one attention."""
    q, k = check_qk(q, k)
    v = check_tensor("v", v, min_ndim=2)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
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


def check_tokens(name: str, x: object, width: int, width_name: str) -> Tensor:
    """``x`` checked to be ``(B, N, width)``; the error names ``name``, ``width_name`` and the shape received."""
    x = check_tensor(name, x, ndim=3)
    if x.shape[-1] != width:
        raise ValueError(f"{name} must have shape (B, N, {width_name}={width}), got {shape_of(x)} "
                         f"(last dimension {x.shape[-1]})")
    return x


def check_token_ids(name: str, tokens: object, vocab_size: int | None = None) -> Tensor:
    """Lessons 08, 09, 14: ``tokens`` checked to be integer ids ``(B, N)``, each in ``[0, vocab_size)`` when given."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integer ids (B, N), got {type(tokens).__name__}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids, got dtype {tokens.dtype} with shape {shape_of(tokens)}")
    if tokens.ndim != 2:
        raise ValueError(f"{name} must have shape (B, N), got shape {shape_of(tokens)}")
    if vocab_size is not None and tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"{name} must be ids in [0, {vocab_size}), got values from {tokens.min().item()} to "
                         f"{tokens.max().item()} (shape {shape_of(tokens)})")
    return tokens


def check_query_key_value(query: object, key: object, value: object, d_model: int, kdim: int,
                          vdim: int) -> tuple[Tensor, Tensor, Tensor]:
    """The inputs of a cross-attention layer: ``query (B, N_q, d_model)``, ``key (B, N_k, kdim)``,
    ``value (B, N_k, vdim)``; ``key`` defaults to ``query`` and ``value`` to ``key`` (self-attention)."""
    key = query if key is None else key
    value = key if value is None else value
    query = check_tokens("query", query, d_model, "d_model")
    key = check_tokens("key", key, kdim, "kdim")
    value = check_tokens("value", value, vdim, "vdim")
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(f"key and value must have the same batch size and number of tokens N_k: key has shape "
                         f"{shape_of(key)}, value has shape {shape_of(value)}")
    if query.shape[0] != key.shape[0]:
        raise ValueError(f"query and key must have the same batch size: query {shape_of(query)}, key {shape_of(key)}")
    return query, key, value


def check_kv_heads(num_heads: int, num_kv_heads: int, where: str = "") -> int:
    """The number of query heads per key/value head, ``num_heads // num_kv_heads``, when it is whole."""
    check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_heads={num_heads} query heads cannot be shared out evenly over {num_kv_heads} key/value "
            f"heads{where}: {num_heads} / {num_kv_heads} = {num_heads / num_kv_heads:g} query heads per group "
            f"(try {[g for g in range(1, num_heads + 1) if num_heads % g == 0]} key/value heads)"
        )
    return num_heads // num_kv_heads


def check_probability(name: str, p: object) -> float:
    """``p`` as a float in ``[0, 1)`` (a dropout probability)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= float(p) < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {p}")
    return float(p)
