"""Whether a checker's printed verdict fits a learner's output area: the tests' one definition.

* :func:`line_problems` — what is wrong with a verdict as printed: a line wider than
  ``attn_helpers.checks._core.LINE_WIDTH`` columns, or words that differ from the verdict as written
  (a word, number or shape split by a line break, or text lost).
* :func:`watching_verdicts` — while it is open, records every :class:`~attn_helpers.checks.Verdict` printed and
  every ``likely_mistakes`` mapping a checker hands to ``compare_tensors``; :func:`mistake_verdicts` gives the
  verdict a learner sees for each of those mistakes.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from attn_helpers import checks
from attn_helpers.checks import _core


def line_problems(printed: str, plain: str) -> list[str]:
    """What is wrong with ``printed`` as the printed form of ``plain`` (a verdict as written, one line for the
    message and one for the hint): each line wider than the limit, and words that differ."""
    limit = _core.LINE_WIDTH
    problems = [f"{_core.columns(line)} columns (limit {limit}): {line!r}"
                for line in printed.splitlines() if _core.columns(line) > limit]
    if printed.split() != plain.split():
        problems.append(f"the words changed; printed:\n{printed}\nwritten:\n{plain}")
    return problems


@dataclass
class Watched:
    printed: list[tuple[str, str]] = field(default_factory=list)  # (printed, as written) of each verdict shown
    comparisons: list[tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)  # compare_tensors calls


def _checker_modules() -> list[Any]:
    return [importlib.import_module(f"{checks.__name__}.{info.name}") for info in pkgutil.iter_modules(checks.__path__)]


@contextlib.contextmanager
def watching_verdicts() -> Iterator[Watched]:
    watched = Watched()
    real_str, real_compare = _core.Verdict.__str__, _core.compare_tensors

    def recording_str(verdict: _core.Verdict) -> str:
        text = real_str(verdict)
        watched.printed.append((text, verdict.plain()))
        return text

    def recording_compare(*args: Any, **kwargs: Any) -> _core.Verdict:
        watched.comparisons.append((args, kwargs))
        return real_compare(*args, **kwargs)

    modules = [m for m in _checker_modules() if getattr(m, "compare_tensors", None) is real_compare]
    _core.Verdict.__str__ = recording_str  # type: ignore[method-assign]
    for module in modules:
        module.compare_tensors = recording_compare
    try:
        yield watched
    finally:
        _core.Verdict.__str__ = real_str  # type: ignore[method-assign]
        for module in modules:
            module.compare_tensors = real_compare


def mistake_verdicts(watched: Watched) -> Iterator[tuple[str, _core.Verdict]]:
    """``(cause, verdict)`` for every likely mistake handed to ``compare_tensors`` while watching: the verdict an
    answer equal to that mistake gets."""
    for args, kwargs in watched.comparisons:
        expected = args[1] if len(args) > 1 else kwargs["expected"]
        options = {k: v for k, v in kwargs.items() if k not in ("answer", "expected")}
        for cause, (mistake, _hint) in (kwargs.get("likely_mistakes") or {}).items():
            yield cause, _core.compare_tensors(mistake, expected, **options)
