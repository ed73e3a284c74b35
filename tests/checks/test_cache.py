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
        "the rotary key is counted once per head": lambda L, H, r, d_r, d_h, n, b: L * n * (r + H * d_r) * b,
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


def test_latent_cache_size_hints_never_print_the_solution():
    for answer in (lab.latent_cache_bytes, lambda *a: 0):
        verdict = checks.check_latent_cache_size.judge(answer)
        assert not verdict.ok and "section 13.1.1" in verdict.hint, verdict.hint
        assert "kv_lora_rank + qk_rope_head_dim" not in verdict.hint and "return" not in verdict.hint, verdict.hint


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

    def mapped_again(state, normalizer, phi_q, phi_k, v):  # φ(φ(k)): the features were already mapped
        return step(state, normalizer, *(torch.nn.functional.elu(x) + 1 for x in (phi_q, phi_k)), v)

    def query_mapped_again(state, normalizer, phi_q, phi_k, v):
        return step(state, normalizer, torch.nn.functional.elu(phi_q) + 1, phi_k, v)[0], *step(
            state, normalizer, phi_q, phi_k, v)[1:]

    for fn, words in ((no_normaliser, "there is no normaliser"), (old_state, "read from the old state"),
                      (turned, "turned over"), (frozen_normaliser, "normaliser was not updated"),
                      (mapped_again, "φ is applied again"), (query_mapped_again, "φ is applied again")):
        verdict = checks.check_linear_attention_step.judge(fn)
        assert not verdict.ok and words in verdict.message, (fn.__name__, verdict.message)
    verdict = checks.check_linear_attention_step.judge(lambda *a: torch.zeros(3))
    assert not verdict.ok and "three tensors" in verdict.message


def test_linear_attention_step_refuses_the_library_by_any_name():
    verdict = checks.check_linear_attention_step.judge(linear_attention_step)
    assert not verdict.ok and "linear_attention_step" in verdict.message
    verdict = checks.check_linear_attention_step.judge(lambda *a: linear_attention_step(*a))
    assert not verdict.ok and "calls attn_helpers' linear_attention_step" in verdict.message
    assert "section 13.2.1" in verdict.hint and "phi_k[" not in verdict.hint, verdict.hint


def test_linear_attention_step_that_crashes_on_the_shapes_gets_the_orientation_hint():
    def turned(state, normalizer, phi_q, phi_k, v):  # (d_v, d_k) outer product added to a (d_k, d_v) state
        return None, state + v[..., :, None] * phi_k[..., None, :], normalizer + phi_k

    def one_d(state, normalizer, phi_q, phi_k, v):  # torch.outer is for single vectors only: right without batch axes
        state, normalizer = state + torch.outer(phi_k, v), normalizer + phi_k
        return (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True), state, normalizer

    for fn in (turned, one_d):
        verdict = checks.check_linear_attention_step.judge(fn)
        assert not verdict.ok and "phi_k[..., :, None] * v[..., None, :]" in verdict.hint, verdict


def transition(k, log_decay, beta):
    kk = k[..., :, None] * k[..., None, :]
    return log_decay.exp()[..., None, None] * (torch.eye(k.shape[-1], dtype=k.dtype) - beta[..., None, None] * kk)


def test_the_transition_and_the_write_give_the_librarys_step():
    from attn_helpers import gated_delta_step

    g = torch.Generator().manual_seed(5)
    state, v = torch.randn(2, 6, 4, generator=g, dtype=torch.float64), torch.randn(2, 4, generator=g, dtype=torch.float64)
    k = torch.nn.functional.normalize(torch.randn(2, 6, generator=g, dtype=torch.float64), dim=-1)
    log_decay, beta = -torch.rand(2, generator=g, dtype=torch.float64), torch.rand(2, generator=g, dtype=torch.float64)
    by_matrix = transition(k, log_decay, beta) @ state + beta[:, None, None] * k[:, :, None] * v[:, None, :]
    _, by_step = gated_delta_step(state, torch.zeros_like(k), k, v, log_decay, beta)
    torch.testing.assert_close(by_matrix, by_step)


def test_delta_transition_names_each_mistake_and_refuses_the_library():
    from attn_helpers import gated_delta_step

    assert checks.check_delta_transition.judge(transition).ok
    mistakes = {
        "there is no decay": lambda k, g, b: transition(k, torch.zeros_like(g), b),
        "log_decay is used as the factor": lambda k, g, b: transition(k, torch.zeros_like(g), b) * g[..., None, None],
        "there is no β": lambda k, g, b: transition(k, g, torch.ones_like(b)),
        "α_t multiplies only the identity": lambda k, g, b: (
            g.exp()[..., None, None] * torch.eye(k.shape[-1], dtype=k.dtype)
            - b[..., None, None] * k[..., :, None] * k[..., None, :]),
        "added instead of subtracted": lambda k, g, b: transition(k, g, -b),
        "the inner product k @ k": lambda k, g, b: g.exp()[..., None, None] * (
            torch.eye(k.shape[-1], dtype=k.dtype) - b[..., None, None] * (k * k).sum(-1)[..., None, None]),
    }
    for words, fn in mistakes.items():
        verdict = checks.check_delta_transition.judge(fn)
        assert not verdict.ok and words in verdict.message, (words, verdict.message)
    verdict = checks.check_delta_transition.judge(
        lambda k, g, b: torch.outer(k, k))  # fails on keys with batch axes
    assert not verdict.ok
    identity_state = lambda k, g, b: gated_delta_step(  # noqa: E731 - A from the library's step: S = I, v = 0
        torch.eye(k.shape[-1], dtype=k.dtype).expand(*k.shape, k.shape[-1]), k, k,
        torch.zeros(*k.shape[:-1], k.shape[-1], dtype=k.dtype), g, b)[1]
    verdict = checks.check_delta_transition.judge(identity_state)
    assert not verdict.ok and "gated_delta_step" in verdict.message, verdict.message
    verdict = checks.check_delta_transition.judge(gated_delta_step)
    assert not verdict.ok and "section 13.3.1" in verdict.hint and "k[..., :, None]" not in verdict.hint, verdict.hint
    # the refusal's hint points at the step to multiply out, not at the answer's formula
    assert "multiply out" in verdict.hint and "I - β_t k_t k_tᵀ" not in verdict.hint, verdict.hint


def test_state_bytes_prediction_names_each_mistake():
    judge = checks.check_state_bytes_prediction.judge
    assert judge(16_640, 16_640, 64, 64, 4).ok
    assert "S alone" in judge(64 * 64 * 4, 16_640, 64, 64, 4).message
    assert "count of numbers" in judge(64 * 64 + 64, 16_640, 64, 64, 4).message
    assert "does not depend on N" in judge(524_288, 16_640, 64, 64, 4).hint
    assert "8 bytes a number" in judge(33_280, 16_640, 64, 64, 4).message  # reader l1: the N hint before
    assert not judge("16640", 16_640, 64, 64, 4).ok
    # reader j12: S or z counted twice has no N in it, and is told so
    assert "counts S twice" in judge(32_768, 16_640, 64, 64, 4).message
    assert "counts S twice" in judge(33_024, 16_640, 64, 64, 4).message
    assert "counts z twice" in judge(16_896, 16_640, 64, 64, 4).message
    assert "once each" in judge(20_000, 16_640, 64, 64, 4).hint


def test_state_bytes_prediction_measures_only_once_a_prediction_is_written(capsys):
    # reader r12c: a measurement made before the check sat in a notebook variable, ready to be copied
    calls = []

    def measure():
        calls.append(1)
        return 16_640

    checks.check_state_bytes_prediction(None, measure, d_k=64, d_v=64, dtype_bytes=4)
    assert "Not attempted" in capsys.readouterr().out and not calls
    assert checks.check_state_bytes_prediction.judge(16_640, measure, 64, 64, 4).ok and calls == [1]
    assert "S alone" in checks.check_state_bytes_prediction.judge(64 * 64 * 4, measure, 64, 64, 4).message


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
