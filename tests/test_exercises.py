"""Every "check yourself" exercise: its solution is accepted, ``None`` is "not attempted yet", and a
typical wrong answer (``tests/exercise_data.py``) is rejected with its hint."""

from __future__ import annotations

import pytest

from exercise_data import WRONG_ANSWERS
from exercise_harness import CORRECT, NOT_ATTEMPTED, NOT_YET, NOTEBOOKS, exercises

LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]*_*.ipynb"))


def _prefix(notebook: str) -> str:
    """``03_softmax_and_masks.ipynb`` -> ``03``; an appendix ``03a_mask_conventions.ipynb`` -> ``03a``."""
    return notebook.split("_", 1)[0]


def _wrong_answers(notebook: str) -> dict[str, tuple[str, str]]:
    return WRONG_ANSWERS.get(_prefix(notebook), {})


def _cases() -> list:
    cases = []
    for notebook in LESSONS:
        try:
            found = exercises(notebook)
        except Exception as problem:  # report a notebook that does not run as a failing case, not a collection error
            cases.append(pytest.param(notebook, f"runs: {type(problem).__name__}: {problem}", id=f"{_prefix(notebook)}-runs"))
            continue
        for ex_id in found:
            cases.append(pytest.param(notebook, ex_id, id=f"{_prefix(notebook)}-{ex_id}"))
    return cases


@pytest.mark.parametrize("notebook", LESSONS)
def test_every_lesson_has_at_least_two_exercises_each_with_a_wrong_answer_case(notebook):
    found = exercises(notebook)
    assert len(found) >= 2, f"{notebook} has {len(found)} exercises; every lesson has at least two"
    missing = sorted(set(found) - set(_wrong_answers(notebook)))
    assert not missing, (f"{notebook}: exercises {missing} have no typical wrong answer in tests/exercise_data.py "
                         f"(WRONG_ANSWERS[{_prefix(notebook)!r}])")


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_solution_is_accepted(notebook, ex_id):
    exercise = exercises(notebook)[ex_id]
    assert exercise.solution, f"exercise {ex_id} of {notebook} has no <details> solution block after it"
    printed = exercise.run(exercise.solution)
    assert CORRECT in printed, f"the solution of exercise {ex_id} was not accepted; the checker printed:\n{printed}"


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_unanswered_exercise_says_not_attempted(notebook, ex_id):
    printed = exercises(notebook)[ex_id].run(None)
    assert NOT_ATTEMPTED in printed, printed


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_typical_wrong_answer_is_rejected_with_its_hint(notebook, ex_id):
    wrong = _wrong_answers(notebook).get(ex_id)
    if wrong is None:
        pytest.fail(f"no typical wrong answer for exercise {ex_id} of {notebook}")
    code, hint = wrong
    printed = exercises(notebook)[ex_id].run(code)
    assert NOT_YET in printed, f"the wrong answer {code!r} was accepted:\n{printed}"
    assert hint in printed, f"expected the hint to mention {hint!r}; the checker printed:\n{printed}"
