"""Strict nbval over every notebook of the series, in this environment at the machine's default thread count.

Every code cell is re-executed from a clean kernel and its printed outputs are compared with the committed
ones (the project's nbval options in ``pyproject.toml``: ``--nbval``, ``--nbval-current-env``, the
sanitizer ``tests/nbval_sanitize.cfg``). The run is a child pytest started in the background as soon
as the tests are collected (``conftest.py``), so it goes alongside the unit tests; each test here reports
one notebook's cells. ``pytest notebooks/<file>.ipynb`` runs the same check on one notebook directly.
The second thread count is the Colab stand-in's run (``tests/notebooks/test_colab.py``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

# It runs every notebook: not part of `make check`, the inner loop that runs none.
pytestmark = pytest.mark.slow


def test_notebook_prints_what_is_committed(main_nbval, notebook_path: Path) -> None:
    name = notebook_path.name
    outcomes = main_nbval.outcomes.get(name, {})
    n_code = sum(c.cell_type == "code" for c in nbformat.read(notebook_path, as_version=4).cells)
    assert len(outcomes) == n_code, (
        f"{name}: nbval reported {len(outcomes)} cells, the notebook has {n_code} code cells\n"
        f"{main_nbval.output[-3000:]}")
    failed = sorted(cell for cell, outcome in outcomes.items() if outcome != "PASSED")
    assert not failed, (f"{name}: cells {failed} differ from the committed outputs or failed\n"
                        f"{main_nbval.failures(name)}")
