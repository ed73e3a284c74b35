"""Lesson 07's counting functions (attn_helpers/lab/measure.py): ``attention_parameters`` equals what the layer
holds, ``attention_flops`` PyTorch's FLOP counter on the matrix products; bad sizes are named."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attn_helpers.core import Attention
from attn_helpers.lab import attention_flops, attention_parameters

MATMUL_STEPS = ("qkv projection", "scores (q @ k^T)", "weights @ v", "output projection")


@pytest.mark.parametrize("dim, chan, num_heads, qkv_bias", [(49, 64, 4, False), (49, 64, 1, True), (8, 12, 3, True),
                                                            (200, 200, 5, False), (1, 1, 1, False)])
def test_attention_parameters_equal_what_the_module_holds(dim, chan, num_heads, qkv_bias):
    counted = sum(p.numel() for p in Attention(dim, chan, num_heads, qkv_bias=qkv_bias).parameters())
    assert sum(attention_parameters(dim, chan, qkv_bias=qkv_bias).values()) == counted


def test_parameter_count_does_not_depend_on_the_number_of_heads():
    counts = {sum(p.numel() for p in Attention(49, 64, h).parameters()) for h in (1, 2, 4, 8, 16, 32, 64)}
    assert counts == {sum(attention_parameters(49, 64).values())}


def test_attention_parameters_by_part():
    assert attention_parameters(49, 64) == {"qkv weight": 9408, "qkv bias": 0, "proj weight": 4096, "proj bias": 64}
    assert attention_parameters(49, 64, qkv_bias=True)["qkv bias"] == 192


@pytest.mark.parametrize("B, N, dim, chan, num_heads", [(13, 100, 49, 64, 4), (2, 7, 5, 6, 3), (1, 1, 1, 1, 1),
                                                        (3, 32, 200, 200, 5)])
def test_attention_flops_matrix_products_equal_pytorchs_flop_counter(B, N, dim, chan, num_heads):
    layer = Attention(dim, chan, num_heads, qkv_bias=True)
    with FlopCounterMode(display=False) as counter:
        layer(torch.randn(B, N, dim))
    flops = attention_flops(B, N, dim, chan, num_heads, qkv_bias=True)
    assert sum(flops[s] for s in MATMUL_STEPS) == counter.get_total_flops()


def test_attention_flops_steps_and_element_wise_terms():
    flops = attention_flops(2, 10, 6, 8, 2, qkv_bias=True)
    assert list(flops) == ["qkv projection", "scores (q @ k^T)", "scale", "softmax", "weights @ v",
                           "output projection", "bias adds", "skip add"]
    assert flops["scale"] == 2 * 2 * 10 * 10
    assert flops["softmax"] == 5 * flops["scale"]
    assert flops["bias adds"] == 2 * 10 * 8 + 2 * 10 * 3 * 8
    assert flops["skip add"] == 2 * 10 * 8
    assert attention_flops(2, 10, 6, 8, 2)["bias adds"] == 2 * 10 * 8


def test_more_heads_change_only_the_element_wise_score_steps():
    one, many = attention_flops(13, 100, 49, 64, 1), attention_flops(13, 100, 49, 64, 16)
    changed = {step for step in one if one[step] != many[step]}
    assert changed == {"scale", "softmax"}


@pytest.mark.parametrize("kwargs, words", [
    (dict(batch=0, tokens=5, dim=4, chan=8, num_heads=2), "batch"),
    (dict(batch=1, tokens=-1, dim=4, chan=8, num_heads=2), "tokens"),
    (dict(batch=1, tokens=5, dim=4, chan=8, num_heads=3), "num_heads=3"),
    (dict(batch=1, tokens=5, dim=4.0, chan=8, num_heads=2), "dim"),
])
def test_attention_flops_rejects_bad_sizes_naming_the_argument(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        attention_flops(**kwargs)


def test_attention_parameters_rejects_bad_arguments():
    with pytest.raises(ValueError, match="chan"):
        attention_parameters(4, 0)
    with pytest.raises(TypeError, match="qkv_bias"):
        attention_parameters(4, 8, qkv_bias="yes")
