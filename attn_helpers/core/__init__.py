"""core: the math a learner reads, in lesson order. Imports torch only; every forward is shaped like its formula.

Six chapters, each importing only the ones above it; this face exports the names of their ``__all__`` (the
argument checks are reachable here, ``core.check_heads``, but not exported: they are no lesson's math, and the
exercise guard watches every exported function):

    arguments   argument checks with learner-facing messages (``check_heads``: the divisibility message)
    masks       causal, sliding-window and padding masks, the one mask convention (True = may attend) (03, 12)
    attention   scores, the attention formula and heads: ``attend``, ``split_heads`` (02-05; soft-capping, sinks: 12)
    layers      watching a forward pass (``Traceable``), MultiHeadAttention, Attention, TransformerBlock (05-07)
    positions   order-blindness, learned, sinusoidal and rotary positions, RotaryAttention (10); ALiBi (12)
    efficient   tiled attention, the KV cache, grouped-query attention (09, 12); latent and linear attention (13)
"""

from __future__ import annotations

from . import arguments, attention, efficient, layers, masks, positions
from .arguments import *  # noqa: F403
from .masks import *  # noqa: F403
from .attention import *  # noqa: F403
from .layers import *  # noqa: F403
from .positions import *  # noqa: F403
from .efficient import *  # noqa: F403

__all__ = [name for chapter in (masks, attention, layers, positions, efficient) for name in chapter.__all__]
