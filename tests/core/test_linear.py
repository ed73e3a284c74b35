"""Linear attention and the gated delta rule (13 · The cache that does not grow): the quadratic and recurrent
forms of linear attention agree; the gated delta rule token by token and chunk by chunk agree with each other and
with transformers' Qwen3-Next references over several sizes, seeds and chunk sizes (N not a multiple of the chunk);
bad inputs get errors that name the argument and the shapes."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.nn import functional as F

from attn_helpers import gated_delta_chunk, gated_delta_rule, gated_delta_step, linear_attention, linear_attention_step

transformers = pytest.importorskip("transformers")
from transformers.models.qwen3_next.modeling_qwen3_next import (  # noqa: E402
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

SIZES = [(1, 1, 1, 4, 4), (2, 3, 7, 8, 5), (1, 2, 64, 16, 16), (2, 2, 70, 8, 12), (1, 1, 130, 4, 6)]


def inputs(B, H, N, d_k, d_v, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, H, N, d_k, generator=g, dtype=dtype), dim=-1)
    k = F.normalize(torch.randn(B, H, N, d_k, generator=g, dtype=dtype), dim=-1)
    v = torch.randn(B, H, N, d_v, generator=g, dtype=dtype)
    log_decay = -F.softplus(torch.randn(B, H, N, generator=g, dtype=dtype))
    beta = torch.sigmoid(torch.randn(B, H, N, generator=g, dtype=dtype))
    return q, k, v, log_decay, beta


def theirs(fn, q, k, v, log_decay, beta, **kw):
    logging.getLogger("transformers").setLevel(logging.ERROR)
    out, _ = fn(*(t.transpose(1, 2) for t in (q, k, v, log_decay, beta)), initial_state=None,
                output_final_state=False, **kw)  # (B, N, H, d_v)
    return out.transpose(1, 2)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("seed", [0, 1])
def test_recurrent_and_chunked_equal_each_other_and_transformers(sizes, seed):
    q, k, v, log_decay, beta = inputs(*sizes, seed)
    by_token = gated_delta_rule(q, k, v, log_decay, beta)
    for chunk in (1, 5, 16, 64):
        torch.testing.assert_close(gated_delta_rule(q, k, v, log_decay, beta, chunk_size=chunk), by_token,
                                   rtol=0, atol=1e-10)
    torch.testing.assert_close(theirs(torch_recurrent_gated_delta_rule, q, k, v, log_decay, beta), by_token,
                               rtol=0, atol=1e-5)
    torch.testing.assert_close(theirs(torch_chunk_gated_delta_rule, q, k, v, log_decay, beta, chunk_size=16),
                               by_token, rtol=0, atol=1e-5)


def test_scale_is_applied_to_the_query():
    q, k, v, log_decay, beta = inputs(1, 2, 9, 8, 4, 3)
    torch.testing.assert_close(gated_delta_rule(q, k, v, log_decay, beta, scale=0.5),
                               gated_delta_rule(q * 0.5 * 8 ** 0.5, k, v, log_decay, beta), rtol=0, atol=1e-12)


def test_float32_inputs_keep_their_dtype():
    q, k, v, log_decay, beta = inputs(1, 2, 20, 8, 4, 4, dtype=torch.float32)
    out = gated_delta_rule(q, k, v, log_decay, beta, chunk_size=6)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, theirs(torch_chunk_gated_delta_rule, q, k, v, log_decay, beta), rtol=0, atol=1e-5)


def test_one_step_is_the_recurrence():
    q, k, v, log_decay, beta = inputs(2, 3, 1, 4, 5, 5)
    out, state = gated_delta_step(torch.zeros(2, 3, 4, 5, dtype=torch.float64), q[:, :, 0] * 0.5, k[:, :, 0],
                                  v[:, :, 0], log_decay[:, :, 0], beta[:, :, 0])
    torch.testing.assert_close(out, gated_delta_rule(q, k, v, log_decay, beta)[:, :, 0], rtol=0, atol=1e-12)
    assert list(state.shape) == [2, 3, 4, 5]


@pytest.mark.parametrize("n", [1, 6, 33])
def test_linear_attention_quadratic_equals_recurrent(n):
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(2, 3, n, d, generator=g, dtype=torch.float64) for d in (4, 4, 6))
    torch.testing.assert_close(linear_attention(q, k, v, recurrent=True), linear_attention(q, k, v), rtol=0, atol=1e-12)


def test_linear_attention_first_token_returns_its_value():
    q, k, v = torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 3)
    torch.testing.assert_close(linear_attention(q, k, v)[..., 0, :], v[..., 0, :])


def test_bad_inputs_are_named():
    q, k, v, log_decay, beta = inputs(1, 2, 5, 4, 3, 0)
    with pytest.raises(ValueError, match=r"q and k must have the same feature size d_k .* q has shape \[1, 2, 5, 3\]"):
        gated_delta_rule(q[..., :3], k, v, log_decay, beta)
    with pytest.raises(ValueError, match=r"log_decay must have shape \(B, H, N\) = \[1, 2, 5\].*got \[1, 5, 2\]"):
        gated_delta_rule(q, k, v, log_decay.transpose(1, 2), beta)
    with pytest.raises(ValueError, match="log_decay must be <= 0"):
        gated_delta_rule(q, k, v, -log_decay, beta)
    with pytest.raises(ValueError, match=r"k and v must have the same number of tokens N_k"):
        gated_delta_rule(q, k, v[:, :, :4], log_decay, beta)
    with pytest.raises(ValueError, match=r"must share B, H and N .* q has shape \[1, 2, 4, 4\]"):
        gated_delta_rule(q[:, :, :4], k, v, log_decay, beta)
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        gated_delta_rule(q[0], k, v, log_decay, beta)
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        gated_delta_rule(q, k, v, log_decay, beta, chunk_size=0)
    with pytest.raises(ValueError, match=r"phi_k must have shape \(..., d_k\) = \[2, 4\]"):
        linear_attention_step(torch.zeros(2, 4, 3), torch.zeros(2, 4), torch.ones(2, 4), torch.ones(4), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"v must have shape \(..., d_v\) = \[2, 3\]"):
        linear_attention_step(torch.zeros(2, 4, 3), torch.zeros(2, 4), torch.ones(2, 4), torch.ones(2, 4), torch.ones(2, 4))


def test_one_chunk_is_its_steps():
    q, k, v, log_decay, beta = inputs(2, 2, 6, 4, 3, 6)
    state = torch.randn(2, 2, 4, 3, dtype=torch.float64)
    out, after = gated_delta_chunk(state, q, k, v, log_decay, beta)
    step_state, outs = state, []
    for t in range(6):
        o, step_state = gated_delta_step(step_state, q[:, :, t], k[:, :, t], v[:, :, t], log_decay[:, :, t], beta[:, :, t])
        outs.append(o)
    torch.testing.assert_close(out, torch.stack(outs, dim=-2), rtol=0, atol=1e-12)
    torch.testing.assert_close(after, step_state, rtol=0, atol=1e-12)
