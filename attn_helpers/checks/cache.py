"""Checkers for 13 · The cache that does not grow: an MLA cache's size, one step of linear attention, the gated
delta rule's transition; each run on inputs the lesson never printed, the library and ``transformers`` refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core import elu_feature_map, linear_attention_step
from ..lab import latent_cache_bytes
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong
from ._function import judge_function, whole_bytes
from ._guard import TRANSFORMERS, library
from ._predict import as_choice, measure_now, prediction_checker

__all__ = ["check_latent_cache_size", "check_linear_attention_step", "check_delta_transition",
           "check_state_bytes_prediction", "check_overwrite_prediction"]


_LATENT_LIBRARY = library(("latent_cache_bytes", "model_cache_bytes", "kv_cache_bytes", "LatentAttention")) | TRANSFORMERS
#: (num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, seq_len, dtype_bytes): DeepSeek-V2's sizes
#: (DeepSeek-AI, 2024, section 3.1.2), a small made-up model, and one whose rotary key is wider than its latent.
_LATENT_CASES = ((60, 128, 512, 64, 128, 4096, 2), (4, 3, 16, 8, 10, 7, 4), (2, 5, 6, 12, 4, 100, 1))
_LATENT_KEYS = ("num_layers", "num_heads", "kv_lora_rank", "qk_rope_head_dim", "head_dim", "seq_len", "dtype_bytes")


def _judge_latent(sizes: dict[str, int]) -> Any:
    """The judge of the bytes for one set of ``sizes``: right, or the typical mistake named."""
    L, H, r, d_r, d_h, n, b = (sizes[k] for k in _LATENT_KEYS)
    expected = latent_cache_bytes(num_layers=L, kv_lora_rank=r, qk_rope_head_dim=d_r, seq_len=n, dtype_bytes=b)
    mistakes = {
        L * n * r * b: ("the rotary key is missing", "each token also leaves its rotary key, qk_rope_head_dim numbers, "
                        "shared by every head: (kv_lora_rank + qk_rope_head_dim)."),
        2 * expected: ("K and V are counted twice", "the latent is one vector for both: the keys and the values are "
                       "rebuilt from it, so there is no factor 2."),
        L * n * (r + H * d_r) * b: ("the rotary key is counted once per head", "the rotary key is one "
                                    "vector shared by every head (decoupled RoPE, section 13.1.1): count "
                                    "qk_rope_head_dim once, not num_heads times."),
        H * expected: ("every head has its own latent", "the latent and the rotary key are shared by all heads: "
                       "num_heads does not appear."),
        n * (r + d_r) * b: ("one layer only", "every layer keeps its own latents: multiply by num_layers."),
        L * n * (r + d_r): ("the dtype is missing", "the count is numbers; multiply by dtype_bytes for bytes."),
        2 * L * H * n * d_h * b: ("it is the multi-head KV cache", "that is what MLA replaces; count what MLA keeps: "
                                  "kv_lora_rank + qk_rope_head_dim numbers per token and layer."),
    }

    def judge(got: Any) -> Verdict:
        got = whole_bytes(got)
        if got == expected:
            return correct()
        if got in mistakes:
            cause, hint = mistakes[got]
            return wrong(f"{got:,} bytes, expected {expected:,}: matches what you get when {cause}.", hint)
        return wrong(f"{got:,} bytes, expected {expected:,}: no typical mistake gives this number.",
                     "start from what section 13.1.1 says one token leaves in one layer's cache, then count "
                     "it for every layer and every token, in bytes.")
    return judge


@checker
def check_latent_cache_size(answer: Any) -> Verdict:
    """Exercise 13: ``mla_cache_bytes(...) -> int``, one sequence's MLA cache (``num_heads``, ``head_dim`` distract)."""
    cases = [(case, ", ".join(f"{k}={v}" for k, v in zip(_LATENT_KEYS, case)), _judge_latent(dict(zip(_LATENT_KEYS, case))))
             for case in _LATENT_CASES]
    return judge_function(answer, cases, watched=_LATENT_LIBRARY,
                          example="mla_cache_bytes(num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, "
                                  "seq_len, dtype_bytes)",
                          lines="count the cache yourself: section 13.1.1 says what one token leaves per layer, "
                                "shared by every head; section 13.1.4 counts it.",
                          raised="keep the seven parameters of the exercise's def line, in that order.",
                          success="right for three models of other sizes: layers x tokens x (latent + rotary key) x "
                                  "bytes, with no factor 2 and no head count.")


def _seeded_cases(make_inputs: Callable[..., tuple[Tensor, ...]], first_seed: int, shapes: tuple[tuple[int, ...], ...],
                  make_judge: Callable[..., Any], name: str) -> list:
    """One case per shape: inputs from ``make_inputs(first_seed + i, shape)``, described by ``name``, judged."""
    inputs = [make_inputs(first_seed + i, shape) for i, shape in enumerate(shapes)]
    return [(x, f"for {name} of shape {tuple(x[0].shape)} ({'..., d_k, d_v' if name == 'state' else '..., d_k'})",
             make_judge(*x)) for x in inputs]


_DELTA_NAMES = ("gated_delta_step", "gated_delta_chunk", "gated_delta_rule", "linear_attention_step")


def _step_inputs(seed: int, shape: tuple[int, ...]) -> tuple[Tensor, ...]:
    """``state (..., d_k, d_v)``, ``normalizer (..., d_k)``, ``phi_q, phi_k (..., d_k)`` (positive), ``v (..., d_v)``."""
    g = torch.Generator().manual_seed(seed)
    *lead, d_k, d_v = shape
    phi = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64) + 0.1  # noqa: E731 - positive features
    return (phi(*lead, d_k, d_v), phi(*lead, d_k), phi(*lead, d_k), phi(*lead, d_k),
            torch.randn(*lead, d_v, generator=g, dtype=torch.float64))


_PHI_AGAIN = ("φ is applied again to features that are already mapped", "phi_q and phi_k are φ(q_t) and φ(k_t) "
              "already: use them as they are, without elu(x) + 1.")


def _judge_step(state: Tensor, normalizer: Tensor, phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Any:
    out, new_state, new_normalizer = linear_attention_step(state, normalizer, phi_q, phi_k, v)
    twice_q, twice_k = elu_feature_map(phi_q), elu_feature_map(phi_k)  # φ(φ(q_t)), φ(φ(k_t)): the mistake
    twice_state = state + twice_k[..., :, None] * v[..., None, :]  # (..., d_k, d_v)
    numerator = (phi_q[..., None, :] @ new_state)[..., 0, :]  # (..., d_v)
    old_read = (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True)
    out_mistakes = {
        "the normaliser is the old one, z_{t-1}, not z_t": (
            numerator / (phi_q * normalizer).sum(-1, keepdim=True), "add φ(k_t) to the normaliser before you divide."),
        "there is no normaliser (φ(q_t)ᵀ S_t alone)": (numerator, "divide by φ(q_t)ᵀ z_t, one number per row."),
        "the output is read from the old state S_{t-1}": (old_read, "update S and z first, then read the output."),
        _PHI_AGAIN[0]: ((twice_q[..., None, :] @ new_state)[..., 0, :] / (twice_q * new_normalizer).sum(-1, keepdim=True),
                        _PHI_AGAIN[1]),
    }

    def judge(got: Any) -> Verdict:
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            return wrong(f"your function returned {type(got).__name__}; expected three tensors (o, state, normalizer).",
                         "end the function with return o, state, normalizer.")
        got_out, got_state, got_normalizer = got
        if isinstance(got_state, Tensor) and got_state.shape == new_state.mT.shape:
            return wrong(f"the new state has shape {list(got_state.shape)}, (..., d_v, d_k): the outer product is "
                         f"v_t φ(k_t)ᵀ, turned over.", "the state is (d_k, d_v): state + phi_k[..., :, None] * v[..., None, :].")
        verdict = compare_tensors(got_state, new_state, name="the new state",
                                  likely_mistakes={_PHI_AGAIN[0]: (twice_state, _PHI_AGAIN[1])})
        if not verdict.ok:
            return verdict
        verdict = compare_tensors(got_normalizer, new_normalizer, name="the new normalizer", likely_mistakes={
            "the normaliser was not updated": (normalizer, "z_t = z_{t-1} + φ(k_t)."),
            _PHI_AGAIN[0]: (normalizer + twice_k, _PHI_AGAIN[1])})
        if not verdict.ok:
            return verdict
        return compare_tensors(got_out, out, name="o (the output)", likely_mistakes=out_mistakes)
    return judge


@checker
def check_linear_attention_step(answer: Any) -> Verdict:
    """Exercise 13: ``step(state, normalizer, phi_q, phi_k, v) -> (o, state, normalizer)``, causal linear attention."""
    # shapes (..., d_k, d_v) with d_k != d_v, so a transposed state shows
    cases = _seeded_cases(_step_inputs, 11, ((3, 5), (2, 4, 6), (1, 2, 3)), _judge_step, "state")
    return judge_function(answer, cases, example="step(state, normalizer, phi_q, phi_k, v)",
                          watched=library((*_DELTA_NAMES, "linear_attention", "elu_feature_map")) | TRANSFORMERS,
                          raised="the state is (..., d_k, d_v), with d_k != d_v here: build the outer product as "
                                 "phi_k[..., :, None] * v[..., None, :] (not v times phi_k) and read it with "
                                 "phi_q[..., None, :] @ state; operations made for single vectors (torch.outer, "
                                 "torch.dot, phi_q @ normalizer) fail on inputs with batch axes (...); and a sum over "
                                 "the last axis that drops it (.sum(-1) without keepdim=True) leaves a denominator of "
                                 "shape (...) that cannot divide a (..., d_v) output.",
                          lines="write the recurrence of section 13.2.1 yourself: update S and z with this "
                                "token's φ(k_t) and v_t, then read o_t with φ(q_t).",
                          success="right for three inputs of other sizes (d_k != d_v, with and without batch axes): "
                                  "the state grows by φ(k_t) v_tᵀ, the normaliser by φ(k_t), and the output divides "
                                  "the two reads.")


def _transition_inputs(seed: int, shape: tuple[int, ...]) -> tuple[Tensor, ...]:
    """A unit key ``k (..., d_k)``, ``log_decay (...)`` below 0 and ``beta (...)`` in (0, 1)."""
    g = torch.Generator().manual_seed(seed)
    *lead, d_k = shape
    k = torch.randn(*lead, d_k, generator=g, dtype=torch.float64)
    return (k / k.norm(dim=-1, keepdim=True), -torch.rand(tuple(lead), generator=g, dtype=torch.float64) - 0.2,
            torch.rand(tuple(lead), generator=g, dtype=torch.float64) * 0.6 + 0.2)


def _judge_transition(k: Tensor, log_decay: Tensor, beta: Tensor) -> Any:
    eye = torch.eye(k.shape[-1], dtype=k.dtype)  # (d_k, d_k)
    kk = k[..., :, None] * k[..., None, :]  # (..., d_k, d_k): k kᵀ
    alpha, b = log_decay.exp()[..., None, None], beta[..., None, None]  # (..., 1, 1) each
    expected = alpha * (eye - b * kk)
    mistakes = {
        "there is no decay (α_t = 1)": (eye - b * kk, "multiply the whole matrix by α_t = exp(log_decay)."),
        "log_decay is used as the factor, not its exponential": (
            log_decay[..., None, None] * (eye - b * kk), "log_decay is g_t, the logarithm: α_t = exp(g_t)."),
        "α_t multiplies only the identity": (alpha * eye - b * kk, "α_t multiplies the whole bracket: "
                                                                   "α_t (I - β_t k_t k_tᵀ)."),
        "there is no β (β_t = 1)": (alpha * (eye - kk), "scale k_t k_tᵀ by β_t inside the bracket."),
        "k_t k_tᵀ is the inner product k @ k, one number, not the outer product": (
            alpha * (eye - b * (k * k).sum(-1)[..., None, None]),
            "k_t k_tᵀ is the outer product, a (d_k, d_k) matrix whose entry (i, j) is k_i k_j; k @ k is the inner "
            "product, one number."),
        "k_t k_tᵀ is added instead of subtracted": (alpha * (eye + b * kk), "the delta rule subtracts: "
                                                                            "I - β_t k_t k_tᵀ."),
    }
    return lambda got: compare_tensors(got, expected, name="the transition", likely_mistakes=mistakes)


@checker
def check_delta_transition(answer: Any) -> Verdict:
    """Exercise 13: ``transition(k, log_decay, beta)``, ``A_t (..., d_k, d_k)`` of the gated delta rule."""
    # shapes (..., d_k): one key, and keys with batch axes
    cases = _seeded_cases(_transition_inputs, 21, ((4,), (2, 5), (3, 2, 3)), _judge_transition, "k")
    return judge_function(answer, cases, watched=library(_DELTA_NAMES) | TRANSFORMERS,
                          example="transition(k, log_decay, beta)",
                          raised="k kᵀ for keys with batch axes is k[..., :, None] * k[..., None, :] (shape "
                                 "(..., d_k, d_k)); torch.eye(k.shape[-1]) broadcasts over the batch axes; give α and "
                                 "β two trailing axes, [..., None, None]. torch.outer works on single vectors only.",
                          lines="multiply out the step of section 13.3.1 yourself and collect what multiplies "
                                "S_{t-1}: the faded state α_t S_{t-1} (α_t = exp(g_t)) and what writing "
                                "β_t k_t (v_t - recalled)ᵀ takes from it, where recalled is what the faded state "
                                "returns for k_t.",
                          success="right for three keys of other sizes (with and without batch axes): the old state "
                                  "is faded by α_t and loses β_t of what it held along k_t.")


@prediction_checker
def check_state_bytes_prediction(prediction: Any, state_bytes: int | Callable[[], int], d_k: int, d_v: int,
                                 dtype_bytes: int) -> Verdict:
    """Prediction 13: the bytes of one head's ``S (d_k, d_v)`` and ``z (d_k,)`` after 1,024 tokens."""
    got = as_number(prediction, "your prediction", hint="write one number of bytes, e.g. prediction = 1000.")
    state_bytes = measure_now(state_bytes)
    explain = (f"measured: {state_bytes:,} bytes = ({d_k}·{d_v} + {d_k}) numbers × {dtype_bytes} bytes, whatever "
               "the number of tokens.")
    if got == state_bytes:
        return correct(explain)
    if got == d_k * d_v * dtype_bytes:
        return wrong(f"{got:,.0f} bytes is S alone.", "the recurrence also keeps the normaliser z, d_k numbers.")
    if got == (d_k * d_v + d_k):
        return wrong(f"{got:,.0f} is the count of numbers, not of bytes.", f"a float32 number is {dtype_bytes} bytes.")
    if got == (d_k * d_v + d_k) * 8 and dtype_bytes != 8:
        return wrong(f"{got:,.0f} bytes counts 8 bytes a number (float64).",
                     f"the state here is float32: {dtype_bytes} bytes a number.")
    if got in (state_bytes + d_k * d_v * dtype_bytes, 2 * d_k * d_v * dtype_bytes):  # with or without z
        return wrong(f"{got:,.0f} bytes counts S twice.", "S is one d_k × d_v matrix: the keys and the values are "
                                                          "folded into it, not kept beside it.")
    if got == state_bytes + d_k * dtype_bytes:
        return wrong(f"{got:,.0f} bytes counts z twice.", "z is one vector of d_k numbers.")
    if got > 2 * state_bytes:  # more than two states: something per token (reader j12: not for S or z twice)
        return wrong(f"{got:,.0f} bytes is more than the state keeps.",
                     "the state is overwritten at every token, not appended to: its size does not depend on N.")
    if got > state_bytes:
        return wrong(f"{got:,.0f} bytes is more than the state keeps.",
                     f"count the numbers of S ({d_k} × {d_v}) and of z ({d_k}) once each, then multiply by "
                     f"{dtype_bytes} bytes.")
    return wrong(f"{got:,.0f} bytes is not what was measured.",
                 f"count the numbers of S ({d_k} × {d_v}) and of z ({d_k}), then multiply by {dtype_bytes} bytes.")


OVERWRITE_CHOICES = ("old", "new", "old + new")


@prediction_checker
def check_overwrite_prediction(prediction: Any, reads: dict[str, Tensor], old: Tensor, new: Tensor) -> Verdict:
    """Prediction 13: one key written with ``old`` then ``new``; what each memory returns, ``(linear, delta)``."""
    if not isinstance(prediction, (tuple, list)) or len(prediction) != 2:
        return wrong(f"the prediction should be a pair (linear, delta), got {prediction!r:.60}.",
                     'write e.g. prediction = ("old", "new").')
    choices = [as_choice(p, OVERWRITE_CHOICES) for p in prediction]
    candidates = {"old": old, "new": new, "old + new": old + new}
    happened = {name: min(candidates, key=lambda c: (read - candidates[c]).norm().item()) for name, read in reads.items()}
    measured = f"measured: the plain sum returns {happened['linear']}, the delta rule returns {happened['delta']}"
    if tuple(choices) == (happened["linear"], happened["delta"]):
        return correct(f"{measured}. The plain sum adds the second value on top of the first; the delta rule writes "
                       "only the difference between the new value and what the key already returns.")
    return wrong(f"not what was measured ({measured}).",
                 "with a unit key k, S = k vᵀ returns v for k. The plain rule adds k v_newᵀ; the delta rule adds "
                 "k (v_new - v_old)ᵀ.")
