"""Linear attention and the gated delta rule (lesson 13): a memory of fixed size, updated once per token.

Linear attention (Katharopoulos et al., 2020) replaces ``softmax(q kᵀ)`` by ``φ(q) φ(k)ᵀ`` with a positive
feature map ``φ``; then a causal output is ``φ(q_t)ᵀ S_t / φ(q_t)ᵀ z_t`` with ``S_t = Σ_{j<=t} φ(k_j) v_jᵀ``
(``(d_k, d_v)``) and ``z_t = Σ_{j<=t} φ(k_j)`` (``(d_k,)``): a state of fixed size, however long the sequence.

The delta rule (Schlag et al., 2021) writes only the correction, ``S_t = S_{t-1} + β_t k_t (v_t - S_{t-1}ᵀ k_t)ᵀ``;
Gated DeltaNet (Yang et al., 2025) also lets the state decay, ``S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ``
with ``α_t = exp(log_decay_t)``; the output is ``o_t = S_tᵀ q_t``. :func:`gated_delta_rule` computes it token by
token (:func:`gated_delta_step`), or chunk by chunk (:func:`gated_delta_chunk`: the same numbers; the form
``transformers``' Qwen3-Next uses for long inputs).

Layout: ``(B, H, N, d)`` like the rest of the series; ``log_decay`` and ``beta`` are ``(B, H, N)``.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from .arguments import check_positive_int, check_tensor, shape_of

__all__ = ["elu_feature_map", "linear_attention", "linear_attention_step", "gated_delta_rule", "gated_delta_step", "gated_delta_chunk"]


def elu_feature_map(x: Tensor) -> Tensor:
    """Katharopoulos et al.'s feature map ``φ(x) = elu(x) + 1``: positive, same shape as ``x``."""
    return F.elu(x) + 1


def _check_qkv(q: object, k: object, v: object) -> tuple[Tensor, Tensor, Tensor]:
    """``q, k (B, H, N, d_k)`` and ``v (B, H, N, d_v)``, one dtype, checked with messages naming the shapes."""
    q = check_tensor("q", q, ndim=4)
    k = check_tensor("k", k, ndim=4)
    v = check_tensor("v", v, ndim=4)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape (B, H, N, d_k): q has shape {shape_of(q)}, "
                         f"k has shape {shape_of(k)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must have shape (B, H, N, d_v) with the B, H, N of k: k has shape {shape_of(k)}, "
                         f"v has shape {shape_of(v)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    return q, k, v


def linear_attention(q: Tensor, k: Tensor, v: Tensor, *, recurrent: bool = False) -> Tensor:
    """Causal linear attention with ``φ = elu + 1``: ``q, k (B, H, N, d_k)``, ``v (B, H, N, d_v)`` -> ``(B, H, N, d_v)``.

    ``recurrent=False``: the quadratic form, ``A = tril(φ(q) φ(k)ᵀ)`` ``(B, H, N, N)``, ``o = A v / A 1``.
    ``recurrent=True``: one :func:`linear_attention_step` per token, a ``(d_k, d_v)`` state and a ``(d_k,)``
    normaliser per head; the same outputs up to rounding.
    """
    q, k, v = _check_qkv(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (B, H, N, d_k) each, every entry > 0
    if not recurrent:
        n = q.shape[-2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()  # (N, N): key j <= query i
        a = (phi_q @ phi_k.mT).masked_fill(~keep, 0.0)  # (B, H, N, N): φ(q_i)·φ(k_j), future keys zeroed
        return (a @ v) / a.sum(dim=-1, keepdim=True)  # (B, H, N, d_v): each row a weighted average of values
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d_k, d_v): S_0 = 0
    normalizer = q.new_zeros(*q.shape[:2], q.shape[-1])  # (B, H, d_k): z_0 = 0
    outputs = []
    for t in range(q.shape[-2]):
        o_t, state, normalizer = linear_attention_step(state, normalizer, phi_q[:, :, t], phi_k[:, :, t], v[:, :, t])
        outputs.append(o_t)  # (B, H, d_v): token t's output
    return torch.stack(outputs, dim=-2)  # (B, H, N, d_v)


def linear_attention_step(state: Tensor, normalizer: Tensor, phi_q: Tensor, phi_k: Tensor,
                          v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One token of causal linear attention: returns ``(o_t, state, normalizer)`` after token ``t``.

    ``state (..., d_k, d_v)`` is ``S_{t-1}``, ``normalizer (..., d_k)`` is ``z_{t-1}``; ``phi_q, phi_k (..., d_k)`` are
    the token's query and key *after* the feature map, ``v (..., d_v)`` its value. ``S_t = S_{t-1} + φ(k_t) v_tᵀ``,
    ``z_t = z_{t-1} + φ(k_t)``, ``o_t = φ(q_t)ᵀ S_t / φ(q_t)ᵀ z_t`` ``(..., d_v)``.
    """
    state = check_tensor("state", state, min_ndim=2)
    for name, t in (("normalizer", normalizer), ("phi_q", phi_q), ("phi_k", phi_k)):
        if check_tensor(name, t).shape != state.shape[:-1]:
            raise ValueError(f"{name} must have shape (..., d_k) = {shape_of(state)[:-1]} to match state (..., d_k, d_v) "
                             f"= {shape_of(state)}, got {shape_of(t)}")
    if check_tensor("v", v).shape != state.shape[:-2] + state.shape[-1:]:
        raise ValueError(f"v must have shape (..., d_v) = {shape_of(state)[:-2] + shape_of(state)[-1:]} to match "
                         f"state (..., d_k, d_v) = {shape_of(state)}, got {shape_of(v)}")
    state = state + phi_k[..., :, None] * v[..., None, :]  # (..., d_k, d_v): S_t = S_{t-1} + φ(k_t) v_tᵀ
    normalizer = normalizer + phi_k  # (..., d_k): z_t = z_{t-1} + φ(k_t)
    numerator = (phi_q[..., None, :] @ state)[..., 0, :]  # (..., d_v): φ(q_t)ᵀ S_t
    denominator = (phi_q * normalizer).sum(dim=-1, keepdim=True)  # (..., 1): φ(q_t)ᵀ z_t
    return numerator / denominator, state, normalizer


def _check_gates(log_decay: object, beta: object, k: Tensor) -> tuple[Tensor, Tensor]:
    for name, t in (("log_decay", log_decay), ("beta", beta)):
        t = check_tensor(name, t, ndim=3)
        if t.shape != k.shape[:3]:
            raise ValueError(f"{name} must have shape (B, H, N) = {shape_of(k)[:3]}, one number per head and token "
                             f"(k has shape {shape_of(k)}), got {shape_of(t)}")
    if bool((log_decay > 0).any()):
        raise ValueError(f"log_decay must be <= 0 (the state is multiplied by exp(log_decay) <= 1 each step); its "
                         f"largest entry is {float(log_decay.max()):.3g} (shape {shape_of(log_decay)})")
    return log_decay.to(k.dtype), beta.to(k.dtype)


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, *,
                     scale: float | None = None, chunk_size: int | None = None) -> Tensor:
    """Gated DeltaNet's recurrence: ``q, k (B, H, N, d_k)``, ``v (B, H, N, d_v)``, ``log_decay, beta (B, H, N)``
    -> ``o (B, H, N, d_v)``.

    ``S_t = exp(log_decay_t) (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`` from ``S_0 = 0``, ``o_t = S_tᵀ (scale · q_t)``;
    ``scale=None`` means ``d_k ** -0.5``, applied to the query as ``transformers``' reference does. The layers
    that use it L2-normalise ``q`` and ``k`` first (this function does not). ``chunk_size=None``: token by token;
    an int: chunk by chunk (any ``N``; the last chunk may be shorter), the same outputs up to rounding.
    """
    q, k, v = _check_qkv(q, k, v)
    log_decay, beta = _check_gates(log_decay, beta, k)
    q = q * (q.shape[-1] ** -0.5 if scale is None else float(scale))  # (B, H, N, d_k)
    if chunk_size is None:
        return _gated_delta_recurrent(q, k, v, log_decay, beta)
    return _gated_delta_chunked(q, k, v, log_decay, beta, check_positive_int("chunk_size", chunk_size))


def gated_delta_step(state: Tensor, q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor,
                     beta: Tensor) -> tuple[Tensor, Tensor]:
    """One token of the gated delta rule: returns ``(o_t (..., d_v), S_t (..., d_k, d_v))``.

    ``state (..., d_k, d_v)`` is ``S_{t-1}``; ``q, k (..., d_k)`` (``q`` already scaled), ``v (..., d_v)``,
    ``log_decay, beta (...)``. ``S_t = α_t S_{t-1} + β_t k_t (v_t - α_t S_{t-1}ᵀ k_t)ᵀ``, ``o_t = S_tᵀ q_t``.
    """
    state = log_decay[..., None, None].exp() * state  # (..., d_k, d_v): α_t S_{t-1}, the old state faded
    recalled = (k[..., None, :] @ state)[..., 0, :]  # (..., d_v): what the memory returns for k_t
    correction = beta[..., None] * (v - recalled)  # (..., d_v): β_t (v_t - recalled)
    state = state + k[..., :, None] * correction[..., None, :]  # (..., d_k, d_v): write k_t ⊗ correction
    return (q[..., None, :] @ state)[..., 0, :], state  # o_t = S_tᵀ q_t (..., d_v), S_t


def _gated_delta_recurrent(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor) -> Tensor:
    """Token by token, one :func:`gated_delta_step` each, from ``S_0 = 0``."""
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d_k, d_v): S_0 = 0
    outputs = []
    for t in range(q.shape[-2]):
        o_t, state = gated_delta_step(state, q[:, :, t], k[:, :, t], v[:, :, t], log_decay[:, :, t], beta[:, :, t])
        outputs.append(o_t)  # (B, H, d_v): token t's output
    return torch.stack(outputs, dim=-2)  # (B, H, N, d_v)


def gated_delta_chunk(state: Tensor, q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor,
                      beta: Tensor) -> tuple[Tensor, Tensor]:
    """One chunk of ``L_c`` tokens of the gated delta rule at once: returns ``(o (..., L_c, d_v), S (..., d_k, d_v))``,
    the same as ``L_c`` calls of :func:`gated_delta_step`.

    ``state (..., d_k, d_v)`` is the state before the chunk; ``q, k (..., L_c, d_k)`` (``q`` already scaled),
    ``v (..., L_c, d_v)``, ``log_decay, beta (..., L_c)``. With ``γ_i`` the summed ``log_decay`` from the chunk's start to
    token ``i``: ``T = I + strictly_lower(β_i (k_i·k_j) e^{γ_i-γ_j})``, ``U = T⁻¹ (β v)``, ``W = T⁻¹ (β e^γ k)``,
    ``corrections = U - W S``, ``o = (e^γ q) S + lower((q_i·k_j) e^{γ_i-γ_j}) corrections``,
    ``S <- e^{γ_{L_c}} S + (e^{γ_{L_c} - γ} k)ᵀ corrections``.
    """
    gamma = log_decay.cumsum(dim=-1)  # (..., L_c): log of the decay from the chunk's start to each token
    length = gamma.shape[-1]  # L_c, the chunk length
    lower = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()  # (L_c, L_c): j <= i
    decay_ij = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, float("-inf")).exp()  # (..., L_c, L_c)
    b = beta[..., None]  # (..., L_c, 1)
    system = (b * k @ k.mT * decay_ij).tril(-1) + torch.eye(length, dtype=q.dtype, device=q.device)  # (..., L_c, L_c): T
    u = torch.linalg.solve_triangular(system, b * v, upper=False, unitriangular=True)  # (..., L_c, d_v)
    w = torch.linalg.solve_triangular(system, b * gamma[..., None].exp() * k, upper=False, unitriangular=True)  # (..., L_c, d_k)
    corrections = u - w @ state  # (..., L_c, d_v): what each token writes, given the state before the chunk
    inside = (q @ k.mT) * decay_ij  # (..., L_c, L_c): reads of this chunk's own writes (decay_ij is 0 above the diagonal)
    o = gamma[..., None].exp() * q @ state + inside @ corrections  # (..., L_c, d_v): the old state read, plus the new
    to_end = (gamma[..., -1:] - gamma).exp()[..., None]  # (..., L_c, 1): decay from token i to the chunk's end
    state = gamma[..., -1, None, None].exp() * state + (to_end * k).mT @ corrections  # (..., d_k, d_v)
    return o, state


def _gated_delta_chunked(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, size: int) -> Tensor:
    """Chunk by chunk, one :func:`gated_delta_chunk` each (the last chunk may be shorter), from ``S_0 = 0``."""
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d_k, d_v): S_0 = 0
    outputs = []
    for start in range(0, q.shape[-2], size):
        chunk = slice(start, start + size)
        o, state = gated_delta_chunk(state, q[:, :, chunk], k[:, :, chunk], v[:, :, chunk], log_decay[:, :, chunk],
                                     beta[:, :, chunk])
        outputs.append(o)  # (B, H, L_c, d_v): the chunk's outputs
    return torch.cat(outputs, dim=-2)  # (B, H, N, d_v)
