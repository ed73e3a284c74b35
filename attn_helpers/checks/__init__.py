"""Exercise checkers: ``checks.check_<exercise>(answer)`` prints a verdict in words.

Correct; or not yet, with what differs (shape, values, a likely cause such as a transpose, a
missing scale or the wrong softmax axis) and a hint. ``None`` prints "not attempted yet". A checker
computes the right answer from the exercise's inputs; nothing is hard-coded.

Each lesson's checkers live in a module of this package named after its topic; every public
``check_*`` function of those modules is available here.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._core import NOT_ATTEMPTED, Verdict, checker, compare_tensors

__all__ = ["NOT_ATTEMPTED", "Verdict", "checker", "compare_tensors"]

for _info in pkgutil.iter_modules(__path__):
    if _info.name.startswith("_"):
        continue
    _module = importlib.import_module(f".{_info.name}", __name__)
    for _name in dir(_module):
        if _name.startswith("check_"):
            globals()[_name] = getattr(_module, _name)
            __all__.append(_name)
