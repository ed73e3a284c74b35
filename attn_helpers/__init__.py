"""attn_helpers: the small library behind "Attention, step by step". This file is its face: the names lessons
import with ``from attn_helpers import ...``, each written once below (``__all__`` is read off them).

Five rooms: ``core`` (the math a learner reads, torch only), ``lab`` (examples, toy tasks, training, measuring
tools), ``views`` (printouts and pictures; matplotlib loads on first use), ``widgets`` (the explorers; ipywidgets
loads on first use) and ``checks`` (the exercise judges, loaded on first use).
"""

import importlib as _importlib

from .core import (Attention, AttentionHead, ConcatHeadsAttention, GroupedQueryAttention, KVCache, LatentAttention,
                   LearnedPositions, MultiHeadAttention, RotaryAttention, TransformerBlock, alibi_bias, alibi_slopes,
                   apply_rope, attend, attention_scores, blocked_to_keep, cached_attention_step, causal_mask,
                   elu_feature_map, equivariance_gap, gated_delta_chunk, gated_delta_rule, gated_delta_step,
                   grouped_query_attention, linear_attention, linear_attention_step, mask_to_additive, merge_heads,
                   online_softmax, online_softmax_update, padding_mask, permute_tokens, repeat_kv_heads,
                   rope_frequencies, rope_pair_scores, scaled_dot_product_attention, sinusoidal_encoding,
                   sliding_window_mask, softcap_scores, softmax_with_sinks, split_heads, tiled_attention)
from .lab import (MODEL_ATTENTION_SIZES, SENTENCE, VOCAB, AttentionStack, BertEncoder, BertLayer, PretrainedModel,
                  TensorMemoryTracker, attention_entropy, attention_flops, attention_parameters, attention_shares,
                  count_matmul_flops, depth_sweep, embed, embedding_table, fastest_seconds, growth_exponent,
                  kv_cache_bytes, load_pretrained, measure_peak_memory, signal_through_stack, softmax_grad_norm,
                  softmax_statistics)
from .views.shapes import shape_table, shape_trace, show
from .views.source import show_source

__version__ = "0.1.0"

_LAZY_ROOMS = ("widgets", "checks")  # views is bound already: the shape printouts above come from it
__all__ = [name for name in dir() if not name.startswith("_")] + list(_LAZY_ROOMS)


def __getattr__(name: str) -> object:
    if name in _LAZY_ROOMS:
        module = _importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'attn_helpers' has no attribute {name!r}")
