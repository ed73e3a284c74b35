"""Interactive explorers built with ipywidgets on the helpers' math and plotting.

Every explorer keeps one figure and updates it in place, shows one status line with its current
values, and explains an impossible slider combination in words instead of a traceback.
Display one by making it the last line of a cell, e.g. ``widgets.HeadsExplorer()``.

Each explorer lives in a module of this package named after its topic; every name in those
modules' ``__all__`` is imported here by name.
"""

from __future__ import annotations

from ._base import Explorer, InvalidCombination
from .calculator import LayerCalculator
from .heads import EMBED_STD, HeadsExplorer
from .kv_cache import KVCacheCalculator
from .masking import MaskExplorer
from .pretrained import PretrainedAttentionExplorer
from .projection import SENTENCE, ProjectionExplorer
from .rope import RopeExplorer
from .score_steps import ScoreStepsExplorer
from .scaling import ScalingExplorer
from .skip import SkipExplorer
from .training import AttentionSnapshotExplorer, TrainingProgress
from .values import ValuesExplorer

# Every name of every topic module's __all__ (tests/test_import.py checks that none is missing).
__all__ = [
    "Explorer",
    "InvalidCombination",
    "LayerCalculator",
    "EMBED_STD",
    "HeadsExplorer",
    "KVCacheCalculator",
    "MaskExplorer",
    "PretrainedAttentionExplorer",
    "ProjectionExplorer",
    "SENTENCE",
    "RopeExplorer",
    "ScoreStepsExplorer",
    "ScalingExplorer",
    "SkipExplorer",
    "TrainingProgress",
    "AttentionSnapshotExplorer",
    "ValuesExplorer",
]
