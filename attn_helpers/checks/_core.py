"""What every exercise checker shares: verdicts, tensor comparison with likely causes, the wrapper.

A checker is written as a *judge* — a function from the learner's answer to a :class:`Verdict`,
computing the right answer from the exercise's own inputs — and wrapped with :func:`checker`,
which prints the verdict in words and never raises. Tests call ``check_x.judge(answer)``.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["Verdict", "as_letter", "as_number", "as_shape", "checker", "compare_tensors", "correct", "error_text",
           "not_a_function", "wrong", "NOT_ATTEMPTED"]

NOT_ATTEMPTED = "⏳ Not attempted yet: replace None with your answer and run the cell again."


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one answer. ``hint`` says what to look at when ``ok`` is False."""

    ok: bool
    message: str
    hint: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"✅ Correct! {self.message}".rstrip()
        text = f"❌ Not yet: {self.message}"
        return f"{text}\n   Hint: {self.hint}" if self.hint else text


def correct(message: str = "") -> Verdict:
    return Verdict(True, message)


def wrong(message: str, hint: str = "") -> Verdict:
    return Verdict(False, message, hint)


def checker(judge: Callable[..., Verdict]) -> Callable[..., None]:
    """Wrap ``judge(answer, ...) -> Verdict`` into ``check(answer, ...)`` that prints the verdict.

    ``None`` prints "not attempted yet"; an answer the judge cannot even look at (a wrong type,
    an exception inside the judge) prints a verdict naming the problem, never a traceback.
    """

    @functools.wraps(judge)
    def check(answer: Any = None, *args: Any, **kwargs: Any) -> None:
        print(judgement(answer, *args, **kwargs) if answer is not None else NOT_ATTEMPTED)

    def judgement(answer: Any, *args: Any, **kwargs: Any) -> Verdict:
        try:
            return judge(answer, *args, **kwargs)
        except Exception as problem:  # the learner sees words, not a traceback
            return wrong(f"this answer could not be checked ({type(problem).__name__}: {problem}).",
                         "check that the answer is the kind of object the exercise asks for.")

    check.judge = judgement  # type: ignore[attr-defined]
    return check


def as_number(answer: Any, what: str, *, hint: str) -> float | Verdict:
    """``answer`` as a float (a Python number or a one-element tensor), or a Verdict saying why not.

    ``what`` names the quantity in the message; ``hint`` says how to get one number (a lesson's words).
    """
    if isinstance(answer, Tensor):
        if answer.numel() != 1:
            return wrong(f"{what} should be one number, got a tensor of shape {list(answer.shape)}.", hint)
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return wrong(f"{what} should be a number, got {answer!r}.", "write a number or an expression that gives one.")
    return float(answer)


def as_shape(answer: Any, what: str = "the shape", *, hint: str = "write it like [13, 4, 100, 16], one number per axis."
             ) -> list[int] | Verdict:
    """A shape answer (a list or tuple of whole numbers, or a ``torch.Size``) as a list of ints, or a
    Verdict saying why not. ``what`` names the answer in the message; ``hint`` shows the form wanted."""
    if isinstance(answer, Tensor) or isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        return wrong(f"{what} should be a shape: a list or tuple of ints, got {answer!r}.", hint)
    values = list(answer)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):  # 13.0 is no size
        return wrong(f"{what} should hold whole numbers only, got {values!r}.", hint)
    return [int(v) for v in values]


def as_letter(answer: Any, options: Mapping[str, str]) -> str | Verdict:
    """The option letter the learner chose (``"b"``, ``"B"`` and ``"(b)"`` all mean ``"b"``), or a Verdict."""
    letters = sorted(options)
    if not isinstance(answer, str) or answer.strip().strip("()").lower() not in options:
        return wrong(f"the answer should be one of the letters {letters} as a string, got {answer!r}.",
                     f"write e.g. answer = {letters[0]!r}.")
    return answer.strip().strip("()").lower()


def not_a_function(answer: Any, example: str) -> Verdict | None:
    """The checkers' one verdict on an answer that is not the function the exercise asks for (a tensor computed
    once, a number, a string), ``example`` being the call (``"my_split(x, num_heads)"``); ``None`` when it is
    callable."""
    if callable(answer) and not isinstance(answer, Tensor):
        return None
    got = (f"a tensor of shape {list(answer.shape)}" if isinstance(answer, Tensor)
           else f"{type(answer).__name__} {answer!r:.60}")
    return wrong(f"the answer should be a function, got {got}.",
                 f"define it with def {example}: ... and write answer = {example.split('(')[0]} (no brackets): "
                 "the checker calls it on inputs of its own.")


def error_text(problem: BaseException) -> str:
    """``"ValueError: first line of the message"``: an exception in one line, for a verdict."""
    first_line = str(problem).strip().splitlines()[0] if str(problem).strip() else ""
    return f"{type(problem).__name__}: {first_line}"


def _as_tensor(answer: Any, name: str) -> Tensor | Verdict:
    if isinstance(answer, Tensor):
        return answer.detach()
    try:
        return torch.as_tensor(answer)
    except Exception:
        return wrong(f"{name} should be a tensor, got {type(answer).__name__}.",
                     "the exercise asks for a torch.Tensor; build it with torch operations.")


def compare_tensors(
    answer: Any,
    expected: Tensor,
    *,
    name: str = "your answer",
    likely_mistakes: Mapping[str, tuple[Tensor, str]] | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    success: str = "",
) -> Verdict:
    """Compare a learner's tensor with the expected one and explain the difference.

    ``likely_mistakes`` maps a short cause ("transposed", "not scaled", "softmax over the wrong
    axis") to ``(what that mistake would produce, hint)``; if the answer equals one of them, the
    verdict names that cause. Otherwise the verdict reports the shape or the largest difference.
    """
    got = _as_tensor(answer, name)
    if isinstance(got, Verdict):
        return got
    expected = expected.detach()
    if got.dtype != expected.dtype and (got.is_floating_point() or expected.is_floating_point()):
        got = got.to(expected.dtype)

    def same(a: Tensor, b: Tensor) -> bool:
        return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))

    if same(got, expected):
        return correct(success or f"{name} has shape {list(expected.shape)} and the right values.")
    for cause, (mistake, hint) in (likely_mistakes or {}).items():
        if same(got, mistake.detach()):
            return wrong(f"{name} matches what you get when {cause}.", hint)
    if got.shape != expected.shape:
        return wrong(f"{name} has shape {list(got.shape)}, expected {list(expected.shape)}.",
                     "print the shapes of your inputs and follow each operation's shape.")
    if got.dtype == torch.bool or expected.dtype == torch.bool:  # booleans cannot be subtracted: count them
        differ = int((got != expected.to(got.dtype)).sum())
        return wrong(f"{name} has the right shape {list(got.shape)} but {differ} of its {got.numel()} entries "
                     "differ.", "recompute step by step and compare each intermediate with the lesson's.")
    difference = (got - expected).abs().max().item()
    return wrong(f"{name} has the right shape {list(got.shape)} but different values "
                 f"(largest difference {difference:.3g}).",
                 "recompute step by step and compare each intermediate with the lesson's.")
