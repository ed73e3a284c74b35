"""Strict nbval really compares: a changed printed line fails, a memory address does not.

A tiny notebook is built in a temporary folder, executed with ``scripts/run_notebooks.py``'s
``execute`` (what ``make notebooks`` does), copied with one deliberate change per copy, and checked
by ``pytest --nbval`` in a subprocess, isolated from this repository's pytest configuration (its
own empty ``pytest.ini``, no cache) but with the project's ``tests/nbval_sanitize.cfg``:

* unchanged                         -> every cell passes;
* one printed line changed          -> that cell fails;
* one ``execute_result`` changed    -> that cell fails;
* another memory address in a repr  -> passes with the sanitize file, fails without it;
* outputs stripped, never executed  -> passes while checking nothing (nbval's blind spot, which is
  why tests/test_notebook_hygiene.py requires every code cell to be executed).
"""

from __future__ import annotations

import copy
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

# Each test starts a notebook kernel in a child pytest: part of the full proof, not of `make check`.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parent.parent
SANITIZE = REPO_ROOT / "tests" / "nbval_sanitize.cfg"
RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (\S+\.ipynb)::Cell (\d+)", re.MULTILINE)
PRINTED = "hello, attention"


def _load_run_notebooks():
    spec = importlib.util.spec_from_file_location("run_notebooks", REPO_ROOT / "scripts" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nbval(folder: Path, env: dict[str, str], *notebooks: str, sanitize: bool = True) -> tuple[int, dict, str]:
    """Run strict nbval on ``notebooks`` in ``folder``; return (exit code, {(file, cell): outcome}, output)."""
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    cmd = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", "pytest.ini", "--rootdir", ".",
        "-rA", "--nbval", "--nbval-current-env", "--nbval-cell-timeout=60",
    ]
    if sanitize:
        cmd += ["--nbval-sanitize-with", str(SANITIZE)]
    result = subprocess.run([*cmd, *notebooks], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    outcomes = {(name, int(cell)): outcome for outcome, name, cell in RESULT_LINE.findall(output)}
    return result.returncode, outcomes, output


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """The tiny notebook, executed the way ``make notebooks`` executes the series."""
    folder = tmp_path_factory.mktemp("strict")
    path = folder / "tiny.ipynb"
    cells = [f"print({PRINTED!r})", "object()", "6 * 7"]
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    with pytest.MonkeyPatch.context() as mp:  # keep leaky variables out of the kernel
        for name in ("MPLBACKEND", "PYTHONWARNINGS"):
            mp.delenv(name, raising=False)
        _load_run_notebooks().execute(path)
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].outputs[0].text == PRINTED + "\n"
    assert re.fullmatch(r"<object.* at 0x[0-9a-f]+>", nb.cells[1].outputs[0].data["text/plain"])
    assert nb.cells[2].outputs[0].data["text/plain"] == "42"
    return nb


def _variant(folder: Path, nb: nbformat.NotebookNode, name: str, change=None) -> str:
    nb = copy.deepcopy(nb)
    if change:
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


def test_strict_comparison_is_real(executed, tmp_path: Path, clean_env: dict[str, str]) -> None:
    files = [
        _variant(tmp_path, executed, "unchanged.ipynb"),
        _variant(tmp_path, executed, "printed_changed.ipynb", _set_printed),
        _variant(tmp_path, executed, "result_changed.ipynb", _set_result),
        _variant(tmp_path, executed, "other_address.ipynb", _other_address),
        _variant(tmp_path, executed, "stripped.ipynb", _strip),
    ]
    code, outcomes, output = _nbval(tmp_path, clean_env, *files)
    expected = {(name, cell): "PASSED" for name in files for cell in range(3)}
    expected[("printed_changed.ipynb", 0)] = "FAILED"
    expected[("result_changed.ipynb", 2)] = "FAILED"
    assert outcomes == expected, output[-6000:]
    assert code == 1, output[-6000:]
    assert "hello, attention!" in output  # the report shows the difference


def test_sanitizer_is_what_hides_the_address(executed, tmp_path: Path, clean_env: dict[str, str]) -> None:
    name = _variant(tmp_path, executed, "other_address.ipynb", _other_address)
    code, outcomes, output = _nbval(tmp_path, clean_env, name, sanitize=False)
    assert outcomes == {(name, 0): "PASSED", (name, 1): "FAILED", (name, 2): "PASSED"}, output[-6000:]
    assert code == 1
