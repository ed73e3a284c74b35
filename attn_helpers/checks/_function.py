"""A function the learner writes, judged on inputs the lesson never printed, under the one guard (:mod:`._guard`):
refused when it *is*, or calls, a watched function."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._core import Unreadable, Verdict, as_whole, correct, error_text, not_a_function, wrong
from ._guard import Watch, run_watching

#: One input of the learner's function: ``(arguments (a tuple, or a mapping of names), what they are in words,
#: judge of the result)``.
Case = tuple[tuple[Any, ...] | Mapping[str, Any], str, Callable[[Any], Verdict]]


#: The hint for a function that raised NameError, or AttributeError for a module's name (reader q00: a typo such as
#: torch.lg was told to follow the shapes of its inputs).
NAME_NOT_FOUND = ("Python could not find a name your function uses: check its spelling against the message, and that "
                  "every function it calls is defined in a cell that has run.")


def judge_function(answer: Any, cases: Sequence[Case], *, watched: Watch, example: str, lines: str,
                   success: str | Callable[[], str], raised: str | Callable[[BaseException], str] = "",
                   refusal: str = "which does the exercise for you", calls: str = "", is_: str = "",
                   only_if: Mapping[Any, Callable[[dict[str, Any]], bool]] | None = None) -> Verdict:
    """Run the learner's function on every case; the first wrong case gives the verdict, after its description
    (none if empty); ``success`` (or what it returns, once all passed) is the right one's. ``example``: the call
    asked for; ``lines``: how to write it (the refusals' hint); ``raised``: the hint (or a function of the exception
    giving it) for a function that raised; ``calls`` and ``is_`` (by default ``calls`` when given): the refusals,
    filled with the watched name and ``refusal``; ``only_if``: as :func:`~._guard.run_watching`'s."""
    refused = not_a_function(answer, example)
    if refused:
        return refused
    is_ = is_ or calls or "your answer is {}, {}: the exercise is to write it."
    calls = calls or "your function calls {}, {}."
    itself = watched.itself(answer)
    if itself:
        return wrong(is_.format(itself, refusal), lines)
    for args, description, judge in cases:  # a mapping of arguments is passed by name
        where = f"{description}: " if description else ""
        call = functools.partial(answer, **args) if isinstance(args, Mapping) else answer
        try:
            got, called = run_watching(call, () if isinstance(args, Mapping) else tuple(
                a.clone() if isinstance(a, Tensor) else a for a in args), watched, only_if=only_if)
        except Exception as problem:
            # a name Python could not find, in the notebook or in a module (torch.lg): most often a typo
            misnamed = isinstance(problem, AttributeError) and str(problem).startswith("module ")
            if isinstance(problem, NameError) or misnamed:
                return wrong(f"{where}your function raised {error_text(problem)}", NAME_NOT_FOUND)
            hint = raised(problem) if callable(raised) else raised
            return wrong(f"{where}your function raised {error_text(problem)}", hint or (
                "the checker's inputs have other sizes, and some other numbers of axes, than the lesson's example: "
                f"print their shapes inside your function and follow each operation's shape; {lines}"))
        if called:
            return wrong(calls.format(called[0], refusal), lines)
        try:
            verdict = judge(got)
        except Unreadable as unreadable:  # a result the judge cannot read
            verdict = wrong(*unreadable.args)
        if not verdict.ok:
            return wrong(f"{where}{verdict.message}", verdict.hint)
    return correct(success() if callable(success) else success)


def random_cases(seed: int, shapes: Sequence[tuple[int, ...]]) -> list[Tensor]:
    """One standard-normal tensor per shape, from a generator of its own (the lesson's seed untouched)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for shape in shapes]


#: A function's result as a whole number of bytes (raises Unreadable, with these words, for a result that is not one).
whole_bytes = functools.partial(as_whole, said="your function returned {!r:.40}; expected a whole number of bytes.",
                                hint="return the product of the sizes: an int.")
