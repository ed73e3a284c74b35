"""core: the math a learner reads, in lesson order. Imports torch only; every forward is shaped like its formula.

Six chapters, each importing only the ones above it:

    arguments   argument checks with learner-facing messages (``check_heads``: the divisibility message)
    masks       causal, sliding-window and padding masks, the one mask convention (True = may attend) (03, 12)
    attention   scores, the attention formula and heads: ``attend``, ``split_heads`` (02-05; soft-capping, sinks: 12)
    layers      watching a forward pass (``Traceable``), MultiHeadAttention, Attention, TransformerBlock (05-07)
    positions   order-blindness, learned, sinusoidal and rotary positions, RotaryAttention (10); ALiBi (12)
    efficient   tiled attention, the KV cache, grouped-query attention (09, 12); latent and linear attention (13)
"""

from __future__ import annotations

from .arguments import broadcast_shape, check_heads, check_kv_heads
from .masks import (apply_mask, blocked_to_keep, causal_mask, mask_for_heads, mask_to_additive, padding_mask,
                    sliding_window_mask)
from .attention import (attend, attention_scores, merge_heads, scaled_dot_product_attention, softcap_scores,
                        softmax_with_sinks, split_heads)
from .layers import (ACTIVATIONS, Attention, AttentionHead, ConcatHeadsAttention, Intermediates, MultiHeadAttention,
                     Observer, Traceable, TransformerBlock)
from .positions import (DEFAULT_BASE, PAIRINGS, LearnedPositions, RotaryAttention, alibi_bias, alibi_slopes,
                        apply_rope, equivariance_gap, permute_tokens, rope_frequencies, rope_pair_scores,
                        sinusoidal_encoding)
from .efficient import (TRANSFORMERS_LAYERS, GroupedQueryAttention, KVCache, LatentAttention, cached_attention_step,
                        elu_feature_map, gated_delta_chunk, gated_delta_rule, gated_delta_step, grouped_query_attention,
                        linear_attention, linear_attention_step, online_softmax, online_softmax_update,
                        repeat_kv_heads, tiled_attention)

__all__ = [
    "broadcast_shape", "check_heads", "check_kv_heads",
    "causal_mask", "sliding_window_mask", "padding_mask", "blocked_to_keep", "mask_to_additive", "apply_mask",
    "mask_for_heads",
    "attention_scores", "attend", "scaled_dot_product_attention", "split_heads", "merge_heads", "softcap_scores",
    "softmax_with_sinks",
    "Intermediates", "Observer", "Traceable", "MultiHeadAttention", "Attention", "AttentionHead",
    "ConcatHeadsAttention", "TransformerBlock", "ACTIVATIONS",
    "permute_tokens", "equivariance_gap", "LearnedPositions", "sinusoidal_encoding", "PAIRINGS", "DEFAULT_BASE",
    "rope_frequencies", "apply_rope", "rope_pair_scores", "RotaryAttention", "alibi_slopes", "alibi_bias",
    "online_softmax_update", "online_softmax", "tiled_attention", "KVCache", "cached_attention_step", "repeat_kv_heads",
    "grouped_query_attention", "GroupedQueryAttention", "TRANSFORMERS_LAYERS", "LatentAttention", "elu_feature_map",
    "linear_attention", "linear_attention_step", "gated_delta_rule", "gated_delta_step", "gated_delta_chunk",
]
