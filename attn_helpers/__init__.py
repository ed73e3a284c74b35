"""attn_helpers: the small library behind "Attention, step by step".

``import attn_helpers`` loads only torch and the modules that need nothing else: the math
(:mod:`attn_helpers.attention`, :mod:`attn_helpers.efficient`, :mod:`attn_helpers.positions`), lesson
probes (:mod:`attn_helpers.probes`), cost formulas and measuring tools (:mod:`attn_helpers.measure`) and
the shape printouts (:mod:`attn_helpers.shapes`). Plotting (matplotlib), widgets (ipywidgets) and exercise
checks load on first use: ``attn_helpers.plotting``, ``attn_helpers.widgets``, ``attn_helpers.checks``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .attention import (
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
from .efficient import (
    KVCache,
    cached_attention_step,
    grouped_query_attention,
    online_softmax,
    online_softmax_update,
    repeat_kv_heads,
    tiled_attention,
)
from .measure import (
    MODEL_ATTENTION_SIZES,
    MatmulFlopCounter,
    TensorMemoryTracker,
    attention_flops,
    attention_parameters,
    count_matmul_flops,
    fastest_seconds,
    growth_exponent,
    kv_cache_bytes,
    measure_peak_memory,
    median_seconds,
)
from .probes import (
    AttentionStack,
    attention_entropy,
    depth_sweep,
    signal_through_stack,
    softmax_grad_norm,
    softmax_statistics,
)
from .example import SENTENCE, VOCAB, embed, embedding_table
from .positions import (
    LearnedPositions,
    RotaryAttention,
    apply_rope,
    equivariance_gap,
    permute_tokens,
    rope_frequencies,
    rope_pair_scores,
    sinusoidal_encoding,
)
from .block import TransformerBlock
from .shapes import shape_table, shape_trace, show
from .source import show_source

# Lesson 11 (a real pretrained model): cheap to import (torch and the standard library; tokenizers,
# safetensors and huggingface_hub load inside the loader's functions). Imported after the names
# above, which attn_helpers.bert takes from this package.
from .bert import BertEncoder, BertLayer, attention_shares
from .pretrained import PretrainedModel, load_pretrained

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("plotting", "widgets", "checks")

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
    "KVCache",
    "MODEL_ATTENTION_SIZES",
    "MatmulFlopCounter",
    "TensorMemoryTracker",
    "cached_attention_step",
    "count_matmul_flops",
    "fastest_seconds",
    "grouped_query_attention",
    "growth_exponent",
    "kv_cache_bytes",
    "measure_peak_memory",
    "median_seconds",
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
    *_LAZY_SUBMODULES,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'attn_helpers' has no attribute {name!r}")
