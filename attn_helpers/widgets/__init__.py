"""Interactive explorers built with ipywidgets on the helpers' math and plotting.

Every explorer keeps one figure and updates it in place, shows one status line with its current
values, and explains an impossible slider combination in words instead of a traceback.
Display one by making it the last line of a cell, e.g. ``widgets.HeadsExplorer()``.

Each explorer lives in a module of this package named after its topic; every name in those
modules' ``__all__`` is available here.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._base import Explorer, InvalidCombination

__all__ = ["Explorer", "InvalidCombination"]

for _info in pkgutil.iter_modules(__path__):
    if _info.name.startswith("_"):
        continue
    _module = importlib.import_module(f".{_info.name}", __name__)
    for _name in getattr(_module, "__all__", ()):
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
