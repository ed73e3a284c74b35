"""The "predict before you run" checkers: a prediction is written in one cell, the next computes the real thing and
calls the checker with both; ``choices`` parses a prediction that is one of a few words."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ._core import Unreadable, Verdict, checker

__all__ = ["PREDICT_NOT_ATTEMPTED", "as_choice", "measure_now", "prediction_checker"]

T = TypeVar("T")

PREDICT_NOT_ATTEMPTED = ("⏳ Not attempted yet: write your prediction in the cell above (replace None), "
                         "then run both cells.")


def prediction_checker(judge: Callable[..., Verdict] | None = None, *, choices: Sequence[str] = ()) -> Any:
    """:func:`~._core.checker` pointing ``None`` at the prediction's cell; ``choices``: the words it may be."""
    if judge is None:
        return functools.partial(prediction_checker, choices=choices)

    @functools.wraps(judge)
    def parsed(prediction: Any, *args: Any, **kwargs: Any) -> Verdict:
        return judge(as_choice(prediction, choices) if choices else prediction, *args, **kwargs)

    return checker(parsed, PREDICT_NOT_ATTEMPTED)


def measure_now(value: T | Callable[[], T]) -> T:
    """``value``, or what it returns if it is a function that measures it. A prediction checker calls it only after
    the prediction is written, so a notebook that hands over the measuring function leaves no variable holding the
    answer before the learner has predicted (Exercises 12.1, 13.3, 14.2)."""
    return value() if callable(value) else value


def as_choice(prediction: Any, choices: Sequence[str]) -> str:
    """``prediction`` as one of ``choices`` (case and surrounding spaces ignored)."""
    if isinstance(prediction, str):
        for choice in choices:
            if prediction.strip().lower() == choice.lower():
                return choice
    options = ", ".join(repr(c) for c in choices)
    raise Unreadable(f"the prediction should be one of {options}, got {prediction!r}.",
                     "write one of the options as a string, in quotes.")
