"""Run a notebook's "check yourself" exercises with their solutions and with typical wrong answers.

Conventions every lesson follows (tests/notebooks/test_exercises.py enforces them):

- An exercise is a code cell whose first line is ``# Exercise <lesson>.<n>: <what to do>`` and which
  contains exactly one line ``<name> = None`` (the learner replaces ``None``) followed by a call of a
  checker, e.g. ``checks.check_scores(answer)``.
- Its solution is the next markdown cell holding a ``<details>`` block with one fenced python block;
  that code replaces the ``<name> = None`` line.
- A "predict before you run" exercise has no checker call in its own cell: the learner writes a
  prediction, and the *next* code cell computes the real thing and calls the checker. Such an
  exercise runs as the two cells together (its solution block sits between them).
- ``tests/notebooks/exercise_data.py`` holds ``WRONG_ANSWERS[<lesson prefix>]``: exercise id -> (code replacing
  the ``None`` line, a piece of the hint the checker must print for it).

The notebook's code cells run once, in order, in one namespace in this process (matplotlib on Agg);
each exercise is then re-run on a copy of the namespace as it was just before that cell.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXERCISE_HEADER = re.compile(r"\A# Exercise (\d+\.\d+)\b")
ANSWER_LINE = re.compile(r"^(\w+) = None\b.*$", re.M)
SOLUTION_BLOCK = re.compile(r"<details>.*?```python\n(.*?)```.*?</details>", re.S)
CHECKER_CALL = re.compile(r"\bcheck_\w+\(")
CORRECT, NOT_YET, NOT_ATTEMPTED = "✅ Correct", "❌ Not yet", "⏳ Not attempted yet"


@dataclass
class Exercise:
    notebook: str
    id: str
    source: str
    solution: str | None
    namespace: dict[str, Any] = field(repr=False)

    def run(self, answer_code: str | None) -> str:
        """Run the exercise cell with ``answer_code`` in place of its first ``name = None`` line (and without the
        later ``name = None`` lines of the names it sets); return what it printed."""
        if answer_code is None:
            return execute(self.source, dict(self.namespace), f"{self.notebook}:exercise {self.id}")
        assigned = set(re.findall(r"^(\w+) =", answer_code, re.M))  # an exercise may ask for two names
        seen: list[str] = []

        def replace(line: re.Match) -> str:  # the first "name = None" line becomes the code; later ones it sets go
            seen.append(line.group(1))
            if len(seen) == 1:
                return answer_code.strip()
            return "" if line.group(1) in assigned else line.group(0)

        source = ANSWER_LINE.sub(replace, self.source)
        return execute(source, dict(self.namespace), f"{self.notebook}:exercise {self.id}")


def execute(source: str, namespace: dict[str, Any], label: str) -> str:
    """Run ``source`` in ``namespace`` as a notebook cell would (its output captured, warnings silenced); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, label, "exec"), namespace)
    return out.getvalue()


@lru_cache(maxsize=None)
def exercise_ids(notebook: str) -> list[str]:
    """The ids of ``notebooks/<notebook>``'s exercises, in order, read from the cells' first lines
    without running anything (for collecting tests: :func:`exercises` runs the whole notebook)."""
    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    return [header.group(1) for cell in nb.cells
            if cell.cell_type == "code" and (header := EXERCISE_HEADER.match(cell.source))]


@lru_cache(maxsize=None)
def exercises(notebook: str) -> dict[str, Exercise]:
    """Every exercise of ``notebooks/<notebook>``, by id, in notebook order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = NOTEBOOKS / notebook
    nb = nbformat.read(path, as_version=4)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    found: dict[str, Exercise] = {}
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            source = cell.source
            header = EXERCISE_HEADER.match(source)
            if header:
                full = source if CHECKER_CALL.search(source) else source + "\n" + _next_code(nb.cells, index)
                found[header.group(1)] = Exercise(notebook, header.group(1), full,
                                                  _solution_after(nb.cells, index), dict(namespace))
            execute(source, namespace, f"{notebook}:cell {index}")
            plt.close("all")
    finally:
        os.chdir(cwd)
    return found


def _next_code(cells: list, index: int) -> str:
    """The source of the first code cell after ``cells[index]`` (a prediction's checking cell)."""
    return next((cell.source for cell in cells[index + 1:] if cell.cell_type == "code"), "")


def _solution_after(cells: list, index: int) -> str | None:
    for cell in cells[index + 1:]:
        if cell.cell_type == "code":
            return None
        match = SOLUTION_BLOCK.search(cell.source)
        if match:
            return match.group(1)
    return None
