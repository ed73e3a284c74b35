"""LatentAttention (13 · The cache that does not grow) equals transformers' DeepseekV3Attention: both forms (keys
rebuilt, and absorbed), with and without a low-rank query, both rotary pairings, odd head counts, with causal and
padding masks; its cache is kv_lora_rank + qk_rope_head_dim numbers per token; bad inputs are named."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import LatentAttention, causal_mask, mask_to_additive, padding_mask

transformers = pytest.importorskip("transformers")
from transformers import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (  # noqa: E402
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)


def deepseek_layer(*, heads=3, q_lora_rank=None, interleave=True, bias=False, seed=0, **sizes):
    config = DeepseekV3Config(
        hidden_size=sizes.get("hidden", 40), num_attention_heads=heads, num_key_value_heads=heads,
        kv_lora_rank=sizes.get("rank", 16), q_lora_rank=q_lora_rank, qk_nope_head_dim=sizes.get("nope", 8),
        qk_rope_head_dim=sizes.get("rope", 4), v_head_dim=sizes.get("v", 6), rope_interleave=interleave,
        attention_bias=bias, num_hidden_layers=1, rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    layer = DeepseekV3Attention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        for p in layer.parameters():  # random weights everywhere, the norms' scales included
            p.normal_(0.0, 0.3).add_(0.5 if p.ndim == 1 else 0.0)
    return config, layer


def reference(config, layer, x, keep):
    positions = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)  # (B, N)
    additive = mask_to_additive(keep, dtype=x.dtype)  # (B, N, N) or (N, N)
    additive = additive[:, None] if additive.ndim == 3 else additive[None, None]  # (B or 1, 1, N, N)
    with torch.no_grad():
        out, _ = layer(x, position_embeddings=DeepseekV3RotaryEmbedding(config)(x, positions), attention_mask=additive)
    return out


@pytest.mark.parametrize("heads", [1, 3, 5])
@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("interleave", [True, False])
def test_equal_to_deepseek_v3_attention_in_both_forms(heads, q_lora_rank, interleave):
    config, layer = deepseek_layer(heads=heads, q_lora_rank=q_lora_rank, interleave=interleave, seed=heads)
    ours = LatentAttention.from_transformers(layer)
    x = torch.randn(2, 7, 40, dtype=torch.float64)
    keep = causal_mask(7)
    expected = reference(config, layer, x, keep)
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask=keep), expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(ours(x, mask=keep, absorbed=True), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_with_padding_bias_and_other_sizes(seed):
    config, layer = deepseek_layer(heads=3, q_lora_rank=10, bias=True, seed=seed, hidden=24, rank=9, nope=6, rope=6, v=5)
    ours = LatentAttention.from_transformers(layer)
    x = torch.randn(3, 5, 24, dtype=torch.float64)
    keep = causal_mask(5)[None] & padding_mask(torch.tensor([5, 3, 4]), 5)  # (B, N, N)
    expected = reference(config, layer, x, keep)
    with torch.no_grad():
        for absorbed in (False, True):
            got = ours(x, mask=keep, absorbed=absorbed)
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_the_cache_is_one_latent_and_one_rotary_key_per_token():
    _, layer = deepseek_layer(heads=5)
    ours = LatentAttention.from_transformers(layer)
    x = torch.randn(2, 9, 40, dtype=torch.float64)
    c, k_rope = ours.compress(x)
    assert list(c.shape) == [2, 9, 16] and list(k_rope.shape) == [2, 9, 4]
    assert ours.cache_numbers_per_token() == 16 + 4
    k, v = ours.expand(c, k_rope)
    assert list(k.shape) == [2, 5, 9, 12] and list(v.shape) == [2, 5, 9, 6]
    assert torch.equal(k[:, 0, :, 8:], k[:, 4, :, 8:])  # one rotary key shared by every head


def test_absorbed_form_equals_rebuilt_keys_in_float64():
    torch.manual_seed(3)
    layer = LatentAttention(32, 4, kv_lora_rank=10, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
                            q_lora_rank=8, bias=True).double()
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, mask=causal_mask(6), absorbed=True), layer(x, mask=causal_mask(6)),
                                   rtol=0, atol=1e-12)


def test_bad_inputs_are_named():
    layer = LatentAttention(16, 2, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, d_model=16\), got \[1, 3, 12\]"):
        layer(torch.randn(1, 3, 12))
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        LatentAttention(16, 2, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=3, v_head_dim=4)
    with pytest.raises(ValueError, match="kv_lora_rank must be at least 1"):
        LatentAttention(16, 2, kv_lora_rank=0, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)
    with pytest.raises(TypeError, match="layer must be a transformers DeepseekV3Attention"):
        LatentAttention.from_transformers(torch.nn.Linear(2, 2))


def test_rope_scaling_is_refused():
    config, layer = deepseek_layer()
    config.rope_parameters = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 500.0,
                              "original_max_position_embeddings": 64}
    with pytest.raises(ValueError, match="rope_type='yarn'"):
        LatentAttention.from_transformers(layer)
