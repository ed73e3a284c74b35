"""Lesson 12's steps, each equal to the ``transformers`` code it came from: the sliding-window mask, logit
soft-capping, attention sinks, QK-norm and ALiBi, and ``GroupedQueryAttention.from_transformers`` for the
attention layers of Llama, Mistral, Qwen3, OLMo 2, Gemma 2 and gpt-oss (tiny configs, random weights).

Tolerances: our side computes in float64. Where the reference also computes in float64 (masks, ALiBi offsets,
the sink softmax) the tolerance is ``1e-12``; the layers' references run their softmax (Gemma 2, Qwen3, OLMo 2,
Mistral), their RMSNorm (Qwen3, OLMo 2) or their rotation angles (all) in float32, and Bloom its slopes, so those
comparisons use ``1e-5`` (float32's resolution, about 1.2e-7, times the few units the values have).
"""

from __future__ import annotations

import pytest
import torch
from transformers.masking_utils import sliding_window_causal_mask_function
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.gemma2.configuration_gemma2 import Gemma2Config
from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention, Gemma2RotaryEmbedding
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward as gemma2_eager
from transformers.models.gpt_oss.configuration_gpt_oss import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward as gpt_oss_eager
from transformers.models.llama.configuration_llama import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.mistral.configuration_mistral import MistralConfig
from transformers.models.mistral.modeling_mistral import MistralAttention, MistralRotaryEmbedding
from transformers.models.olmo2.configuration_olmo2 import Olmo2Config
from transformers.models.olmo2.modeling_olmo2 import Olmo2Attention, Olmo2RotaryEmbedding
from transformers.models.qwen3.configuration_qwen3 import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding

from attn_helpers import GroupedQueryAttention, causal_mask, mask_to_additive
from attn_helpers.core import (alibi_bias, alibi_slopes, attend, grouped_query_attention, sliding_window_mask,
                               softcap_scores, softmax_with_sinks)

TIGHT = dict(rtol=0, atol=1e-12)  # both sides in float64
FLOAT32_INSIDE = dict(rtol=0, atol=1e-5)  # the reference rounds to float32 inside (softmax, norm, angles, slopes)


def randn(*shape: int, seed: int = 0, std: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * std


class Heads(torch.nn.Module):
    """What the references' ``eager_attention_forward`` reads from its ``module``."""

    def __init__(self, groups: int = 1, sinks: torch.Tensor | None = None) -> None:
        super().__init__()
        self.num_key_value_groups, self.head_dim = groups, None
        if sinks is not None:
            self.sinks = torch.nn.Parameter(sinks)
        self.eval()


# ------------------------------------------------------------------------------------------- the mask

@pytest.mark.parametrize("n_q, n_k, window", [(9, 9, 3), (7, 7, 1), (6, 6, 10), (5, 8, 2), (8, 5, 4)])
def test_sliding_window_mask_is_transformers_rule(n_q, n_k, window):
    rule = sliding_window_causal_mask_function(window)
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]  # the rule takes index tensors
    expected = rule(torch.tensor(0), torch.tensor(0), i, j)  # (n_q, n_k)
    assert torch.equal(sliding_window_mask(n_q, n_k, window=window), expected)


def test_a_window_as_long_as_the_sequence_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(6, window=6), causal_mask(6))
    assert torch.equal(sliding_window_mask(6, window=60), causal_mask(6))


@pytest.mark.parametrize("window", [0, -2, 2.5, True, None])
def test_a_bad_window_is_named(window):
    with pytest.raises((ValueError, TypeError), match="window"):
        sliding_window_mask(5, window=window)


# ------------------------------------------------------------------------------------------- softcap

def test_softcap_is_gemma2s_eager_attention():
    q, k, v = randn(2, 4, 6, 8, seed=1, std=3.0), randn(2, 4, 6, 8, seed=2, std=3.0), randn(2, 4, 6, 8, seed=3)
    additive = mask_to_additive(sliding_window_mask(6, window=3), dtype=torch.float64)[None, None]
    out, scores, weights = attend(q, k, v, mask=additive, scale=0.25, softcap=5.0)
    their_out, their_weights = gemma2_eager(Heads(), q, k, v, additive, scaling=0.25, softcap=5.0)
    torch.testing.assert_close(weights, their_weights, **FLOAT32_INSIDE)  # Gemma 2 softmaxes in float32
    torch.testing.assert_close(out, their_out.transpose(1, 2), **FLOAT32_INSIDE)
    assert scores[torch.isfinite(scores)].abs().max() < 5.0  # every kept score within the cap


def test_softcap_barely_changes_small_scores_and_squashes_large_ones():
    small = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    assert (softcap_scores(small, 50.0) - small).abs().max() < 2e-3  # t - cap tanh(t/cap) ≈ t³ / (3 cap²)
    assert softcap_scores(torch.tensor([500.0], dtype=torch.float64), 50.0).item() < 50.0


# ------------------------------------------------------------------------------------------- sinks

def test_sinks_are_gpt_oss_eager_attention_with_odd_head_counts_and_a_masked_row():
    H = 3
    q, k, v = randn(2, H, 5, 4, seed=4), randn(2, H, 5, 4, seed=5), randn(2, H, 5, 4, seed=6)
    sinks = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    keep = causal_mask(5).clone()
    keep[2] = False  # a row with every key masked
    additive = torch.zeros(5, 5, dtype=torch.float64).masked_fill(~keep, torch.finfo(torch.float64).min)[None, None]
    out, _, weights = attend(q, k, v, mask=keep, scale=0.5, sinks=sinks)
    their_out, their_weights = gpt_oss_eager(Heads(sinks=sinks), q, k, v, additive, scaling=0.5)
    torch.testing.assert_close(weights, their_weights, **TIGHT)  # gpt-oss's eager softmax keeps the dtype
    torch.testing.assert_close(out, their_out.transpose(1, 2), **TIGHT)
    assert torch.equal(weights[:, :, 2], torch.zeros(2, H, 5))  # the masked row: zeros, not NaN
    assert (weights.sum(-1)[:, :, [0, 1, 3, 4]] < 1).all()  # every other row gives some weight to the sink


def test_the_sink_softmax_is_the_softmax_with_one_more_logit_dropped():
    scores, sinks = randn(2, 4, 3, 5, seed=7), randn(4, seed=8)
    by_hand = torch.exp(scores) / (torch.exp(sinks)[:, None, None] + torch.exp(scores).sum(-1, keepdim=True))
    torch.testing.assert_close(softmax_with_sinks(scores, sinks), by_hand, **TIGHT)


def test_bad_sinks_are_named():
    with pytest.raises(ValueError, match=r"sinks of shape \[3\]"):
        softmax_with_sinks(randn(2, 4, 3, 5), randn(3))
    with pytest.raises(TypeError, match="sinks must be a floating tensor"):
        softmax_with_sinks(randn(2, 4, 3, 5), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"sinks must hold one logit per query head, shape \(4,\)"):
        grouped_query_attention(randn(1, 4, 3, 8), randn(1, 2, 3, 8), randn(1, 2, 3, 8), sinks=randn(2))


def test_grouped_sinks_follow_their_query_head():
    q, k, v, sinks = randn(2, 6, 5, 4, seed=9), randn(2, 2, 5, 4, seed=10), randn(2, 2, 5, 4, seed=11), randn(6)
    repeated = attend(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), mask=causal_mask(5),
                      sinks=sinks, softcap=2.0)[0]
    grouped = grouped_query_attention(q, k, v, causal_mask(5), sinks=sinks, softcap=2.0)
    torch.testing.assert_close(grouped, repeated, **TIGHT)


# ------------------------------------------------------------------------------------------- ALiBi

@pytest.mark.parametrize("num_heads", [1, 2, 3, 5, 6, 8, 12, 16])
def test_alibi_slopes_are_blooms(num_heads):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    # Bloom computes its slopes in float32: 1e-7 relative
    torch.testing.assert_close(alibi_slopes(num_heads), _get_alibi_slopes(num_heads, "cpu").double(), rtol=1e-6, atol=0)


def test_alibi_slopes_for_eight_heads_are_the_papers():
    expected = torch.tensor([2.0 ** -k for k in range(1, 9)], dtype=torch.float64)  # Press et al., section 3
    torch.testing.assert_close(alibi_slopes(8), expected, **TIGHT)


@pytest.mark.parametrize("num_heads", [3, 4, 6])
def test_alibi_bias_equals_blooms_slope_times_key_after_a_causal_softmax(num_heads):
    n = 7
    scores = randn(1, num_heads, n, n, seed=12)
    ours = attend(scores, torch.eye(n, dtype=torch.float64).expand(1, num_heads, n, n), torch.eye(n, dtype=torch.float64),
                  mask=alibi_bias(num_heads, n) + mask_to_additive(causal_mask(n), dtype=torch.float64), scale=1.0)[2]
    bloom = build_alibi_tensor(torch.ones(1, n), num_heads, torch.float64).reshape(1, num_heads, 1, n)  # slope * j
    theirs = torch.softmax((scores + bloom).masked_fill(~causal_mask(n), float("-inf")), dim=-1)
    torch.testing.assert_close(ours, theirs, **FLOAT32_INSIDE)
    assert not torch.allclose(alibi_bias(num_heads, n), bloom.expand(1, num_heads, n, n)[0])  # not equal before it


def test_alibi_bias_shape_and_values():
    bias = alibi_bias(2, 3, 4)
    assert bias.shape == (2, 3, 4)
    torch.testing.assert_close(bias[0, 2], torch.tensor([-0.125, -0.0625, 0.0, 0.0625], dtype=torch.float64), **TIGHT)


# ------------------------------------------------------------------------------------------- the layers

def _randomise(layer: torch.nn.Module, seed: int, std: float = 0.3) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std)
    return layer.eval()


def _config(config_class, **sizes):
    config = config_class(num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          **sizes)
    config._attn_implementation = "eager"
    return config


LAYERS = {
    "llama": (LlamaConfig, LlamaAttention, LlamaRotaryEmbedding, dict(hidden_size=40, num_attention_heads=5,
                                                                      num_key_value_heads=1, head_dim=8)),
    "mistral": (MistralConfig, MistralAttention, MistralRotaryEmbedding, dict(
        hidden_size=48, num_attention_heads=6, num_key_value_heads=2, sliding_window=3)),
    "qwen3": (Qwen3Config, Qwen3Attention, Qwen3RotaryEmbedding, dict(
        hidden_size=48, num_attention_heads=6, num_key_value_heads=3, head_dim=10)),
    "olmo2": (Olmo2Config, Olmo2Attention, Olmo2RotaryEmbedding, dict(
        hidden_size=36, num_attention_heads=3, num_key_value_heads=3)),
    "gemma2 local": (Gemma2Config, Gemma2Attention, Gemma2RotaryEmbedding, dict(
        hidden_size=48, num_attention_heads=6, num_key_value_heads=2, head_dim=12, query_pre_attn_scalar=20,
        attn_logit_softcapping=2.0, sliding_window=4)),
    "gpt-oss": (GptOssConfig, GptOssAttention, GptOssRotaryEmbedding, dict(
        hidden_size=40, num_attention_heads=6, num_key_value_heads=2, head_dim=8, sliding_window=3)),
}


def _reference(name: str, layer_idx: int = 0, seed: int = 20):
    config_class, layer_class, rotary_class, sizes = LAYERS[name]
    config = _config(config_class, **sizes)
    layer = _randomise(layer_class(config, layer_idx=layer_idx).double(), seed)
    return layer, rotary_class(config)


def _their_forward(layer, rotary, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    additive = mask_to_additive(keep, dtype=x.dtype)[None, None]  # (1, 1, N, N)
    positions = torch.arange(x.shape[1])[None]  # (1, N)
    out, _ = layer(x, position_embeddings=rotary(x, positions), attention_mask=additive)
    return out


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("mask", ["causal", "window 3", "window longer than N"])
def test_from_transformers_equals_the_layer(name, mask):
    reference, rotary = _reference(name)
    ours = GroupedQueryAttention.from_transformers(reference)
    x = randn(2, 7, reference.config.hidden_size, seed=21)
    keep = {"causal": causal_mask(7), "window 3": sliding_window_mask(7, window=3),
            "window longer than N": sliding_window_mask(7, window=50)}[mask]
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask=keep), _their_forward(reference, rotary, x, keep), **FLOAT32_INSIDE)


@pytest.mark.parametrize("name, expected", [
    ("llama", "num_heads=5, num_kv_heads=1, rope base=10000, pairing=half"),
    ("mistral", "window=3"),
    ("qwen3", "qk_norm=head"),
    ("olmo2", "qk_norm=projection"),
    ("gemma2 local", "scale=0.2236, softcap=2.0, window=4"),
    ("gpt-oss", "sinks=True, window=3"),
])
def test_from_transformers_copies_each_layers_steps(name, expected):
    ours = GroupedQueryAttention.from_transformers(_reference(name)[0])
    assert expected in ours.extra_repr()
    assert ours.q_proj.weight.dtype == torch.float64


def test_gemma2_alternates_local_and_global_layers():
    local, rotary = _reference("gemma2 local", layer_idx=0)
    global_, _ = _reference("gemma2 local", layer_idx=1)
    assert GroupedQueryAttention.from_transformers(local).window == 4
    assert GroupedQueryAttention.from_transformers(global_).window is None
    x = randn(1, 9, 48, seed=22)
    with torch.no_grad():
        ours = GroupedQueryAttention.from_transformers(global_)(x, mask=causal_mask(9))
        torch.testing.assert_close(ours, _their_forward(global_, rotary, x, causal_mask(9)), **FLOAT32_INSIDE)


def test_qk_norm_keeps_the_scores_the_same_size_as_the_weights_grow():
    plain = GroupedQueryAttention(32, 4, 4, rope=False).double()
    normed = GroupedQueryAttention(32, 4, 4, rope=False, qk_norm="head").double()
    normed.load_state_dict(plain.state_dict(), strict=False)
    x = randn(1, 6, 32, seed=23)
    sizes = []
    for layer in (plain, normed):
        with torch.no_grad():
            small = layer(x, return_intermediates=True)[1]
            for proj in (layer.q_proj, layer.k_proj):
                proj.weight.mul_(10.0)
            large = layer(x, return_intermediates=True)[1]
        sizes.append(((large["q"] @ large["k"].mT).abs().max() / (small["q"] @ small["k"].mT).abs().max()).item())
    assert sizes[0] == pytest.approx(100.0, rel=1e-9)  # the scores grow with the square of the weights
    assert sizes[1] == pytest.approx(1.0, abs=1e-3)  # normalised q and k: the same size


def test_from_transformers_refuses_other_layers_and_other_ropes():
    with pytest.raises(TypeError, match="layer must be one of the transformers attention layers"):
        GroupedQueryAttention.from_transformers(torch.nn.Linear(2, 2))
    config = GptOssConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, head_dim=8)  # yarn rope
    with pytest.raises(ValueError, match="rope_type='yarn'"):
        GroupedQueryAttention.from_transformers(GptOssAttention(config, layer_idx=0))


def test_bad_layer_options_are_named():
    with pytest.raises(ValueError, match="qk_norm must be one of"):
        GroupedQueryAttention(16, 2, 2, qk_norm="layer")
    with pytest.raises(ValueError, match="softcap must be None or a number greater than 0"):
        GroupedQueryAttention(16, 2, 2, softcap=0)
    with pytest.raises(ValueError, match="window must be at least 1"):
        GroupedQueryAttention(16, 2, 2, window=0)


def test_the_kv_cache_step_refuses_a_layer_whose_scores_it_would_not_change():
    from attn_helpers import KVCache, cached_attention_step

    with pytest.raises(ValueError, match="scale, softcap and sinks are not applied here"):
        cached_attention_step(GroupedQueryAttention(16, 2, 2, sinks=True), randn(1, 1, 16).float(), KVCache(4))
