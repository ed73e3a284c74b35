"""Positions (lesson 10): attention is order-blind, and three ways to tell it where tokens sit; ALiBi (lesson 12).

Rotary pairing: ``pairing="half"`` (the default) pairs feature ``i`` with ``i + head_dim/2`` (``transformers``' Llama
``rotate_half``, GPT-NeoX); ``"interleaved"`` pairs ``2i`` with ``2i + 1`` (the RoFormer paper, GPT-J). The two give
different numbers for the same weights. Pair ``i`` turns by ``θ_i = base ** (-2i / head_dim)`` per position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .arguments import broadcast_shape, check_positive_int, check_tensor, shape_of
from .layers import Attention, Intermediates

__all__ = ["permute_tokens", "equivariance_gap", "LearnedPositions", "sinusoidal_encoding", "PAIRINGS", "DEFAULT_BASE",
           "rope_frequencies", "apply_rope", "rope_pair_scores", "RotaryAttention", "alibi_slopes", "alibi_bias"]

PAIRINGS = ("half", "interleaved")
DEFAULT_BASE = 10_000.0


# --- Input checks: every message names the argument and the shapes ---

def _check_even(name: str, size: int, where: str) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 2 or size % 2:
        raise ValueError(f"{name} must be an even number of at least 2 (features are rotated in pairs), "
                         f"got {size!r}{where}")
    return size


def _check_base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    return float(base)


def check_rope_settings(head_dim: int, base: object, pairing: object, where: str = "") -> tuple[float, str]:
    """``(base, pairing)`` of a rotary layer, checked with its ``head_dim`` (even: features turn in pairs)."""
    _check_even("head_dim", head_dim, where)
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {list(PAIRINGS)}, got {pairing!r}")
    return _check_base(base), pairing


def _check_positions(positions: object, rows: torch.Size, device: torch.device) -> Tensor:
    """``positions`` as an int64 tensor broadcastable to ``rows`` = ``x.shape[:-1]`` (one per row)."""
    if not isinstance(positions, Tensor):
        try:
            positions = torch.as_tensor(positions)
        except Exception as problem:
            raise TypeError(f"positions must be a tensor or a list of ints, got {type(positions).__name__}") from problem
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must hold integers (token indices 0, 1, 2, ...), got dtype {positions.dtype}")
    if positions.ndim == 0:
        raise ValueError("positions must give one position per row: shape (N,) or (..., N), got a single number")
    n = rows[-1]
    if positions.shape[-1] != n:
        raise ValueError(f"positions must give one position per row of x: x has N={n} rows (x.shape[:-1] = "
                         f"{list(rows)}), positions has shape {shape_of(positions)}")
    if broadcast_shape(positions.shape, rows) != tuple(rows):
        raise ValueError(f"positions of shape {shape_of(positions)} do not broadcast to x's rows {list(rows)}; for "
                         f"x (B, H, N, head_dim) pass (N,) or (B, 1, N), e.g. positions[:, None]")
    if positions.numel() and int(positions.min()) < 0:
        raise ValueError(f"positions must be token indices >= 0, got a smallest position of {int(positions.min())}")
    return positions.to(device=device, dtype=torch.int64)


# --- Order-blindness: permutation equivariance ---

def permute_tokens(x: Tensor, perm: Tensor | Sequence[int]) -> Tensor:
    """Lesson 10: ``out[:, i] = x[:, perm[i]]``, ``(B, N, ...)``, for a permutation ``perm`` of ``0 .. N-1``."""
    if not isinstance(x, Tensor) or x.ndim < 2:
        raise ValueError(f"x must be a tensor (B, N, ...), got {getattr(x, 'shape', type(x).__name__)}")
    perm = torch.as_tensor(perm)
    n = x.shape[1]
    if perm.ndim != 1 or perm.is_floating_point() or not torch.equal(perm.sort().values, torch.arange(n)):
        raise ValueError(f"perm must be a permutation of 0..{n - 1} (x has N={n} tokens, shape {shape_of(x)}), "
                         f"got {perm.tolist()}")
    return x[:, perm]  # (B, N, ...)


def equivariance_gap(layer: Callable[[Tensor], Tensor], x: Tensor, perm: Tensor | Sequence[int]) -> float:
    """Lesson 10: ``max |layer(x[:, perm]) - layer(x)[:, perm]|`` for ``layer: (B, N, dim) -> (B, N, chan)``; zero up
    to rounding means the layer cannot tell the order. Runs without gradients."""
    x = check_tensor("x", x, min_ndim=3)
    with torch.no_grad():
        shuffled_then_layer = layer(permute_tokens(x, perm))  # (B, N, chan)
        layer_then_shuffled = permute_tokens(layer(x), perm)  # (B, N, chan)
    return float((shuffled_then_layer - layer_then_shuffled).abs().max())


# --- Absolute positions: learned and sinusoidal ---

class LearnedPositions(nn.Embedding):
    """Lesson 10: one trained vector per position, ``(num_positions, dim)``; ``forward(positions (...,))`` ->
    ``(..., dim)``, ``forward(n)`` -> the first ``n`` rows. A position beyond the table has no row: an error says so."""

    def __init__(self, num_positions: int, dim: int) -> None:
        super().__init__(check_positive_int("num_positions", num_positions), check_positive_int("dim", dim))

    def forward(self, positions: Tensor | int) -> Tensor:
        if isinstance(positions, int) and not isinstance(positions, bool):
            if positions > self.num_embeddings:
                raise IndexError(f"no row for positions {self.num_embeddings}..{positions - 1}: this table has "
                                 f"{self.num_embeddings} rows, for positions 0..{self.num_embeddings - 1}")
            return self.weight[:positions]  # (n, dim)
        if not isinstance(positions, Tensor) or positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be an int or an integer tensor, got {type(positions).__name__}")
        outside = positions[(positions >= self.num_embeddings) | (positions < 0)].unique().tolist()  # sorted
        if outside:
            named = ", ".join(map(str, outside[:4])) + (", ..." if len(outside) > 4 else "")
            raise IndexError(f"no row for position{'s' if len(outside) > 1 else ''} {named}: this table has "
                             f"{self.num_embeddings} rows, for positions 0..{self.num_embeddings - 1} (positions has "
                             f"shape {shape_of(positions)})")
        return super().forward(positions)  # (..., dim)

    def extra_repr(self) -> str:
        return f"num_positions={self.num_embeddings}, dim={self.embedding_dim}"


def sinusoidal_encoding(num_positions: int, dim: int, *, base: float = DEFAULT_BASE,
                        dtype: torch.dtype = torch.float32) -> Tensor:
    """Lesson 10: the Transformer paper's ``(num_positions, dim)`` table, ``PE[p, 2i] = sin(p · ω_i)``,
    ``PE[p, 2i + 1] = cos(p · ω_i)``, ``ω_i = base ** (-2i / dim)``."""
    check_positive_int("num_positions", num_positions)
    _check_even("dim", dim, " (sines and cosines come in pairs)")
    omega = rope_frequencies(dim, base=base)  # (dim/2,), the same frequencies as RoPE's
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * omega  # (num_positions, dim/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # (num_positions, dim): sin, cos, sin, ...
    return table.to(dtype)


# --- Rotary embeddings ---

def rope_frequencies(head_dim: int, *, base: float = DEFAULT_BASE) -> Tensor:
    """Lesson 10: ``θ_i = base ** (-2i / head_dim)``, ``(head_dim // 2,)`` float64 (``transformers``' Llama
    ``inv_freq``): pair 0 turns 1 radian per position, the last pair the slowest."""
    _check_even("head_dim", head_dim, "")
    base = _check_base(base)
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (head_dim/2,)


def apply_rope(x: Tensor, positions: Tensor | Sequence[int], *, base: float = DEFAULT_BASE,
               pairing: str = "half") -> Tensor:
    """Lesson 10: each pair ``(a, b)`` of ``x (..., N, head_dim)`` becomes ``(a cos φ - b sin φ, a sin φ + b cos φ)``,
    ``φ = position · θ_i``; ``positions (N,)`` or any shape ending in ``N`` that broadcasts to ``x.shape[:-1]``."""
    x = check_tensor("x", x, min_ndim=2)
    head_dim = _check_even("head_dim", x.shape[-1], f" (the last dimension of x, shape {shape_of(x)})")
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {list(PAIRINGS)}, got {pairing!r}")
    positions = _check_positions(positions, x.shape[:-1], x.device)  # (..., N)
    theta = rope_frequencies(head_dim, base=base).to(x.device)  # (head_dim/2,)
    angles = positions[..., None].to(torch.float64) * theta  # (..., N, head_dim/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (..., N, head_dim/2) each
    if pairing == "half":
        a, b = x[..., : head_dim // 2], x[..., head_dim // 2:]  # (..., N, head_dim/2) each: pair i = (a_i, b_i)
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)  # (..., N, head_dim)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., N, head_dim/2) each: pair i = (x_2i, x_2i+1)
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)  # (..., N, head_dim)


def rope_pair_scores(q: Tensor, k: Tensor, offsets: Tensor | Sequence[int], *, base: float = DEFAULT_BASE,
                     pairing: str = "half") -> Tensor:
    """Lesson 10: each pair's term of ``rope(q, m) · rope(k, n)``: ``q, k (head_dim,)``, ``offsets (T,)`` of ``m - n``
    -> ``(T, head_dim // 2)``; the score at an offset is the sum over the last axis."""
    q = check_tensor("q", q, min_ndim=1)
    k = check_tensor("k", k, min_ndim=1)
    if q.ndim != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be single vectors of the same length (head_dim,), got q {shape_of(q)} "
                         f"and k {shape_of(k)}")
    offsets = torch.as_tensor(offsets)
    if offsets.ndim != 1 or offsets.is_floating_point():
        raise ValueError(f"offsets must be a 1-D tensor of integers, got {offsets.dtype} with shape {shape_of(offsets)}")
    shift = int(min(0, int(offsets.min()))) if offsets.numel() else 0  # rotate both so no position is negative
    q_rot = apply_rope(q.expand(len(offsets), -1), offsets - shift, base=base, pairing=pairing)  # (T, head_dim)
    k_rot = apply_rope(k.expand(len(offsets), -1), torch.full_like(offsets, -shift), base=base,
                       pairing=pairing)  # (T, head_dim)
    pairs = (q_rot * k_rot).unflatten(-1, (2, -1) if pairing == "half" else (-1, 2))  # (T, 2, d/2) or (T, d/2, 2)
    return pairs.sum(dim=-2 if pairing == "half" else -1)  # (T, head_dim/2)


# --- The layer with rotary positions ---

class RotaryAttention(Attention):
    """Lesson 10: :class:`Attention` whose :meth:`add_positions` rotates q and k (:func:`apply_rope`) after the head
    split; ``positions (N,)`` default to ``0 .. N-1``."""

    AXES = {**Attention.AXES, "q_rot": "batch H tokens head_dim", "k_rot": "batch H tokens head_dim"}

    def __init__(self, dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False,
                 qk_scale: float | None = None, *, base: float = DEFAULT_BASE, pairing: str = "half", **options) -> None:
        super().__init__(dim, chan, num_heads, qkv_bias=qkv_bias, qk_scale=qk_scale, **options)
        self.base, self.pairing = check_rope_settings(self.head_dim, base, pairing,
                                                      f" (chan={chan} / num_heads={num_heads})")

    def add_positions(self, q: Tensor, k: Tensor, positions: Tensor | None, inter: Intermediates) -> tuple[Tensor, Tensor]:
        """Rotate ``q`` and ``k`` (each ``(B, H, N, head_dim)``) by their tokens' positions; ``v`` stays."""
        positions = torch.arange(q.shape[-2], device=q.device) if positions is None else positions  # (N,)
        q_rot = apply_rope(q, positions, base=self.base, pairing=self.pairing)  # (B, H, N, head_dim)
        k_rot = apply_rope(k, positions, base=self.base, pairing=self.pairing)  # (B, H, N, head_dim)
        inter.update(q_rot=q_rot, k_rot=k_rot)
        return q_rot, k_rot

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rope base={self.base:g}, pairing={self.pairing}"


# --- ALiBi: a bias on the scores instead of positions (lesson 12) ---

def alibi_slopes(num_heads: int) -> Tensor:
    """Lesson 12: ALiBi's slopes (Press et al., 2022, section 3), ``(num_heads,)`` float64: ``2^(-8/H), ..., 2^(-8)``
    for ``H`` a power of two, else those of the power ``p`` below, then ``2^(-4/p), 2^(-12/p), ...`` (Bloom's
    ``_get_alibi_slopes`` in ``transformers``)."""
    check_positive_int("num_heads", num_heads)
    power = 2 ** (num_heads.bit_length() - 1)  # the largest power of two <= num_heads
    slopes = 2.0 ** (-8.0 * torch.arange(1, power + 1, dtype=torch.float64) / power)  # (power,)
    extra = 2.0 ** (-4.0 * torch.arange(1, 2 * power, 2, dtype=torch.float64) / power)  # (power,): odd steps of 2*power
    return torch.cat([slopes, extra[: num_heads - power]])  # (num_heads,)


def alibi_bias(num_heads: int, n_q: int, n_k: int | None = None) -> Tensor:
    """Lesson 12: ALiBi's bias ``-slope_h * (i - j)``, ``(H, n_q, n_k)`` float64, added to the scores (with a
    causal mask: keys to the right get a positive bias, which the mask removes)."""
    check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    back = torch.arange(n_k, dtype=torch.float64) - torch.arange(n_q, dtype=torch.float64)[:, None]  # (n_q, n_k): j - i
    return alibi_slopes(num_heads)[:, None, None] * back  # (H, n_q, n_k): -slope * (i - j)
