"""core: the math a learner reads. Imports torch only; every forward is shaped like its formula.

One module per idea, each importing only the ones above it:

    arguments   argument checks with learner-facing messages (``check_heads``: the divisibility message)
    masks       causal, sliding-window and padding masks, the one mask convention (True = may attend)
    attention   scores and the attention formula (``attend``, ``scaled_dot_product_attention``)
    heads       split and merge heads, repeat key/value heads
    observers   watching a forward pass's intermediates (``Traceable.add_observer``)
    layers      Attention, AttentionHead, ConcatHeadsAttention (lesson 07)
    multihead   MultiHeadAttention (walkthrough 004, = torch.nn.MultiheadAttention)
    positions   order-blindness, sinusoidal, learned and rotary positions, RotaryAttention (lesson 10)
    grouped     grouped-query attention and GroupedQueryAttention (Llama-style, with RoPE)
    kv_cache    KVCache and cached_attention_step (lesson 09)
    tiled       online softmax and tiled attention (lesson 09's loop)
    block       TransformerBlock (pre-LayerNorm, = torch.nn.TransformerEncoderLayer)
    latent      LatentAttention: multi-head latent attention, DeepSeek's MLA (lesson 13)
    linear      linear attention and the gated delta rule: a state of fixed size (lesson 13)
"""

from __future__ import annotations

from .arguments import broadcast_shape, check_heads, check_kv_heads  # noqa: F401
from .masks import (apply_mask, blocked_to_keep, causal_mask, mask_for_heads, mask_to_additive,  # noqa: F401
                    padding_mask, sliding_window_mask)
from .attention import (attend, attention_scores, scaled_dot_product_attention, softcap_scores,  # noqa: F401
                        softmax_with_sinks)
from .heads import merge_heads, repeat_kv_heads, split_heads  # noqa: F401
from .observers import Intermediates, Observer, Traceable  # noqa: F401
from .layers import Attention, AttentionHead, ConcatHeadsAttention  # noqa: F401
from .multihead import MultiHeadAttention  # noqa: F401
from .positions import (DEFAULT_BASE, PAIRINGS, LearnedPositions, RotaryAttention, alibi_bias, alibi_slopes,  # noqa: F401
                        apply_rope,
                        equivariance_gap, permute_tokens, rope_frequencies, rope_pair_scores, sinusoidal_encoding)
from .grouped import TRANSFORMERS_LAYERS, GroupedQueryAttention, grouped_query_attention  # noqa: F401
from .kv_cache import KVCache, cached_attention_step  # noqa: F401
from .tiled import online_softmax, online_softmax_update, tiled_attention  # noqa: F401
from .block import ACTIVATIONS, TransformerBlock  # noqa: F401
from .latent import LatentAttention  # noqa: F401
from .linear import (elu_feature_map, gated_delta_chunk, gated_delta_rule, gated_delta_step, linear_attention,  # noqa: F401
                     linear_attention_step)  # noqa: F401

__all__ = [
    "broadcast_shape", "check_heads", "check_kv_heads", "causal_mask", "sliding_window_mask", "padding_mask", "blocked_to_keep", "mask_to_additive",
    "apply_mask", "mask_for_heads", "attention_scores", "attend", "scaled_dot_product_attention", "softcap_scores",
    "softmax_with_sinks",
    "split_heads", "merge_heads", "repeat_kv_heads", "Intermediates", "Observer", "Traceable", "Attention", "AttentionHead",
    "ConcatHeadsAttention", "MultiHeadAttention", "DEFAULT_BASE", "PAIRINGS", "alibi_slopes", "alibi_bias", "rope_frequencies", "apply_rope",
    "rope_pair_scores", "sinusoidal_encoding", "LearnedPositions", "permute_tokens", "equivariance_gap",
    "RotaryAttention", "grouped_query_attention", "GroupedQueryAttention", "TRANSFORMERS_LAYERS", "KVCache", "cached_attention_step",
    "online_softmax_update", "online_softmax", "tiled_attention", "TransformerBlock", "ACTIVATIONS",
    "LatentAttention", "elu_feature_map", "linear_attention", "linear_attention_step", "gated_delta_rule",
    "gated_delta_step", "gated_delta_chunk",
]
