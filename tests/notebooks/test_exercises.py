"""Every "check yourself" exercise: its solution is accepted, ``None`` is "not attempted yet", and a
typical wrong answer (``tests/notebooks/exercise_data.py``) is rejected with its hint.

Reaching the exercises means running every notebook's cells (``exercise_harness.py``), about a minute
of work. So this file runs twice: in a child pytest started in the background when the tests are
collected (``background.py``; ``ATTN_EXERCISES_CHILD=1``), where each test does the work, and in this
session, where each test of the same name reports the child's verdict, failing with the child's
message. The tests are collected from the notebooks' exercise headers without running anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from exercise_data import WRONG_ANSWERS
from exercise_harness import (CORRECT, EXERCISE_HEADER, NOT_ATTEMPTED, NOT_YET, NOTEBOOKS, execute, exercise_ids,
                              exercises)
from tools import background
from tools.verdict_lines import line_problems, mistake_verdicts, watching_verdicts

LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]*_*.ipynb"))
IN_CHILD = os.environ.get("ATTN_EXERCISES_CHILD") == "1"
JOB = "test_exercises: the child run"
PASSED = None  # a test's verdict in the child's report: None, or its failure text


def _prefix(notebook: str) -> str:
    """``03_softmax_and_masks.ipynb`` -> ``03``; an appendix ``03a_mask_conventions.ipynb`` -> ``03a``."""
    return notebook.split("_", 1)[0]


def _wrong_answers(notebook: str) -> dict[str, tuple[str, str]]:
    return WRONG_ANSWERS.get(_prefix(notebook), {})


def _cases() -> list:
    return [pytest.param(notebook, ex_id, id=f"{_prefix(notebook)}-{ex_id}")
            for notebook in LESSONS for ex_id in exercise_ids(notebook)]


# -- the child run and its report -------------------------------------------------------------------

def _run_child() -> dict[str, str | None]:
    """This file's tests run for real in a child pytest: ``{test name: None if it passed, else why not}``."""
    with tempfile.TemporaryDirectory(prefix="attn-exercises-") as folder:
        report = Path(folder) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).resolve()),
               f"--junitxml={report}"]
        env = {**background.clean_environ(), "ATTN_EXERCISES_CHILD": "1"}
        child = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True,
                               text=True, timeout=1800)
        if not report.exists():
            raise RuntimeError(f"the child pytest wrote no report (exit {child.returncode}):\n"
                               f"{(child.stdout + child.stderr)[-6000:]}")
        verdicts: dict[str, str | None] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            problem = next((e for e in case if e.tag in ("failure", "error", "skipped")), None)
            verdicts[case.get("name", "")] = PASSED if problem is None else (
                f"[{problem.tag} in the child run] {problem.get('message', '')}\n{problem.text or ''}"[:6000])
        return verdicts


BACKGROUND_JOBS = {} if IN_CHILD else {JOB: _run_child}


def _check(request: pytest.FixtureRequest, check: Callable[..., None], *args: str) -> None:
    """Run ``check`` here (in the child), or report the child's verdict on this test (in the session)."""
    if IN_CHILD:
        check(*args)
        return
    verdicts = background.result(JOB, _run_child)
    name = request.node.name
    if name not in verdicts:
        pytest.fail(f"the child run has no result for {name}", pytrace=False)
    if verdicts[name] is not PASSED:
        pytest.fail(verdicts[name], pytrace=False)


# -- the checks -------------------------------------------------------------------------------------

def _has_two_exercises_with_wrong_answers(notebook: str) -> None:
    found = exercises(notebook)
    assert len(found) >= 2, f"{notebook} has {len(found)} exercises; every lesson has at least two"
    missing = sorted(set(found) - set(_wrong_answers(notebook)))
    assert not missing, (f"{notebook}: exercises {missing} have no typical wrong answer in tests/notebooks/exercise_data.py "
                         f"(WRONG_ANSWERS[{_prefix(notebook)!r}])")


def _flat(text: str) -> str:
    """``text`` with every run of spaces and line breaks as one space: a verdict breaks its lines at spaces."""
    return " ".join(text.split())


def _run_fitting(notebook: str, ex_id: str, code: str | None) -> str:
    """Run the exercise with ``code``; every verdict it prints, and the verdict of every likely mistake its checker
    names, must be in lines that fit the output area with no word split (tools/verdict_lines.py)."""
    with watching_verdicts() as watched:
        printed = exercises(notebook)[ex_id].run(code)
    problems = [p for text, plain in watched.printed for p in line_problems(text, plain)]
    problems += [f"likely mistake {cause!r}: {p}" for cause, verdict in mistake_verdicts(watched)
                 for p in line_problems(str(verdict), verdict.plain())]
    assert not problems, f"exercise {ex_id} of {notebook}: a verdict does not fit:\n" + "\n".join(problems)
    return printed


def _solution_is_accepted(notebook: str, ex_id: str) -> None:
    exercise = exercises(notebook)[ex_id]
    assert exercise.solution, f"exercise {ex_id} of {notebook} has no <details> solution block after it"
    printed = _run_fitting(notebook, ex_id, exercise.solution)
    assert CORRECT in printed, f"the solution of exercise {ex_id} was not accepted; the checker printed:\n{printed}"


def _unanswered_says_not_attempted(notebook: str, ex_id: str) -> None:
    printed = exercises(notebook)[ex_id].run(None)
    assert NOT_ATTEMPTED in printed, printed


def _wrong_answer_is_rejected_with_its_hint(notebook: str, ex_id: str) -> None:
    wrong = _wrong_answers(notebook).get(ex_id)
    assert wrong is not None, f"no typical wrong answer for exercise {ex_id} of {notebook}"
    for code, hint in [wrong] if isinstance(wrong, tuple) else wrong:  # one (code, hint) or a list of them
        printed = _run_fitting(notebook, ex_id, code)
        assert NOT_YET in printed, f"the wrong answer {code!r} was accepted:\n{printed}"
        assert _flat(hint) in _flat(printed), (f"for {code!r}, expected the hint to mention {hint!r}; the checker "
                                               f"printed:\n{printed}")


# A predict exercise whose cells leave the measured answer in a notebook variable before a prediction is set
# can be passed by copying it (reader r12c: run 13.3 once, then `prediction = sizes[1024][1]`; later readers:
# `max(change, key=change.get)` in 12.1, `without_previous` in 14.2).
# (notebook, exercise id) -> how to measure the answer with the notebook's own function (called on the namespace the
# exercise's cells leave, run unanswered); no variable those cells set may hold it. An answer that is a choice word is
# held back as the measured numbers that decide it, a tuple: no variable may hold any of them.
ANSWERS_HELD_BACK = {
    ("12_attention_today.ipynb", "12.1"):  # the largest change of a weight that the cap makes: units, tens
        lambda ns: (ns["cap_change"](ns["scores_units"]), ns["cap_change"](10 * ns["scores_units"])),
    ("13_the_cache_that_does_not_grow.ipynb", "13.3"): lambda ns: ns["measure_sizes"]()[1024][1],
    ("14_induction_heads.ipynb", "14.2"):  # the loss with the previous-token head knocked out
        lambda ns: ns["measure_knockouts"]()[f"previous-token head L0H{ns['prev_head'][1]}"],
}
HEADING = re.compile(r"^#{1,6} ", re.M)


def _holds(value: object, answer: float, depth: int = 0) -> bool:
    """Whether ``value`` is ``answer`` or holds it in a dict, list or tuple (three levels deep). Equal, not close: a
    float measured again by the notebook's own function, in the same process, is the same float to the last bit."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == answer
    if depth < 3 and isinstance(value, dict):
        return any(_holds(v, answer, depth + 1) for v in value.values())
    if depth < 3 and isinstance(value, (list, tuple)):
        return any(_holds(v, answer, depth + 1) for v in value)
    return False


def _cells_to_heading(notebook: str, ex_id: str) -> list[str]:
    """The code cells of exercise ``ex_id`` of ``notebook``: its own and every one after it before the next heading."""
    cells = nbformat.read(NOTEBOOKS / notebook, as_version=4).cells
    start = next(i for i, cell in enumerate(cells) if cell.cell_type == "code"
                 and (header := EXERCISE_HEADER.match(cell.source)) and header.group(1) == ex_id)
    sources = [cells[start].source]
    for cell in cells[start + 1:]:
        if cell.cell_type == "markdown" and HEADING.search(re.sub(r"```.*?```", "", cell.source, flags=re.S)):
            break
        if cell.cell_type == "code":
            sources.append(cell.source)
    return sources


def _answer_sits_in_no_variable(notebook: str, ex_id: str,
                                measure: Callable[[dict], float | tuple[float, ...]]) -> None:
    exercise = exercises(notebook)[ex_id]
    namespace = dict(exercise.namespace)
    for index, source in enumerate(_cells_to_heading(notebook, ex_id)):  # unanswered: prediction = None
        execute(source, namespace, f"{notebook}:exercise {ex_id}, its code cell {index}")
    set_here = [name for name, value in namespace.items() if exercise.namespace.get(name, None) is not value]
    answer = measure(dict(namespace))
    answers = answer if isinstance(answer, tuple) else (answer,)
    holding = [name for name in set_here if any(_holds(namespace[name], a) for a in answers)]
    assert not holding, (f"exercise {ex_id} of {notebook}, run unanswered, leaves its answer {answer} in "
                         f"{holding}: a learner can copy it into the prediction")


@pytest.mark.parametrize(("notebook", "ex_id", "measure"),
                         [pytest.param(nb, ex, m, id=f"{_prefix(nb)}-{ex}") for (nb, ex), m in ANSWERS_HELD_BACK.items()])
def test_predict_exercise_leaves_no_answer_in_a_variable(notebook, ex_id, measure, request):
    _check(request, _answer_sits_in_no_variable, notebook, ex_id, measure)


@pytest.mark.parametrize("notebook", LESSONS)
def test_every_lesson_has_at_least_two_exercises_each_with_a_wrong_answer_case(notebook, request):
    _check(request, _has_two_exercises_with_wrong_answers, notebook)


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_solution_is_accepted(notebook, ex_id, request):
    _check(request, _solution_is_accepted, notebook, ex_id)


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_unanswered_exercise_says_not_attempted(notebook, ex_id, request):
    _check(request, _unanswered_says_not_attempted, notebook, ex_id)


@pytest.mark.parametrize(("notebook", "ex_id"), _cases())
def test_typical_wrong_answer_is_rejected_with_its_hint(notebook, ex_id, request):
    _check(request, _wrong_answer_is_rejected_with_its_hint, notebook, ex_id)
