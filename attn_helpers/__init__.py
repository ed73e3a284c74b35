"""attn_helpers: the small library behind "Attention, step by step".

The package has five rooms, and this file is its face (the names the lessons import):

- ``attn_helpers.core``: the math a learner reads (torch only).
- ``attn_helpers.lab``: what the lessons run on the math (examples, toy tasks, training, measuring tools).
- ``attn_helpers.views``: printouts and pictures (matplotlib loads on first use).
- ``attn_helpers.widgets``: the explorers (ipywidgets loads on first use).
- ``attn_helpers.checks``: the exercise judges (loaded on first use).

``import attn_helpers`` loads torch and ``core``, ``lab`` and the shape printouts; ``views``, ``widgets`` and
``checks`` load when they are first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from .core import (
    Attention,
    AttentionHead,
    ConcatHeadsAttention,
    MultiHeadAttention,
    attention_scores,
    blocked_to_keep,
    causal_mask,
    mask_to_additive,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from .core import (
    GroupedQueryAttention,
    KVCache,
    cached_attention_step,
    grouped_query_attention,
    online_softmax,
    online_softmax_update,
    repeat_kv_heads,
    tiled_attention,
)
from .lab import (
    MODEL_ATTENTION_SIZES,
    TensorMemoryTracker,
    attention_flops,
    attention_parameters,
    count_matmul_flops,
    fastest_seconds,
    growth_exponent,
    kv_cache_bytes,
    measure_peak_memory,
)
from .lab import (
    AttentionStack,
    attention_entropy,
    depth_sweep,
    signal_through_stack,
    softmax_grad_norm,
    softmax_statistics,
)
from .lab import SENTENCE, VOCAB, embed, embedding_table
from .core import (
    LearnedPositions,
    RotaryAttention,
    apply_rope,
    equivariance_gap,
    permute_tokens,
    rope_frequencies,
    rope_pair_scores,
    sinusoidal_encoding,
)
from .core import TransformerBlock
# Lesson 12 (attention in today's models): the sliding window, the soft cap, the sink softmax, ALiBi.
from .core import alibi_bias, alibi_slopes, attend, sliding_window_mask, softcap_scores, softmax_with_sinks
# Lesson 13 (the cache that does not grow): latent attention, linear attention, the gated delta rule.
from .core import (LatentAttention, elu_feature_map, gated_delta_chunk, gated_delta_rule, gated_delta_step,
                   linear_attention, linear_attention_step)
from .views.shapes import shape_table, shape_trace, show
from .views.source import show_source
# Lesson 11 (a real pretrained model): tokenizers, safetensors and huggingface_hub load inside the loader.
from .lab import BertEncoder, BertLayer, PretrainedModel, attention_shares, load_pretrained

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("views", "widgets", "checks")

__all__ = [
    "Attention",
    "AttentionHead",
    "AttentionStack",
    "ConcatHeadsAttention",
    "MultiHeadAttention",
    "TransformerBlock",
    "attention_entropy",
    "attention_flops",
    "attention_parameters",
    "attention_scores",
    "blocked_to_keep",
    "causal_mask",
    "depth_sweep",
    "mask_to_additive",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "signal_through_stack",
    "softmax_grad_norm",
    "softmax_statistics",
    "split_heads",
    "GroupedQueryAttention",
    "KVCache",
    "MODEL_ATTENTION_SIZES",
    "TensorMemoryTracker",
    "cached_attention_step",
    "count_matmul_flops",
    "fastest_seconds",
    "grouped_query_attention",
    "growth_exponent",
    "kv_cache_bytes",
    "measure_peak_memory",
    "online_softmax",
    "online_softmax_update",
    "repeat_kv_heads",
    "tiled_attention",
    "LearnedPositions",
    "RotaryAttention",
    "apply_rope",
    "equivariance_gap",
    "permute_tokens",
    "rope_frequencies",
    "rope_pair_scores",
    "sinusoidal_encoding",
    "shape_table",
    "shape_trace",
    "show",
    "SENTENCE",
    "VOCAB",
    "embed",
    "embedding_table",
    "show_source",
    "BertEncoder",
    "BertLayer",
    "attention_shares",
    "PretrainedModel",
    "load_pretrained",
    "alibi_bias",
    "alibi_slopes",
    "attend",
    "sliding_window_mask",
    "softcap_scores",
    "softmax_with_sinks",
    "LatentAttention",
    "elu_feature_map",
    "gated_delta_rule",
    "gated_delta_step",
    "gated_delta_chunk",
    "linear_attention",
    "linear_attention_step",
    *_LAZY_SUBMODULES,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'attn_helpers' has no attribute {name!r}")
