"""What the "predict before you run" checkers share.

A prediction is written into a variable in one cell; the next cell computes the real thing and
calls the checker with the prediction and the computed values. The checker compares the two and
explains the outcome, right or wrong. Like every checker it prints, never raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ._core import Verdict, checker, say, wrong

__all__ = ["PREDICT_NOT_ATTEMPTED", "as_choice", "prediction_checker"]

PREDICT_NOT_ATTEMPTED = ("⏳ Not attempted yet: write your prediction in the cell above (replace None), "
                         "then run both cells.")


def prediction_checker(judge: Callable[..., Verdict]) -> Callable[..., None]:
    """Like :func:`~attn_helpers.checks._core.checker`, but ``None`` points at the prediction's own cell."""
    wrapped = checker(judge)

    @functools.wraps(judge)
    def check(prediction: Any = None, *args: Any, **kwargs: Any) -> None:
        say(wrapped.judge(prediction, *args, **kwargs) if prediction is not None else PREDICT_NOT_ATTEMPTED)

    check.judge = wrapped.judge  # type: ignore[attr-defined]
    return check


def as_choice(prediction: Any, choices: Sequence[str]) -> str | Verdict:
    """``prediction`` as one of ``choices`` (case and surrounding spaces ignored), or a Verdict saying why not."""
    if isinstance(prediction, str):
        text = prediction.strip().lower()
        for choice in choices:
            if text == choice.lower():
                return choice
    options = ", ".join(repr(c) for c in choices)
    return wrong(f"the prediction should be one of {options}, got {prediction!r}.",
                 "write one of the options as a string, in quotes.")
