"""The checkers of 13 · The cache that does not grow: verdicts beyond the exercise tests' solution, None and one
typical wrong answer (each named mistake, the library refused by any name, transformers refused)."""

from __future__ import annotations

import torch

from attn_helpers import checks, lab, linear_attention_step


def right_bytes(num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, seq_len, dtype_bytes):
    return num_layers * seq_len * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes


def test_latent_cache_size_names_each_mistake():
    assert checks.check_latent_cache_size.judge(right_bytes).ok
    mistakes = {
        "the rotary key is missing": lambda L, H, r, d_r, d_h, n, b: L * n * r * b,
        "every head has its own latent": lambda L, H, r, d_r, d_h, n, b: H * L * n * (r + d_r) * b,
        "one layer only": lambda L, H, r, d_r, d_h, n, b: n * (r + d_r) * b,
        "the dtype is missing": lambda L, H, r, d_r, d_h, n, b: L * n * (r + d_r),
        "it is the multi-head KV cache": lambda L, H, r, d_r, d_h, n, b: 2 * L * H * n * d_h * b,
    }
    for cause, fn in mistakes.items():
        verdict = checks.check_latent_cache_size.judge(fn)
        assert not verdict.ok and cause in verdict.message, (cause, verdict.message)


def test_latent_cache_size_refuses_the_library_and_non_numbers():
    def renamed(num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, seq_len, dtype_bytes):
        count = lab.latent_cache_bytes  # another name for the library's answer
        return count(num_layers=num_layers, kv_lora_rank=kv_lora_rank, qk_rope_head_dim=qk_rope_head_dim,
                     seq_len=seq_len, dtype_bytes=dtype_bytes)
    verdict = checks.check_latent_cache_size.judge(renamed)
    assert not verdict.ok and "latent_cache_bytes" in verdict.message
    verdict = checks.check_latent_cache_size.judge(lambda *a: "many")
    assert not verdict.ok and "whole number of bytes" in verdict.message
    verdict = checks.check_latent_cache_size.judge(lambda a, b: 1)
    assert not verdict.ok and "seven parameters" in verdict.hint


def step(state, normalizer, phi_q, phi_k, v):
    state = state + phi_k[..., :, None] * v[..., None, :]
    normalizer = normalizer + phi_k
    return (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True), state, normalizer


def test_linear_attention_step_names_each_mistake():
    assert checks.check_linear_attention_step.judge(step).ok

    def no_normaliser(state, normalizer, phi_q, phi_k, v):
        out, state, normalizer = step(state, normalizer, phi_q, phi_k, v)
        return out * (phi_q * normalizer).sum(-1, keepdim=True), state, normalizer

    def old_state(state, normalizer, phi_q, phi_k, v):
        out = (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True)
        return (out, *step(state, normalizer, phi_q, phi_k, v)[1:])

    def turned(state, normalizer, phi_q, phi_k, v):
        return None, state.mT + v[..., :, None] * phi_k[..., None, :], normalizer + phi_k

    def frozen_normaliser(state, normalizer, phi_q, phi_k, v):
        out, state, _ = step(state, normalizer, phi_q, phi_k, v)
        return out, state, normalizer

    for fn, words in ((no_normaliser, "there is no normaliser"), (old_state, "read from the old state"),
                      (turned, "turned over"), (frozen_normaliser, "normaliser was not updated")):
        verdict = checks.check_linear_attention_step.judge(fn)
        assert not verdict.ok and words in verdict.message, (fn.__name__, verdict.message)
    verdict = checks.check_linear_attention_step.judge(lambda *a: torch.zeros(3))
    assert not verdict.ok and "three tensors" in verdict.message


def test_linear_attention_step_refuses_the_library_by_any_name():
    verdict = checks.check_linear_attention_step.judge(linear_attention_step)
    assert not verdict.ok and "linear_attention_step" in verdict.message
    verdict = checks.check_linear_attention_step.judge(lambda *a: linear_attention_step(*a))
    assert not verdict.ok and "calls attn_helpers' linear_attention_step" in verdict.message


def test_linear_attention_step_that_crashes_on_the_shapes_gets_the_orientation_hint():
    def turned(state, normalizer, phi_q, phi_k, v):  # (d_v, d_k) outer product added to a (d_k, d_v) state
        return None, state + v[..., :, None] * phi_k[..., None, :], normalizer + phi_k

    def one_d(state, normalizer, phi_q, phi_k, v):  # torch.outer is for single vectors only: right without batch axes
        state, normalizer = state + torch.outer(phi_k, v), normalizer + phi_k
        return (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True), state, normalizer

    for fn in (turned, one_d):
        verdict = checks.check_linear_attention_step.judge(fn)
        assert not verdict.ok and "phi_k[..., :, None] * v[..., None, :]" in verdict.hint, verdict


def write(state, k, v, beta):
    recalled = (k[..., None, :] @ state)[..., 0, :]
    return state + k[..., :, None] * (beta[..., None] * (v - recalled))[..., None, :]


def test_delta_rule_write_names_each_mistake_and_refuses_the_library():
    from attn_helpers import gated_delta_step

    assert checks.check_delta_rule_write.judge(write).ok

    def beta_on_v(state, k, v, beta):
        recalled = (k[..., None, :] @ state)[..., 0, :]
        return state + k[..., :, None] * (beta[..., None] * v - recalled)[..., None, :]

    def no_beta(state, k, v, beta):
        return write(state, k, v, torch.ones_like(beta))

    def turned_read(state, k, v, beta):  # S k instead of S^T k: fails when d_k != d_v
        return state + k[..., :, None] * (beta[..., None] * (v - state @ k))[..., None, :]

    for fn, words in ((beta_on_v, "β scales only v"), (no_beta, "there is no β")):
        verdict = checks.check_delta_rule_write.judge(fn)
        assert not verdict.ok and words in verdict.message, (fn.__name__, verdict.message)
    verdict = checks.check_delta_rule_write.judge(turned_read)
    assert not verdict.ok and "(k[..., None, :] @ state)[..., 0, :]" in verdict.hint
    verdict = checks.check_delta_rule_write.judge(
        lambda state, k, v, beta: gated_delta_step(state, k, k, v, torch.zeros_like(beta), beta)[1])
    assert not verdict.ok and "gated_delta_step" in verdict.message


def test_state_bytes_prediction_names_each_mistake():
    judge = checks.check_state_bytes_prediction.judge
    assert judge(16_640, 16_640, 64, 64, 4).ok
    assert "S alone" in judge(64 * 64 * 4, 16_640, 64, 64, 4).message
    assert "count of numbers" in judge(64 * 64 + 64, 16_640, 64, 64, 4).message
    assert "does not depend on N" in judge(524_288, 16_640, 64, 64, 4).hint
    assert not judge("16640", 16_640, 64, 64, 4).ok


def test_overwrite_prediction_is_judged_on_the_measurement():
    judge = checks.check_overwrite_prediction.judge
    old, new = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    reads = {"linear": old + new, "delta": new.clone()}
    assert judge(("old + new", "new"), reads, old, new).ok
    assert judge([" Old + New", "NEW"], reads, old, new).ok
    wrong = judge(("old + new", "old + new"), reads, old, new)
    assert not wrong.ok and "the delta rule returns new" in wrong.message
    assert not judge("new", reads, old, new).ok
    assert not judge(("sum", "new"), reads, old, new).ok
