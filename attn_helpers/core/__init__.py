"""core: the math a learner reads. Imports torch only; every forward is shaped like its formula."""

from __future__ import annotations

from .attention import (  # noqa: F401
    broadcast_shape,
    scaled_dot_product_attention,
    attention_scores,
    causal_mask,
    padding_mask,
    blocked_to_keep,
    mask_to_additive,
    split_heads,
    merge_heads,
    Attention,
    AttentionHead,
    ConcatHeadsAttention,
    MultiHeadAttention,
)
from .efficient import (  # noqa: F401
    online_softmax_update,
    online_softmax,
    tiled_attention,
    KVCache,
    cached_attention_step,
    repeat_kv_heads,
    grouped_query_attention,
)
from .positions import (  # noqa: F401
    PAIRINGS,
    rope_frequencies,
    apply_rope,
    rope_pair_scores,
    sinusoidal_encoding,
    LearnedPositions,
    permute_tokens,
    equivariance_gap,
    RotaryAttention,
)
from .block import (  # noqa: F401
    TransformerBlock,
    ACTIVATIONS,
)

__all__ = [
    "broadcast_shape",
    "scaled_dot_product_attention",
    "attention_scores",
    "causal_mask",
    "padding_mask",
    "blocked_to_keep",
    "mask_to_additive",
    "split_heads",
    "merge_heads",
    "Attention",
    "AttentionHead",
    "ConcatHeadsAttention",
    "MultiHeadAttention",
    "online_softmax_update",
    "online_softmax",
    "tiled_attention",
    "KVCache",
    "cached_attention_step",
    "repeat_kv_heads",
    "grouped_query_attention",
    "PAIRINGS",
    "rope_frequencies",
    "apply_rope",
    "rope_pair_scores",
    "sinusoidal_encoding",
    "LearnedPositions",
    "permute_tokens",
    "equivariance_gap",
    "RotaryAttention",
    "TransformerBlock",
    "ACTIVATIONS",
]
