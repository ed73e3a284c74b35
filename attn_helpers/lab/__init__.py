"""lab: what the lessons run on the math. Lessons call every name through this face (``lab.TrainConfig``).

One module per topic (the room map in ``attn_helpers/README.md`` says which lesson each serves), each declaring its
names in ``__all__``; this face exports exactly those.
"""

from __future__ import annotations

from . import (bert, example, experiments, generation, induction, measure, pretrained, references, seeded, tables,
               tasks, tiny_model, training, wiring)
from .bert import *  # noqa: F403
from .example import *  # noqa: F403
from .experiments import *  # noqa: F403
from .generation import *  # noqa: F403
from .induction import *  # noqa: F403
from .measure import *  # noqa: F403
from .pretrained import *  # noqa: F403
from .references import *  # noqa: F403
from .seeded import *  # noqa: F403
from .tables import *  # noqa: F403
from .tasks import *  # noqa: F403
from .tiny_model import *  # noqa: F403
from .training import *  # noqa: F403
from .wiring import *  # noqa: F403

__all__ = [name for module in (seeded, example, measure, wiring, references, tasks, tiny_model, training, experiments,
                               induction, tables, generation, bert, pretrained)
           for name in module.__all__]
