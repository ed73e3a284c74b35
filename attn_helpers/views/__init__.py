"""views: printouts and pictures. They take tensors or arrays and import no math.

Names load on first use from the modules below (each lists its public names in ``__all__``), so
``attn_helpers.views.show`` does not import matplotlib; but in an IPython kernel, importing ``views`` sets up how
figures are shown (sharp at 2x, with a description: :mod:`.display`).
"""

from __future__ import annotations

import builtins
import importlib
from typing import Any

_MODULES = (
    "shapes", "source", "arrays",  # printouts and arrays (torch only): searched first, so they load no matplotlib
    "colours", "heatmaps", "grids",  # one matrix, many matrices
    "diagrams", "dataflow",  # diagrams of a forward pass
    "display",  # how a figure is shown: sharp, with a description (alt text)
    "values", "curves", "learning",  # lesson pictures
)


def __getattr__(name: str) -> Any:
    if name in _MODULES:  # a module of this room, e.g. attn_helpers.views.heatmaps
        return importlib.import_module(f".{name}", __name__)
    modules = (importlib.import_module(f".{module}", __name__) for module in _MODULES)
    if name == "__all__":  # every module's public names (asked by ``import *``; imports every module)
        value: Any = [public for module in modules for public in module.__all__]
    elif name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        value = next((getattr(m, name) for m in modules if name in m.__all__), None)
        if value is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


# in an IPython shell (IPython puts get_ipython into builtins; nothing is imported to ask)
if getattr(builtins, "get_ipython", lambda: None)() is not None:
    importlib.import_module(".display", __name__).show_figures_sharp()
