"""Exercise checkers: ``checks.check_<exercise>(answer)`` prints a verdict in words.

Correct; or not yet, with what differs (shape, values, a likely cause such as a transpose, a
missing scale or the wrong softmax axis) and a hint. ``None`` prints "not attempted yet". A checker
computes the right answer from the exercise's inputs; nothing is hard-coded.

Each lesson's checkers live in a module of this package named after its topic; every name in those
modules' ``__all__`` is imported here by name (tests/test_import.py checks that none is missing).
"""

from __future__ import annotations

from ._core import NOT_ATTEMPTED, Verdict, checker, compare_tensors
from .cache import (
    check_delta_transition,
    check_latent_cache_size,
    check_linear_attention_step,
    check_overwrite_prediction,
    check_state_bytes_prediction,
)
from .efficient import (
    check_cache_flops_prediction,
    check_generate_with_cache,
    check_kv_cache_size,
    check_online_softmax_step,
    check_repeat_kv,
)
from .heads import (
    check_head_shapes,
    check_heads_prediction,
    check_merge_heads,
    check_multi_head_function,
    check_split_heads,
    check_split_line,
)
from .layer import (
    DROPOUT_CHOICES,
    SUSPECT_LAYER,
    SuspectLine,
    check_dropout_prediction,
    check_mha_class,
    check_mha_parameter_count,
    check_suspect_lines,
    check_qkv_entry,
    numbered_listing,
)
from .masking import (
    check_additive_mask,
    check_window_blocked_mask,
    check_convention_prediction,
    check_masked_row_prediction,
    check_padding_keep_mask,
    check_softmax_axis,
)
from .orientation import check_largest_key, check_scores_shape, check_self_attention_weights
from .positions import check_rope, check_rotated_v_shift, check_shuffle_prediction
from .pretrained import check_head_rows, check_keep_mask, check_padding_prediction
from .projection import check_key_layer, check_qkv_shape, check_split_qkv, check_weight_shape_prediction
from .scaling import check_row_entropy, check_scaled_scores, check_score_variance, check_trend_prediction
from .skip import check_layer_grad, check_gradient_trend_prediction, check_residual_line, check_skip_through_v
from .today import check_alibi, check_cache_window_mask, check_sink_softmax, check_softcap_prediction
from .induction import check_induction_scores, check_knockout_loss, check_knockout_loss_prediction
from .training import check_knockout, check_knockout_prediction, check_pattern_match, check_previous_token_pattern
from .values import (
    check_attention_function,
    check_midpoint_weights,
    check_output_shape_prediction,
)

__all__ = [
    "NOT_ATTEMPTED",
    "Verdict",
    "checker",
    "compare_tensors",
    # cache (13)
    "check_latent_cache_size",
    "check_state_bytes_prediction",
    "check_overwrite_prediction",
    "check_linear_attention_step",
    "check_delta_transition",
    # efficient
    "check_online_softmax_step",
    "check_kv_cache_size",
    "check_repeat_kv",
    "check_cache_flops_prediction",
    "check_generate_with_cache",
    # heads
    "check_split_heads",
    "check_merge_heads",
    "check_head_shapes",
    "check_split_line",
    "check_heads_prediction",
    "check_multi_head_function",
    # layer
    "SuspectLine",
    "SUSPECT_LAYER",
    "numbered_listing",
    "check_qkv_entry",
    "check_mha_parameter_count",
    "check_suspect_lines",
    "DROPOUT_CHOICES",
    "check_dropout_prediction",
    "check_mha_class",
    # masking
    "check_additive_mask",
    "check_window_blocked_mask",
    "check_convention_prediction",
    "check_masked_row_prediction",
    "check_padding_keep_mask",
    "check_softmax_axis",
    # orientation
    "check_largest_key",
    "check_scores_shape",
    "check_self_attention_weights",
    # positions
    "check_shuffle_prediction",
    "check_rope",
    "check_rotated_v_shift",
    # pretrained
    "check_head_rows",
    "check_keep_mask",
    "check_padding_prediction",
    # projection
    "check_qkv_shape",
    "check_split_qkv",
    "check_key_layer",
    "check_weight_shape_prediction",
    # scaling
    "check_scaled_scores",
    "check_score_variance",
    "check_row_entropy",
    "check_trend_prediction",
    # skip
    "check_skip_through_v",
    "check_gradient_trend_prediction",
    "check_layer_grad",
    "check_residual_line",
    # today
    "check_cache_window_mask",
    "check_sink_softmax",
    "check_alibi",
    "check_softcap_prediction",
    # induction
    "check_knockout_loss_prediction",
    "check_induction_scores",
    "check_knockout_loss",
    # training
    "check_knockout_prediction",
    "check_previous_token_pattern",
    "check_pattern_match",
    "check_knockout",
    # values
    "check_attention_function",
    "check_midpoint_weights",
    "check_output_shape_prediction",
]
