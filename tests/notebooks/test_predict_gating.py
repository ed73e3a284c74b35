"""A predict exercise's answer is not drawn below its question before the learner has predicted.

In a committed notebook, the code cells after a ``prediction = None`` cell, up to the next section heading,
hold no figure: a picture there (the measurement, a heatmap of it) would show the answer before anything is
run. The series draws such pictures only once ``prediction`` is set (09's log-log counts, 11's padded head).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools.browser_support import lesson_notebooks

PREDICTION = re.compile(r"^prediction = None", re.M)
HEADING = re.compile(r"#{1,3} ")


def figures_below_predictions(nb: nbformat.NotebookNode) -> list[str]:
    """Where a figure output sits between a ``prediction = None`` cell and the next section heading."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not PREDICTION.search(cell.source):
            continue
        for later in range(index + 1, len(nb.cells)):
            below = nb.cells[later]
            if below.cell_type == "markdown" and HEADING.match(below.source):
                break
            for output in below.get("outputs", []):
                plain = output.get("data", {}).get("text/plain", "")
                if "".join(plain).startswith("<Figure size"):
                    problems.append(f"cell {later} ({below.get('id')}) draws a figure below the prediction in "
                                    f"cell {index}: draw it only once `prediction` is set")
    return problems


@pytest.mark.parametrize("path", lesson_notebooks(), ids=lambda p: p.name)
def test_no_figure_below_a_prediction_before_it_is_made(path: Path):
    problems = figures_below_predictions(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_the_check_finds_a_figure_drawn_before_the_prediction():
    figure = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure size 620x460 with 2 Axes>"})
    waiting = nbformat.v4.new_output("stream", text="⏳ Write your prediction ...\n")
    cells = [nbformat.v4.new_code_cell("prediction = None  # \"same\" or \"different\""),
             nbformat.v4.new_code_cell("check(prediction)", outputs=[waiting]),
             nbformat.v4.new_code_cell("plt.show()", outputs=[figure]),
             nbformat.v4.new_markdown_cell("## Next section"),
             nbformat.v4.new_code_cell("plt.show()", outputs=[figure])]
    problems = figures_below_predictions(nbformat.v4.new_notebook(cells=cells))
    assert len(problems) == 1 and problems[0].startswith("cell 2 "), problems
