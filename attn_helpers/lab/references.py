"""Lesson 12: ``transformers``' attention layers from tiny configs with seeded weights (plain RoPE, eager
attention), and their forward on a boolean mask. ``transformers`` is imported inside the functions.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import Tensor, nn

from ..core import mask_to_additive
from .seeded import local_random

__all__ = ["REFERENCE_LAYERS", "reference_layer", "reference_forward"]

#: name -> the ``transformers`` model folder and its ``(config, attention layer, rotary embedding)`` class names.
REFERENCE_LAYERS = {
    "llama": ("llama", "LlamaConfig", "LlamaAttention", "LlamaRotaryEmbedding"),
    "mistral": ("mistral", "MistralConfig", "MistralAttention", "MistralRotaryEmbedding"),
    "qwen3": ("qwen3", "Qwen3Config", "Qwen3Attention", "Qwen3RotaryEmbedding"),
    "olmo2": ("olmo2", "Olmo2Config", "Olmo2Attention", "Olmo2RotaryEmbedding"),
    "gemma2": ("gemma2", "Gemma2Config", "Gemma2Attention", "Gemma2RotaryEmbedding"),
    "gpt_oss": ("gpt_oss", "GptOssConfig", "GptOssAttention", "GptOssRotaryEmbedding"),
}


def reference_layer(name: str, *, layer_idx: int = 0, seed: int = 0, std: float = 0.3,
                    **sizes: Any) -> tuple[nn.Module, nn.Module]:
    """Lesson 12: ``(layer, rotary)``: layer ``layer_idx`` of a 2-layer ``transformers`` model ``name`` (a key of
    :data:`REFERENCE_LAYERS`) with config ``sizes`` (``hidden_size=48, num_attention_heads=6, ...``), in float64,
    every parameter drawn from ``N(0, std²)`` as after ``torch.manual_seed(seed)`` (the global random state is left
    alone), in eval mode; and its rotary embedding module."""
    if name not in REFERENCE_LAYERS:
        raise ValueError(f"name must be one of {list(REFERENCE_LAYERS)}, got {name!r}")
    folder, config_name, layer_name, rotary_name = REFERENCE_LAYERS[name]
    configs = importlib.import_module(f"transformers.models.{folder}.configuration_{folder}")
    models = importlib.import_module(f"transformers.models.{folder}.modeling_{folder}")
    config = getattr(configs, config_name)(num_hidden_layers=2, **{
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, **sizes})
    config._attn_implementation = "eager"
    with local_random(seed):
        layer = getattr(models, layer_name)(config, layer_idx=layer_idx).double()
        with torch.no_grad():
            for parameter in layer.parameters():
                parameter.copy_(torch.randn(parameter.shape, dtype=parameter.dtype) * std)
    return layer.eval(), getattr(models, rotary_name)(config)


def reference_forward(layer: nn.Module, rotary: nn.Module, x: Tensor, keep: Tensor) -> Tensor:
    """Lesson 12: the ``transformers`` layer's eager forward on ``x (B, N, d_model)`` at positions ``0 .. N-1`` under
    the boolean mask ``keep (N, N)`` (True = may attend), passed as the additive ``(1, 1, N, N)`` mask the layer
    reads: ``(B, N, d_model)``."""
    additive = mask_to_additive(keep, dtype=x.dtype)[None, None]  # (1, 1, N, N): 0 or -inf
    positions = torch.arange(x.shape[1])[None]  # (1, N)
    with torch.no_grad():
        out, _ = layer(x, position_embeddings=rotary(x, positions), attention_mask=additive)
    return out  # (B, N, d_model)
