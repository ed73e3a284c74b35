"""The formula in one public function (attend) and the layers' options for real code: the skip through V left
out, biases set apart, RotaryAttention as Attention plus one step."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from attn_helpers.core import (Attention, ConcatHeadsAttention, MultiHeadAttention, RotaryAttention, attend,
                               causal_mask, scaled_dot_product_attention)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_attend_returns_the_output_the_masked_scores_and_the_weights_of_pytorchs_formula():
    q, k, v = randn(2, 3, 5, 4, seed=1), randn(2, 3, 6, 4, seed=2), randn(2, 3, 6, 7, seed=3)
    keep = causal_mask(5, 6)
    out, scores, weights = attend(q, k, v, mask=keep, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3))
    expected_scores = (q @ k.mT * 0.3).masked_fill(~keep, float("-inf"))  # (2, 3, 5, 6), masked
    torch.testing.assert_close(scores, expected_scores)
    torch.testing.assert_close(weights, torch.softmax(expected_scores, dim=-1))
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, keep, scale=0.3), out)


def test_attend_takes_its_options_by_keyword_and_names_bad_ones():
    q = randn(1, 4, 8)
    with pytest.raises(TypeError):
        attend(q, q, q, causal_mask(4))  # mask= must be written out
    with pytest.raises(ValueError, match=r"dropout_p must lie in \[0, 1\), got 1.5"):
        attend(q, q, q, dropout_p=1.5)
    with pytest.raises(ValueError, match=r"mask of shape \[3, 3\] cannot broadcast to the scores' shape \[1, 4, 4\]"):
        attend(q, q, q, mask=causal_mask(3))


def test_attention_without_the_skip_through_v_returns_the_projection_alone():
    with_skip = Attention(6, 8, num_heads=2).double()
    without = Attention(6, 8, num_heads=2, skip_through_v=False).double()
    without.load_state_dict(with_skip.state_dict())  # the same parameters: the option adds none
    x = randn(2, 5, 6)
    out, inter = without(x, mask=causal_mask(5), return_intermediates=True)
    full, full_inter = with_skip(x, mask=causal_mask(5), return_intermediates=True)
    assert "skip" not in inter and list(inter)[-1] == "out"
    torch.testing.assert_close(out, inter["projected"])
    torch.testing.assert_close(full - full_inter["skip"], out)
    assert "skip_through_v=False" in repr(without)


def test_projection_biases_are_set_apart():
    layer = Attention(6, 8, num_heads=2, qkv_bias=True, proj_bias=False)
    assert layer.qkv.bias is not None and layer.proj.bias is None
    assert Attention(6, 8).qkv.bias is None and Attention(6, 8).proj.bias is not None  # defaults unchanged
    mha = MultiHeadAttention(8, 2, qkv_bias=False, proj_bias=True)
    assert [p.bias is None for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj)] == [True, True, True, False]
    mha = MultiHeadAttention(8, 2, bias=False)  # bias= still sets all four
    assert all(p.bias is None for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj))


def test_to_torch_refuses_biases_that_pytorchs_one_flag_cannot_hold():
    with pytest.raises(ValueError, match=r"one bias flag for all four projections; .*qkv_bias=False and proj_bias=True"):
        MultiHeadAttention(8, 2, qkv_bias=False, proj_bias=True).to_torch()


@pytest.mark.parametrize("options", [dict(proj_bias=False), dict(skip_through_v=False), dict(qkv_bias=True)])
def test_concat_heads_copy_keeps_the_options_and_the_numbers(options):
    layer = Attention(6, 8, num_heads=2, **options).double()
    copy = ConcatHeadsAttention.from_attention(layer)
    x = randn(2, 5, 6)
    torch.testing.assert_close(copy(x, mask=causal_mask(5)), layer(x, mask=causal_mask(5)))
    assert copy.skip_through_v == layer.skip_through_v and (copy.proj.bias is None) == (layer.proj.bias is None)


def test_attention_is_order_blind_and_says_so_when_given_positions():
    with pytest.raises(ValueError, match=r"positions is for layers that use positions, such as RotaryAttention; "
                                         r"Attention is order-blind"):
        Attention(6, 8, num_heads=2)(torch.zeros(1, 3, 6), positions=torch.arange(3))


def test_rotary_attention_is_attention_plus_one_step_with_masked_scores_like_attention():
    assert RotaryAttention.forward is Attention.forward  # the formula is written once
    rotary = RotaryAttention(6, 8, num_heads=2).double()
    _, inter = rotary(randn(2, 5, 6), mask=causal_mask(5), return_intermediates=True)
    assert torch.isneginf(inter["scores"][..., 0, 1:]).all()  # masked, as Attention's "scores" are
    manual = (inter["q_rot"] @ inter["k_rot"].mT * rotary.scale).masked_fill(~causal_mask(5), float("-inf"))
    torch.testing.assert_close(inter["scores"], manual)
    assert list(inter)[:8] == ["x", "qkv", "qkv_heads", "q", "k", "v", "q_rot", "k_rot"]


def test_rotary_attention_takes_the_layer_options_too():
    rotary = RotaryAttention(6, 8, num_heads=2, proj_bias=False, skip_through_v=False).double()
    out, inter = rotary(randn(1, 4, 6), return_intermediates=True)
    assert rotary.proj.bias is None and "skip" not in inter
    torch.testing.assert_close(out, inter["projected"])
