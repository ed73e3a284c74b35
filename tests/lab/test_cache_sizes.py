"""The caches of 13 · The cache that does not grow, counted: a latent cache, a fixed linear-attention state and the
two published models (DeepSeek-V3, Qwen3-Next), checked against the layers' own tensors and their formulas."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import LatentAttention, lab


def test_latent_cache_bytes_is_the_bytes_of_the_cached_tensors():
    layer = LatentAttention(24, 3, kv_lora_rank=10, qk_nope_head_dim=4, qk_rope_head_dim=6, v_head_dim=4).half()
    c, k_rope = layer.compress(torch.randn(2, 7, 24).half())
    held = c.numel() * c.element_size() + k_rope.numel() * k_rope.element_size()
    assert held == lab.latent_cache_bytes(num_layers=1, kv_lora_rank=10, qk_rope_head_dim=6, seq_len=7, batch=2,
                                          dtype_bytes=2)


def test_published_models():
    assert lab.model_cache_bytes("DeepSeek-V3", seq_len=1) == 61 * 576 * 2
    per_token = lab.model_cache_bytes("Qwen3-Next", seq_len=2) - lab.model_cache_bytes("Qwen3-Next", seq_len=1)
    assert per_token == 12 * 2 * 2 * 256 * 2  # 12 attention layers, K and V, 2 heads of 256, 2 bytes
    fixed = lab.model_cache_bytes("Qwen3-Next", seq_len=1) - per_token
    assert fixed == 36 * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 4) * 2
    for name, sizes in lab.MODEL_CACHE_SIZES.items():  # the sliders' sizes are whole and share evenly
        assert sizes["num_heads"] % sizes["num_kv_heads"] == 0, name


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="kv_lora_rank must be at least 1"):
        lab.latent_cache_bytes(num_layers=1, kv_lora_rank=0, qk_rope_head_dim=4, seq_len=3)
    with pytest.raises(ValueError, match="conv_numbers must be an int >= 0"):
        lab.linear_state_bytes(num_layers=1, num_heads=1, key_head_dim=2, value_head_dim=2, conv_numbers=-1)
    with pytest.raises(ValueError, match="name must be one of"):
        lab.model_cache_bytes("GPT-5", seq_len=3)
