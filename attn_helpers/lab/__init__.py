"""lab: what the lessons run on the math: running examples, toy tasks, tiny models and their training,
generation, experiments, text tables, measuring tools, and the pretrained model with its rebuild.

Modules: ``example`` (the running sentence and its embedding table), ``tasks`` (lessons 08 and 10's toy
tasks), ``wiring`` (lesson 06's skip wirings), ``tiny_model``, ``training`` (Adam and the training loop),
``experiments`` (head knockouts, accuracy at other lengths), ``tables`` (every text table, through one
formatter), ``probes`` (softmax saturation, stacks of layers), ``generation`` (lesson 09's character model),
``measure`` (cost formulas and measuring tools), ``bert`` and ``pretrained`` (lesson 11), ``references``
(lesson 12's ``transformers`` layers), ``seeded`` and
``threads`` (seeded draws that leave the global random state alone; one math thread). Lessons call every
name through this face (``lab.TrainConfig``).
"""

from __future__ import annotations

from .threads import (  # noqa: F401
    one_thread,
)
from .seeded import (  # noqa: F401
    local_random,
)
from .example import (  # noqa: F401
    SENTENCE,
    PADDED_SENTENCE,
    LONG_SENTENCE,
    VOCAB,
    embed,
    embedding_table,
    token_ids,
)
from .measure import (  # noqa: F401
    SOFTMAX_FLOPS_PER_SCORE,
    MODEL_ATTENTION_SIZES,
    attention_parameters,
    attention_flops,
    kv_cache_bytes,
    WINDOWED_ATTENTION_SIZES,
    windowed_kv_cache_bytes,
    TensorMemoryTracker,
    measure_peak_memory,
    count_matmul_flops,
    fastest_seconds,
    growth_exponent,
)
from .wiring import (  # noqa: F401
    SKIP_KINDS,
    check_wiring,
    next_hidden,
)
from .probes import (  # noqa: F401
    attention_entropy,
    softmax_grad_norm,
    softmax_statistics,
    AttentionStack,
    signal_through_stack,
    depth_sweep,
    weights_after_steps,
    window_reach,
)
from .references import (  # noqa: F401
    REFERENCE_LAYERS,
    reference_layer,
    reference_forward,
)
from .tasks import (  # noqa: F401
    IGNORE,
    HELD_OUT_SEED,
    Task,
    PreviousTokenTask,
    NoWrapPreviousTokenTask,
    LookupTask,
    held_out_sequences,
    pattern_match,
)
from .tiny_model import (  # noqa: F401
    POSITION_SCHEMES,
    TinyAttentionModel,
)
from .training import (  # noqa: F401
    TrainConfig,
    Adam,
    TrainingRun,
    Measure,
    initial_model,
    batch_generator,
    training_step,
    train,
    train_many,
)
from .experiments import (  # noqa: F401
    HeadKnockout,
    head_knockout,
    held_out_accuracy,
    order_blind_accuracy,
    accuracy_by_length,
    attention_by_offset,
)
from .induction import (  # noqa: F401
    InductionTask,
    INDUCTION_CONFIG,
    induction_task,
    repeat_spans,
    repeated_part,
    previous_token_pattern,
    induction_pattern,
    attention_weights,
    previous_token_scores,
    induction_scores,
    repeated_loss,
    layer_weights,
    previous_token_measure,
    INDUCTION_MEASURES,
    train_induction_model,
    loss_drop_step,
    Circuit,
    find_circuit,
)
from .tables import (  # noqa: F401
    text_table,
    results_table,
    timing_table,
    pattern_match_table,
    steps_table,
    knockout_table,
    knockout_summary,
    accuracy_table,
    shares_by_layer_table,
    circuit_table,
)
from .generation import (  # noqa: F401
    CharVocab,
    TinyCausalLM,
    train_char_model,
    generate_greedy,
    GENERATION_TEXT,
)
from .bert import (  # noqa: F401
    BertLayer,
    BertEncoder,
    EncoderOutput,
    PATTERNS,
    attention_shares,
    heads_matching,
)
from .pretrained import (  # noqa: F401
    MODEL_ID,
    PACKAGE,
    MODEL_FILES,
    PretrainedModel,
    Encoded,
    packaged_model_available,
    load_pretrained,
    load_from_folder,
    load_from_package,
    load_from_hub,
    check_config,
    check_weights,
    to_transformers,
)

__all__ = [
    "one_thread",
    "local_random",
    "SENTENCE",
    "PADDED_SENTENCE",
    "LONG_SENTENCE",
    "VOCAB",
    "embed",
    "embedding_table",
    "token_ids",
    "SOFTMAX_FLOPS_PER_SCORE",
    "MODEL_ATTENTION_SIZES",
    "attention_parameters",
    "attention_flops",
    "kv_cache_bytes",
    "WINDOWED_ATTENTION_SIZES",
    "windowed_kv_cache_bytes",
    "TensorMemoryTracker",
    "measure_peak_memory",
    "count_matmul_flops",
    "fastest_seconds",
    "growth_exponent",
    "SKIP_KINDS",
    "check_wiring",
    "next_hidden",
    "attention_entropy",
    "softmax_grad_norm",
    "softmax_statistics",
    "AttentionStack",
    "signal_through_stack",
    "depth_sweep",
    "weights_after_steps",
    "window_reach",
    "REFERENCE_LAYERS",
    "reference_layer",
    "reference_forward",
    "IGNORE",
    "HELD_OUT_SEED",
    "Task",
    "PreviousTokenTask",
    "NoWrapPreviousTokenTask",
    "LookupTask",
    "held_out_sequences",
    "pattern_match",
    "POSITION_SCHEMES",
    "TinyAttentionModel",
    "TrainConfig",
    "Adam",
    "TrainingRun",
    "Measure",
    "initial_model",
    "batch_generator",
    "training_step",
    "train",
    "train_many",
    "HeadKnockout",
    "head_knockout",
    "held_out_accuracy",
    "order_blind_accuracy",
    "accuracy_by_length",
    "attention_by_offset",
    "InductionTask",
    "INDUCTION_CONFIG",
    "induction_task",
    "repeat_spans",
    "repeated_part",
    "previous_token_pattern",
    "induction_pattern",
    "attention_weights",
    "previous_token_scores",
    "induction_scores",
    "repeated_loss",
    "layer_weights",
    "previous_token_measure",
    "INDUCTION_MEASURES",
    "train_induction_model",
    "loss_drop_step",
    "Circuit",
    "find_circuit",
    "circuit_table",
    "text_table",
    "results_table",
    "timing_table",
    "pattern_match_table",
    "steps_table",
    "knockout_table",
    "knockout_summary",
    "accuracy_table",
    "shares_by_layer_table",
    "CharVocab",
    "TinyCausalLM",
    "train_char_model",
    "generate_greedy",
    "GENERATION_TEXT",
    "BertLayer",
    "BertEncoder",
    "EncoderOutput",
    "PATTERNS",
    "attention_shares",
    "heads_matching",
    "MODEL_ID",
    "PACKAGE",
    "MODEL_FILES",
    "PretrainedModel",
    "Encoded",
    "packaged_model_available",
    "load_pretrained",
    "load_from_folder",
    "load_from_package",
    "load_from_hub",
    "check_config",
    "check_weights",
    "to_transformers",
]

# The explorers' math (attn_helpers.widgets draws it): one import block, with its names added to __all__.
from .explorer_math import (  # noqa: E402
    MASK_TYPES,
    MASK_CONVENTIONS,
    keep_mask,
    masked_weights,
    VALUE_MASKS,
    weights_and_outputs,
    scaled_logits,
    sentence_embeddings,
    seeded_attention,
    seeded_stack,
    projected_qkv,
    word_vectors,
    sentence_intermediates,
)
from . import explorer_math as _explorer_math  # noqa: E402

__all__ += _explorer_math.__all__

# Lesson 13 (the cache that does not grow): the caches of latent and hybrid models, counted.
from .measure import (  # noqa: E402
    MODEL_CACHE_SIZES,
    latent_cache_bytes,
    linear_state_bytes,
    model_cache_bytes,
)

__all__ += ["MODEL_CACHE_SIZES", "latent_cache_bytes", "linear_state_bytes", "model_cache_bytes"]
