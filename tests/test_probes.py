"""attn_helpers.probes: the softmax measurements of lesson 02 (the stacks of lesson 06 are in test_attention_stack.py)."""

import math

import pytest
import torch

from attn_helpers import softmax_grad_norm, softmax_statistics


def test_softmax_grad_norm_equals_autograd():
    g = torch.Generator().manual_seed(0)
    scores = (torch.randn(3, 4, 6, generator=g) * 3).requires_grad_()
    upstream = torch.randn(3, 4, 6, generator=g)
    (torch.softmax(scores, dim=-1) * upstream).sum().backward()
    torch.testing.assert_close(softmax_grad_norm(scores.detach(), upstream), scores.grad.norm(dim=-1))


def test_softmax_grad_norm_vanishes_for_saturated_rows():
    scores = torch.tensor([[100.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    upstream = torch.tensor([[1.0, -2.0, 3.0], [1.0, -2.0, 3.0]])
    norms = softmax_grad_norm(scores, upstream)
    assert norms.shape == (2,)
    assert norms[0] < 1e-6 < norms[1]


def test_softmax_grad_norm_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"upstream must have the shape of scores.*\[2, 3\].*\[3, 2\]"):
        softmax_grad_norm(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="scores must be a floating-point tensor"):
        softmax_grad_norm(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3))


def test_softmax_statistics_uniform_and_one_hot_rows():
    uniform = softmax_statistics(torch.zeros(5, 8))
    assert uniform["variance"] == 0.0 and "grad_norm" not in uniform
    assert math.isclose(uniform["max_weight"], 1 / 8, rel_tol=1e-6)
    assert math.isclose(uniform["entropy"], math.log(8), rel_tol=1e-6)
    peaked = softmax_statistics(torch.tensor([[50.0, 0.0, 0.0]]), torch.tensor([[1.0, 2.0, 3.0]]))
    assert peaked["max_weight"] > 0.999 and peaked["entropy"] < 1e-6 and peaked["grad_norm"] < 1e-6


def test_softmax_statistics_variance_grows_with_d_k_and_scaling_undoes_it():
    g = torch.Generator().manual_seed(1)
    for d_k in (16, 256):
        q, k = torch.randn(8, 64, d_k, generator=g), torch.randn(8, 64, d_k, generator=g)
        raw = q @ k.mT
        assert abs(softmax_statistics(raw)["variance"] / d_k - 1) < 0.1
        assert abs(softmax_statistics(raw / math.sqrt(d_k))["variance"] - 1) < 0.1
