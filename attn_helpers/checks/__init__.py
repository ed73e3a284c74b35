"""Exercise checkers: ``checks.check_<exercise>(answer)`` prints a verdict in words, never a traceback.

Correct; or not yet, with what differs (shape, values, a likely cause) and a hint; ``None`` prints "not attempted
yet". One module per lesson topic; each name is written once, in its module's ``__all__``.
"""

from __future__ import annotations

from . import (cache, efficient, heads, induction, layer, masking, orientation, positions, pretrained, projection,
               scaling, skip, today, training, values)
from ._core import NOT_ATTEMPTED, Verdict, checker, compare_tensors
from .cache import *  # noqa: F403
from .efficient import *  # noqa: F403
from .heads import *  # noqa: F403
from .induction import *  # noqa: F403
from .layer import *  # noqa: F403
from .masking import *  # noqa: F403
from .orientation import *  # noqa: F403
from .positions import *  # noqa: F403
from .pretrained import *  # noqa: F403
from .projection import *  # noqa: F403
from .scaling import *  # noqa: F403
from .skip import *  # noqa: F403
from .today import *  # noqa: F403
from .training import *  # noqa: F403
from .values import *  # noqa: F403

__all__ = ["NOT_ATTEMPTED", "Verdict", "checker", "compare_tensors",
           *(name for topic in (orientation, projection, scaling, masking, values, heads, skip, layer, training,
                                efficient, positions, pretrained, today, cache, induction) for name in topic.__all__)]
