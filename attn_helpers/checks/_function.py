"""A function the learner writes, judged on inputs the lesson never printed (lessons 00, 02, 03, 03a).

The same guard as the split, merge and multi-head exercises of lesson 05 (:func:`heads.run_watching`): the
function is refused when it *is* one of the library's functions that already answer the exercise, or calls
one while it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._core import Verdict, correct, error_text, wrong
from ._watch import ATTENTION_WATCH
from .heads import _function_answer, _library_itself, run_watching

#: One input of the learner's function: ``(arguments, what they are in words, judge of the result)``.
Case = tuple[tuple[Any, ...], str, Callable[[Any], Verdict]]


def judge_function(answer: Any, cases: Sequence[Case], *, watched: Mapping[Any, str], example: str,
                   lines: str, success: str, raised: str = "") -> Verdict:
    """Run the learner's function on every case; the first case it gets wrong gives the verdict, which starts
    with that case's description. ``example`` is the call it should support (``"my_weights(x)"``), ``lines``
    the hint that says how to write it, ``raised`` the hint for a function that raised (a default if empty)."""
    not_a_function = _function_answer(answer, example)
    if not_a_function:
        return not_a_function
    itself = _library_itself(answer, watched)
    if itself:
        return wrong(f"your answer is {itself}, which does the exercise for you: the exercise is to write it.",
                     lines)
    for args, description, judge in cases:
        try:
            got, called = run_watching(answer, tuple(a.clone() if isinstance(a, Tensor) else a for a in args),
                                       watched)
        except Exception as problem:
            return wrong(f"{description}: your function raised {error_text(problem)}", raised or (
                "read the sizes from the input (e.g. x.shape[-1]) instead of writing the numbers of one "
                f"example; {lines}"))
        if called:
            return wrong(f"your function calls {called[0]}, which does the exercise for you.", lines)
        verdict = judge(got)
        if not verdict.ok:
            return wrong(f"{description}: {verdict.message}", verdict.hint)
    return correct(success)


#: The library's attention, which answers every exercise that asks for scores or weights: refused (the one
#: shared list, :data:`_watch.ATTENTION_WATCH`).
LIBRARY_ATTENTION = ATTENTION_WATCH


def random_cases(seed: int, shapes: Sequence[tuple[int, ...]]) -> list[Tensor]:
    """One standard-normal tensor per shape, from a generator of its own (the lesson's seed untouched)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for shape in shapes]
