"""Interactive explorers built with ipywidgets on the helpers' math and plotting: each keeps one figure and updates
it in place, shows one status line with its current values, and explains an impossible slider combination in words.
Display one by making it the last line of a cell, e.g. ``widgets.HeadsExplorer()``.
"""

from __future__ import annotations

from . import _base, calculator, heads, kv_cache, masking, pretrained, projection, rope, scaling, score_steps, skip
from . import training, values
from ._base import *  # noqa: F403
from .calculator import *  # noqa: F403
from .heads import *  # noqa: F403
from .kv_cache import *  # noqa: F403
from .masking import *  # noqa: F403
from .pretrained import *  # noqa: F403
from .projection import *  # noqa: F403
from .rope import *  # noqa: F403
from .score_steps import *  # noqa: F403
from .scaling import *  # noqa: F403
from .skip import *  # noqa: F403
from .training import *  # noqa: F403
from .values import *  # noqa: F403

__all__ = [name for topic in (_base, calculator, heads, kv_cache, masking, pretrained, projection, rope, score_steps,
                              scaling, skip, training, values) for name in topic.__all__]
