"""Strict nbval really compares: a changed printed line fails, a memory address does not.

A tiny notebook is built in a temporary folder, executed with ``scripts/run_notebooks.py``'s
``execute`` (what ``make notebooks`` does), copied with deliberate changes, and checked by
``pytest --nbval`` in a subprocess, isolated from this repository's pytest configuration (its own
empty ``pytest.ini``, no cache) but with the project's ``tests/nbval_sanitize.cfg``:

* unchanged                         -> every cell passes;
* one printed line changed          -> that cell fails;
* one ``execute_result`` changed    -> that cell fails;
* another memory address in a repr  -> passes with the sanitize file, fails without it;
* outputs stripped, never executed  -> passes while checking nothing (nbval's blind spot, which is
  why tests/notebooks/test_notebook_hygiene.py requires every code cell to be executed).

The three changes share one copy (nbval judges each cell on its own). The kernels start in the
background from the beginning of the session (``background.py``); the tests check what they found.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tools import background

# Each test starts a notebook kernel in a child pytest: part of the full proof, not of `make check`.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
SANITIZE = REPO_ROOT / "tests" / "nbval_sanitize.cfg"
RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (\S+\.ipynb)::Cell (\d+)", re.MULTILINE)
PRINTED = "hello, attention"


def _nbval_command(sanitize: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", "pytest.ini", "--rootdir", ".",
           "-rA", "--nbval", "--nbval-current-env", "--nbval-cell-timeout=60"]
    return cmd + (["--nbval-sanitize-with", str(SANITIZE)] if sanitize else [])


def _outcomes(output: str) -> dict[tuple[str, int], str]:
    """``{(file, cell): "PASSED" | "FAILED" | "ERROR"}`` from a child pytest's ``-rA`` summary."""
    return {(name, int(cell)): outcome for outcome, name, cell in RESULT_LINE.findall(output)}


def _execute_tiny(folder: Path) -> nbformat.NotebookNode:
    """The tiny notebook, executed by ``scripts/run_notebooks.py`` (what ``make notebooks`` runs)."""
    path = folder / "tiny.ipynb"
    cells = [f"print({PRINTED!r})", "object()", "6 * 7"]
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "run_notebooks.py"), str(path)], cwd=folder,
                   env=background.clean_environ(), capture_output=True, text=True, timeout=300, check=True)
    return nbformat.read(path, as_version=4)


def _variant(folder: Path, nb: nbformat.NotebookNode, name: str, *changes) -> str:
    nb = copy.deepcopy(nb)
    for change in changes:
        change(nb)
    nbformat.write(nb, folder / name)
    return name


def _set_printed(nb):
    nb.cells[0].outputs[0].text = "hello, attention!\n"


def _set_result(nb):
    nb.cells[2].outputs[0].data["text/plain"] = "43"


def _other_address(nb):
    data = nb.cells[1].outputs[0].data
    data["text/plain"] = re.sub(r"0x[0-9a-f]+", "0x7fffdeadbeef", data["text/plain"])


def _strip(nb):
    for cell in nb.cells:
        cell.outputs, cell.execution_count = [], None
    nb.cells[0].source = 'print("a line nobody ever ran")'


def _strict_runs() -> dict:
    """Execute the tiny notebook, then run both child pytests side by side: the copies with the
    sanitizer, and the copy with another address without it. Returns what each found."""
    folder = Path(tempfile.mkdtemp(prefix="attn-strict-"))
    try:
        executed = _execute_tiny(folder)
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        with_sanitizer = [
            _variant(folder, executed, "unchanged.ipynb"),
            _variant(folder, executed, "changed.ipynb", _set_printed, _other_address, _set_result),
            _variant(folder, executed, "stripped.ipynb", _strip),
        ]
        without = [_variant(folder, executed, "other_address.ipynb", _other_address)]
        children = [subprocess.Popen([*_nbval_command(sanitize), *files], cwd=folder, env=background.clean_environ(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    for sanitize, files in ((True, with_sanitizer), (False, without))]
        (output, _), (output_raw, _) = (child.communicate(timeout=300) for child in children)
        code, code_raw = (child.returncode for child in children)
        return dict(executed=executed, files=with_sanitizer, code=code, output=output, raw_file=without[0],
                    raw_code=code_raw, raw_output=output_raw)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


BACKGROUND_JOBS = {"test_nbval_strict: the runs": _strict_runs}


@pytest.fixture(scope="module")
def runs() -> dict:
    return background.result("test_nbval_strict: the runs", _strict_runs)


def test_the_tiny_notebook_was_executed_as_make_notebooks_does(runs) -> None:
    nb = runs["executed"]
    assert nb.cells[0].outputs[0].text == PRINTED + "\n"
    assert re.fullmatch(r"<object.* at 0x[0-9a-f]+>", nb.cells[1].outputs[0].data["text/plain"])
    assert nb.cells[2].outputs[0].data["text/plain"] == "42"


def test_strict_comparison_is_real(runs) -> None:
    output = runs["output"]
    expected = {(name, cell): "PASSED" for name in runs["files"] for cell in range(3)}
    expected[("changed.ipynb", 0)] = "FAILED"  # the printed line
    expected[("changed.ipynb", 2)] = "FAILED"  # the execute_result; cell 1 (another address) passes
    assert _outcomes(output) == expected, output[-6000:]
    assert runs["code"] == 1, output[-6000:]
    assert "hello, attention!" in output  # the report shows the difference


def test_sanitizer_is_what_hides_the_address(runs) -> None:
    name, output = runs["raw_file"], runs["raw_output"]
    assert _outcomes(output) == {(name, 0): "PASSED", (name, 1): "FAILED", (name, 2): "PASSED"}, output[-6000:]
    assert runs["raw_code"] == 1


def test_a_run_cut_off_by_its_limit_says_so(tmp_path) -> None:
    # The series' runs (tools/nbval_run.py) read verdicts from the child's report; one killed before its summary
    # reports no cell at all, so the report has to say why.
    from tools.nbval_run import NbvalRun

    cmd = [sys.executable, "-c", "import time; print('PASSED a.ipynb::Cell 0', flush=True); time.sleep(60)"]
    run = NbvalRun(cmd, tmp_path, {}, tmp_path / "log.txt", limit=1.0)
    assert run.seconds < 30
    assert run.outcomes == {"a.ipynb": {0: "PASSED"}}
    assert "killed after 1 s, the run's limit" in run.output
