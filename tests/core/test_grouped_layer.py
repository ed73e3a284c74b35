"""GroupedQueryAttention: grouped-query heads with rotary positions, whole or token by token with a KV cache."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import (GroupedQueryAttention, KVCache, MultiHeadAttention, apply_rope, cached_attention_step,
                          causal_mask, repeat_kv_heads, scaled_dot_product_attention, split_heads)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_with_as_many_key_value_heads_as_query_heads_and_no_rope_it_is_multi_head_attention():
    mha = MultiHeadAttention(12, 3, bias=True).double().eval()
    gqa = GroupedQueryAttention(12, 3, 3, rope=False, bias=True).double()
    gqa.load_state_dict(mha.state_dict())  # the same names: q_proj, k_proj, v_proj, out_proj
    x = randn(2, 5, 12)
    torch.testing.assert_close(gqa(x, mask=causal_mask(5)), mha(x, mask=causal_mask(5)))


def test_its_steps_are_rotated_queries_and_keys_and_shared_key_value_heads():
    gqa = GroupedQueryAttention(16, 4, 2, bias=False).double()
    x, positions = randn(2, 6, 16), torch.tensor([3, 4, 5, 9, 10, 11])
    q = apply_rope(split_heads(gqa.q_proj(x), 4), positions)  # (2, 4, 6, 4)
    k = apply_rope(split_heads(gqa.k_proj(x), 2), positions)  # (2, 2, 6, 4)
    v = split_heads(gqa.v_proj(x), 2)  # (2, 2, 6, 4)
    heads = scaled_dot_product_attention(q, repeat_kv_heads(k, 4), repeat_kv_heads(v, 4), causal_mask(6))
    expected = gqa.out_proj(heads.transpose(1, 2).reshape(2, 6, 16))
    out, inter = gqa(x, mask=causal_mask(6), positions=positions, return_intermediates=True)
    torch.testing.assert_close(out, expected)
    assert inter["k"].shape == (2, 2, 6, 4) and inter["q"].shape == (2, 4, 6, 4)


@pytest.mark.parametrize("rope, num_kv_heads", [(True, 1), (True, 2), (False, 2)])
def test_the_cached_steps_give_the_rows_of_the_causal_layer(rope, num_kv_heads):
    gqa = GroupedQueryAttention(16, 4, num_kv_heads, rope=rope, bias=True).double()
    x = randn(2, 7, 16, seed=3)
    whole = gqa(x, mask=causal_mask(7))
    cache = KVCache(max_tokens=7)
    prefill = cached_attention_step(gqa, x[:, :3], cache)
    steps = [cached_attention_step(gqa, x[:, t:t + 1], cache) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat([prefill, *steps], dim=1), whole)
    assert cache.k.shape == (2, num_kv_heads, 7, 4)


@pytest.mark.parametrize("make, message", [
    (lambda: GroupedQueryAttention(16, 4, 3), r"num_heads=4 query heads cannot be shared out evenly over 3"),
    (lambda: GroupedQueryAttention(16, 3, 1), r"d_model=16 is not divisible by num_heads=3"),
    (lambda: GroupedQueryAttention(12, 4, 2), r"head_dim must be an even number .* got 3 \(d_model=12 / num_heads=4\)"),
    (lambda: GroupedQueryAttention(16, 4, 0), r"num_kv_heads must be at least 1, got 0"),
    (lambda: GroupedQueryAttention(16, 4, 2, pairing="odd"), r"pairing must be one of \['half', 'interleaved'\]"),
])
def test_bad_sizes_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_inputs_name_the_argument_and_the_shape():
    gqa = GroupedQueryAttention(16, 4, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, d_model=16\), got \[2, 5, 12\]"):
        gqa(torch.zeros(2, 5, 12))
    with pytest.raises(ValueError, match=r"positions must give one position per row of x.*positions has shape \[4\]"):
        gqa(torch.zeros(2, 5, 16), positions=torch.arange(4))
    with pytest.raises(ValueError, match=r"positions is for rope=True"):
        GroupedQueryAttention(16, 4, 2, rope=False)(torch.zeros(1, 3, 16), positions=torch.arange(3))
    with pytest.raises(ValueError, match=r"x_new must have shape \(B, N, d_model=16\), got \[1, 1, 8\]"):
        cached_attention_step(gqa, torch.zeros(1, 1, 8), KVCache(4))
    with pytest.raises(TypeError, match=r"cache must be an attn_helpers.KVCache, got dict"):
        cached_attention_step(gqa, torch.zeros(1, 1, 16), {})
