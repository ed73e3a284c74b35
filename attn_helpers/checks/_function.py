"""A function the learner writes, judged on inputs the lesson never printed (lessons 00, 02, 03, 03a, and
lesson 05's split and merge).

The checkers' one guard (:mod:`._guard`): the function is refused when it *is* one of the library's functions
that already answer the exercise, or calls one while it runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ._core import Verdict, correct, error_text, not_a_function, wrong
from ._guard import Watch, run_watching

#: One input of the learner's function: ``(arguments, what they are in words, judge of the result)``.
Case = tuple[tuple[Any, ...], str, Callable[[Any], Verdict]]


def judge_function(answer: Any, cases: Sequence[Case], *, watched: Watch, example: str,
                   lines: str, success: str, raised: str | Callable[[BaseException], str] = "") -> Verdict:
    """Run the learner's function on every case; the first case it gets wrong gives the verdict, which starts
    with that case's description. ``example`` is the call it should support (``"my_weights(x)"``), ``lines``
    the hint that says how to write it, ``raised`` the hint for a function that raised (a default if empty; a
    function of the exception when the hint depends on it)."""
    refused = not_a_function(answer, example)
    if refused:
        return refused
    itself = watched.itself(answer)
    if itself:
        return wrong(f"your answer is {itself}, which does the exercise for you: the exercise is to write it.",
                     lines)
    for args, description, judge in cases:
        try:
            got, called = run_watching(answer, tuple(a.clone() if isinstance(a, Tensor) else a for a in args),
                                       watched)
        except Exception as problem:
            hint = raised(problem) if callable(raised) else raised
            return wrong(f"{description}: your function raised {error_text(problem)}", hint or (
                "read the sizes from the input (e.g. x.shape[-1]) instead of writing the numbers of one "
                f"example; {lines}"))
        if called:
            return wrong(f"your function calls {called[0]}, which does the exercise for you.", lines)
        verdict = judge(got)
        if not verdict.ok:
            return wrong(f"{description}: {verdict.message}", verdict.hint)
    return correct(success)


def random_cases(seed: int, shapes: Sequence[tuple[int, ...]]) -> list[Tensor]:
    """One standard-normal tensor per shape, from a generator of its own (the lesson's seed untouched)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for shape in shapes]
