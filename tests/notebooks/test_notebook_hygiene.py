"""Hygiene of the committed notebooks: what strict nbval cannot see on its own.

nbval re-runs every notebook and compares its printed outputs, but it compares only the cells that
were executed when the notebook was saved, and it does not look at errors in the saved file,
stderr, metadata, size or naming. Each ``check_*`` function below returns a list of problems (empty
when the notebook is fine) and is run once per ``notebooks/*.ipynb``; the ``test_checker_*`` tests
at the end feed each check a broken notebook, so a check that silently stopped checking fails too.

Rules (``make notebooks`` produces notebooks that follow all of them):

* The notebook is valid nbformat 4, its kernelspec name is ``python3``, and the file is under
  1.5 MB (1,500,000 bytes).
* The first cell is a code cell whose source is ``tests/notebook_setup_cell.py`` (both stripped),
  and it printed nothing.
* No empty code cells; every code cell was executed, with execution counts 1, 2, ..., n in order
  (one clean run from top to bottom).
* No ``error`` outputs and no ``stderr`` stream outputs (warnings print to stderr).
* No machine path or user name anywhere in the outputs or in notebook or cell metadata:
  ``/home/``, ``/root/``, ``/Users/``, ``C:\\Users``, ``/tmp/``, ``/var/folders/``,
  ``site-packages``, ``dist-packages``, the current home directory, the current user name as a
  path component or before ``@``, and this checkout's absolute path. Base64 images are not scanned.
* Justified nbval exceptions. Rule: a cell that weakens the comparison, with a marker comment
  (``# NBVAL_IGNORE_OUTPUT``, ``# NBVAL_SKIP``, ``# NBVAL_RAISES_EXCEPTION``) or a tag
  (``nbval-ignore-output``, ``nbval-skip``, ``raises-exception``, ...), must also contain a comment
  line that starts with ``# why:`` followed by the reason (at least 10 characters), e.g.::

      # NBVAL_IGNORE_OUTPUT
      # why: the slider's figure lands in the widget's state, which nbval sees as an extra output

  nbval recognises a marker only when it is alone on its comment line, so a comment that mentions
  ``NBVAL`` but is not exactly a marker (``# NBVAL_IGNORE_OUTPUT because ...``) is reported too:
  nbval would silently ignore it. The same goes for tags that mention ``nbval`` but are unknown.
* No missing figures: a cell with a top-level ``plt.show()`` line or a top-level call of a drawing
  helper from ``attn_helpers.views`` (``heatmap``, ``head_grid``, ...) has an ``image/png`` output
  (unless it displays a widget, whose figures live in the widget state), and every displayed
  ``<Figure ...>`` has its ``image/png``. ``MPLBACKEND=Agg`` leaking into the kernel breaks this.

Also: notebook file names are ``NN_snake_case.ipynb`` with unique, consecutive two-digit prefixes
starting at ``00`` (an optional appendix to lesson NN is ``NNa_snake_case.ipynb``), and the series starts with ``notebooks/00_orientation.ipynb``.
"""

from __future__ import annotations

import functools
import getpass
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SETUP_CELL = (REPO_ROOT / "tests" / "notebook_setup_cell.py").read_text(encoding="utf-8").strip()
FIRST_NOTEBOOK = "00_orientation.ipynb"
MAX_BYTES = 1_500_000
NAME_PATTERN = re.compile(r"^(\d\d)([a-z]?)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")  # 03a_...: an appendix to 03

# What nbval 0.11 itself recognises (nbval/plugin.py: comment_markers, metadata_tags). The comment
# markers must be alone on their line: nbval compares the stripped comment text for equality.
WEAKENING_COMMENT_MARKERS = {
    "NBVAL_IGNORE_OUTPUT",
    "PYTEST_VALIDATE_IGNORE_OUTPUT",
    "NBVAL_SKIP",
    "NBVAL_RAISES_EXCEPTION",
}
KNOWN_COMMENT_MARKERS = WEAKENING_COMMENT_MARKERS | {"NBVAL_CHECK_OUTPUT"}
WEAKENING_TAGS = {
    "nbval-ignore-output",
    "pytest-validate-ignore-output",
    "nbval-skip",
    "nbval-raises-exception",
    "raises-exception",
}
KNOWN_TAGS = WEAKENING_TAGS | {"nbval-check-output"}
JUSTIFICATION = re.compile(r"^\s*#\s*why:\s*(\S.*)$", re.IGNORECASE)
MIN_JUSTIFICATION_CHARS = 10

# Output data that is base64, not text: not scanned for paths (base64 contains "/").
BINARY_MIME_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}
# Top-level lines only (not inside a def, loop or callback): plt.show() or a call of one of
# attn_helpers.views' drawing helpers (kept in sync by test_plotting_helpers_exist).
PLOTTING_HELPERS = ("heatmap", "head_grid", "pipeline_diagram")
DRAWS_FIGURE = re.compile(
    r"^(?:plt\.show\(|(?:[\w, ]+=\s*)?(?:[\w.]+\.)?(?:" + "|".join(PLOTTING_HELPERS) + r")\()", re.MULTILINE
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _leak_patterns() -> list[tuple[str, re.Pattern[str]]]:
    fixed = [
        ("/home/", r"/home/"),
        ("/root/", r"/root/"),
        ("/Users/", r"/Users/"),
        ("C:\\Users", r"[A-Za-z]:\\+Users"),
        ("/tmp/", r"/tmp/"),
        ("/var/folders/", r"/var/folders/"),
        ("site-packages", r"site-packages"),
        ("dist-packages", r"dist-packages"),
    ]
    patterns = [(label, re.compile(rx, re.IGNORECASE)) for label, rx in fixed]
    # An absolute path ends at a character that cannot continue a file name.
    end = r"(?![\w.-])"
    for label, path in (("this checkout's path", str(REPO_ROOT)), ("the home directory", str(Path.home()))):
        if len(path.strip("/\\")) >= 2:  # a home of "/" (some containers) says nothing
            patterns.append((f"{label} {path}", re.compile(re.escape(path) + end)))
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (e.g. a container without passwd entry)
        user = ""
    if len(user) >= 2:
        # As a path component (/root, \alice\) or before "@" (alice@host): not as a plain word,
        # since a user called "root" must not fail "the square root of d_k".
        patterns.append(
            (f"the user name {user!r}", re.compile(rf"(?:[/\\]{re.escape(user)}{end}|\b{re.escape(user)}@)"))
        )
    return patterns


LEAK_PATTERNS = _leak_patterns()


@functools.lru_cache(maxsize=None)
def load(path: Path) -> nbformat.NotebookNode:
    """Read a notebook once per session, without converting its format. Do not modify the result."""
    return nbformat.read(path, as_version=nbformat.NO_CONVERT)


def _code_cells(nb: nbformat.NotebookNode) -> Iterator[tuple[int, Any]]:
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            yield index, cell


def _strings(obj: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON-like value, with where it is; base64 images are skipped."""
    if isinstance(obj, str):
        yield where, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if key not in BINARY_MIME_TYPES:
                yield from _strings(value, f"{where}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _strings(value, f"{where}[{i}]")


def _comment_lines(source: str) -> Iterator[str]:
    for line in source.splitlines():
        if line.strip().startswith("#"):
            yield line.strip()


# ---------------------------------------------------------------------------------------- checks


def check_format(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    if nb.get("nbformat") != 4:
        problems.append(f"nbformat version {nb.get('nbformat')}, expected 4")
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"not a valid notebook: {exc.message}")
    name = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if name != "python3":
        problems.append(f"kernelspec name is {name!r}, expected 'python3'")
    return problems


def check_setup_cell(nb: nbformat.NotebookNode) -> list[str]:
    if not nb.cells:
        return ["the notebook has no cells"]
    first = nb.cells[0]
    if first.cell_type != "code":
        return [f"the first cell is a {first.cell_type} cell; it must be the set-up code cell"]
    problems = []
    if first.source.strip() != SETUP_CELL:
        problems.append("the first cell differs from tests/notebook_setup_cell.py; paste that file's text")
    if first.get("outputs"):
        problems.append("the set-up cell printed something; outside Colab it must print nothing")
    return problems


def check_executed_in_order(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    counts = []
    for index, cell in _code_cells(nb):
        if not cell.source.strip():
            problems.append(f"cell {index} is an empty code cell; delete it")
            continue
        if cell.execution_count is None:
            problems.append(f"cell {index} was never executed (nbval would not compare it)")
        counts.append(cell.execution_count)
    expected = list(range(1, len(counts) + 1))
    if not problems and counts != expected:
        problems.append(f"execution counts are {counts}, expected {expected} (one run, top to bottom)")
    return problems


def check_no_errors_or_stderr(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    for index, cell in _code_cells(nb):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                problems.append(f"cell {index} has an error output: {output.get('ename')}: {output.get('evalue')}")
            elif output.output_type == "stream" and output.get("name") == "stderr":
                text = "".join(output.get("text", ""))
                problems.append(f"cell {index} wrote to stderr: {text.strip()[:200]!r}")
    return problems


def check_no_machine_paths(nb: nbformat.NotebookNode) -> list[str]:
    places: list[tuple[str, str]] = list(_strings(dict(nb.get("metadata", {})), "notebook metadata"))
    for index, cell in enumerate(nb.cells):
        places += _strings(dict(cell.get("metadata", {})), f"cell {index} metadata")
        if cell.cell_type == "code":
            places += _strings(list(cell.get("outputs", [])), f"cell {index} outputs")
    problems = []
    for where, text in places:
        for label, pattern in LEAK_PATTERNS:
            match = pattern.search(text)
            if match:
                start = max(match.start() - 40, 0)
                problems.append(f"{where} contains {label}: ...{text[start:match.end() + 40]!r}...")
    return problems


def _markers(cell: Any) -> tuple[list[str], list[str]]:
    """(weakening markers and tags present, near-miss markers and tags that nbval would ignore)."""
    present, ignored = [], []
    if cell.cell_type == "code":
        for line in _comment_lines(cell.source):
            text = line.lstrip("#").strip()
            if text in WEAKENING_COMMENT_MARKERS:
                present.append(f"# {text}")
            elif "NBVAL" in text.upper() and text not in KNOWN_COMMENT_MARKERS:
                ignored.append(line)
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag in WEAKENING_TAGS:
            present.append(f"tag {tag}")
        elif "nbval" in tag.lower() and tag not in KNOWN_TAGS:
            ignored.append(f"tag {tag}")
    return present, ignored


def check_nbval_markers_justified(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    for index, cell in enumerate(nb.cells):
        present, ignored = _markers(cell)
        for item in ignored:
            problems.append(
                f"cell {index}: {item!r} is not an nbval marker nbval recognises (a marker must be "
                "alone on its comment line, or an exact tag); nbval would ignore it"
            )
        if present:
            reasons = [
                m.group(1).strip()
                for m in map(JUSTIFICATION.match, cell.source.splitlines())
                if m and len(m.group(1).strip()) >= MIN_JUSTIFICATION_CHARS
            ]
            if not reasons:
                problems.append(
                    f"cell {index} has {', '.join(present)} but no justification: add a comment line "
                    f"'# why: <reason>' (at least {MIN_JUSTIFICATION_CHARS} characters)"
                )
    return problems


def check_figures_present(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    for index, cell in _code_cells(nb):
        if cell.get("execution_count") is None:
            continue  # never executed: check_executed_in_order reports it
        outputs = cell.get("outputs", [])
        datas = [o.get("data", {}) for o in outputs if o.output_type in ("display_data", "execute_result")]
        has_png = any("image/png" in d for d in datas)
        has_widget = any(WIDGET_VIEW in d for d in datas)
        drawing = DRAWS_FIGURE.search(cell.source)
        if drawing and not has_png and not has_widget:
            problems.append(
                f"cell {index} draws a figure ({drawing.group(0)!r}) but has no image/png output (MPLBACKEND leaked?)"
            )
        for d in datas:
            if str(d.get("text/plain", "")).startswith("<Figure size") and "image/png" not in d:
                problems.append(f"cell {index} displays {d['text/plain']!r} without its image/png")
    return problems


def check_size(path: Path) -> list[str]:
    size = path.stat().st_size
    return [] if size < MAX_BYTES else [f"{path.name} is {size:,} bytes; the limit is {MAX_BYTES:,}"]


NOTEBOOK_CHECKS = [
    check_format,
    check_setup_cell,
    check_executed_in_order,
    check_no_errors_or_stderr,
    check_no_machine_paths,
    check_nbval_markers_justified,
    check_figures_present,
]


def _report(path: Path, problems: list[str]) -> str:
    return f"{path.name}:\n  " + "\n  ".join(problems)


# ------------------------------------------------------------------------ tests on the notebooks


@pytest.mark.parametrize("check", NOTEBOOK_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_notebook(notebook_path: Path, check) -> None:
    problems = check(load(notebook_path))
    assert not problems, _report(notebook_path, problems)


def test_notebook_size(notebook_path: Path) -> None:
    problems = check_size(notebook_path)
    assert not problems, _report(notebook_path, problems)


def test_series_starts_with_orientation() -> None:
    assert (NOTEBOOKS_DIR / FIRST_NOTEBOOK).is_file(), f"notebooks/{FIRST_NOTEBOOK} is missing"


def check_names(names: list[str]) -> list[str]:
    problems = [f"{n!r} is not named NN_snake_case.ipynb" for n in names if not NAME_PATTERN.match(n)]
    matches = [m for n in names if (m := NAME_PATTERN.match(n))]
    prefixes = sorted(int(m.group(1)) for m in matches if not m.group(2))
    if prefixes != list(range(len(prefixes))):
        problems.append(
            f"prefixes are {[f'{p:02d}' for p in prefixes]}; they must be unique and consecutive from 00"
        )
    appendices = [m.group(1) + m.group(2) for m in matches if m.group(2)]
    for appendix in appendices:
        if int(appendix[:2]) not in prefixes:
            problems.append(f"appendix {appendix} belongs to no lesson {appendix[:2]}")
    if len(set(appendices)) != len(appendices):
        problems.append(f"appendix prefixes {sorted(appendices)} are not unique")
    return problems


def test_notebook_names() -> None:
    names = [p.name for p in NOTEBOOKS_DIR.glob("*.ipynb")]
    problems = check_names(names)
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------- the checks themselves are checked


def _good_notebook() -> nbformat.NotebookNode:
    """A small notebook as ``make notebooks`` writes it: every check must accept it."""
    new_cell, new_output = nbformat.v4.new_code_cell, nbformat.v4.new_output
    cells = [
        new_cell(SETUP_CELL, execution_count=1),
        nbformat.v4.new_markdown_cell("## Scores\nThe square root of d_k, and one weighted average."),
        new_cell(
            'print("q:", tuple(q.shape))',
            execution_count=2,
            outputs=[new_output("stream", name="stdout", text="q: (2, 5, 8)\n")],
        ),
        new_cell(
            "plt.imshow(weights)\nplt.show()",
            execution_count=3,
            outputs=[new_output("display_data", data={"image/png": "iVBORw0/home/x", "text/plain": "<Figure size 640x480 with 1 Axes>"})],
        ),
        new_cell(
            "# NBVAL_IGNORE_OUTPUT\n# why: the slider's figure lands in the widget state\ninteract(show, t=(0.1, 2.0))",
            execution_count=4,
            outputs=[new_output("display_data", data={WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0}, "text/plain": "interactive(...)"})],
        ),
        new_cell("def draw(t):\n    heatmap(w / t)\n    plt.show()", execution_count=5),  # defines, draws nothing
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def _problems(nb: nbformat.NotebookNode) -> list[str]:
    return [p for check in NOTEBOOK_CHECKS for p in check(nb)]


def test_checker_accepts_a_clean_notebook() -> None:
    assert _problems(_good_notebook()) == []


def _broken(change) -> list[str]:
    nb = _good_notebook()
    change(nb)
    return _problems(nb)


def _set(obj, key, value):
    obj[key] = value


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda nb: _set(nb.cells[2], "execution_count", None), "never executed"),
        (lambda nb: (_set(nb.cells[2], "execution_count", None), _set(nb.cells[2], "outputs", [])), "never executed"),
        (lambda nb: _set(nb.cells[3], "execution_count", 7), "execution counts"),
        (lambda nb: nb.cells.append(nbformat.v4.new_code_cell("")), "empty code cell"),
        (lambda nb: nb.cells[2].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="UserWarning: x\n")), "stderr"),
        (lambda nb: nb.cells[2].outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])), "error output"),
        (lambda nb: _set(nb.cells[2].outputs[0], "text", "File /usr/lib/python3/site-packages/x.py\n"), "site-packages"),
        (lambda nb: _set(nb.cells[2].outputs[0], "text", f"saved to {REPO_ROOT / 'build'}\n"), "checkout's path"),
        (lambda nb: _set(nb.cells[2].outputs[0], "text", "C:\\Users\\ada\\x.txt\n"), "C:\\Users"),
        (lambda nb: _set(nb.metadata, "vscode", {"interpreter": "/home/ada/venv/bin/python"}), "/home/"),
        (lambda nb: _set(nb.metadata["kernelspec"], "name", "attention"), "kernelspec"),
        (lambda nb: _set(nb.cells[0], "source", "import torch"), "tests/notebook_setup_cell.py"),
        (lambda nb: nb.cells.insert(0, nbformat.v4.new_markdown_cell("# Title")), "first cell"),
        (lambda nb: _set(nb.cells[4], "source", "# NBVAL_IGNORE_OUTPUT\ninteract(show, t=(0.1, 2.0))"), "no justification"),
        (lambda nb: _set(nb.cells[4], "source", "# NBVAL_IGNORE_OUTPUT because widgets\ninteract(show)"), "nbval would ignore"),
        (lambda nb: _set(nb.cells[2].metadata, "tags", ["nbval-skip"]), "no justification"),
        (lambda nb: _set(nb.cells[2].metadata, "tags", ["nbval-ignore"]), "nbval would ignore"),
        (lambda nb: nb.cells[3].outputs[0].data.pop("image/png"), "no image/png"),
        (lambda nb: nb.cells.append(nbformat.v4.new_code_cell("plotting.heatmap(w, tokens);", execution_count=6)), "draws a figure"),
        (lambda nb: nb.cells.append(nbformat.v4.new_code_cell("img = heatmap(w)", execution_count=6)), "draws a figure"),
    ],
    ids=[
        "unexecuted",
        "unexecuted-stripped",
        "out-of-order",
        "empty-cell",
        "stderr",
        "error",
        "site-packages",
        "repo-path",
        "windows-home",
        "metadata-path",
        "kernelspec",
        "setup-cell-changed",
        "setup-cell-not-first",
        "marker-unjustified",
        "marker-not-alone",
        "tag-unjustified",
        "unknown-tag",
        "missing-figure",
        "helper-without-figure",
        "assigned-helper-without-figure",
    ],
)
def test_checker_rejects(change, expected: str) -> None:
    problems = _broken(change)
    assert any(expected in p for p in problems), problems


def test_plotting_helpers_exist() -> None:
    """The figure check knows attn_helpers.views' drawing helpers by name: keep them in sync."""
    views = pytest.importorskip("attn_helpers.views")
    assert set(PLOTTING_HELPERS) <= set(views.__all__)


def test_checker_names() -> None:
    assert check_names(["00_orientation.ipynb", "01_qkv_projection.ipynb"]) == []
    assert check_names([]) == []
    assert check_names(["00_a.ipynb", "02_b.ipynb"])  # gap
    assert check_names(["00_a.ipynb", "00_b.ipynb"])  # duplicate prefix
    assert check_names(["01_a.ipynb"])  # does not start at 00
    assert check_names(["00_Orientation.ipynb"])  # not snake case
    assert check_names(["0_a.ipynb", "00_b.ipynb"])  # one digit
    assert check_names(["00_a.ipynb", "01_b.ipynb", "01a_c.ipynb"]) == []  # an appendix to 01
    assert check_names(["00_a.ipynb", "02a_c.ipynb"])  # an appendix without its lesson
    assert check_names(["00_a.ipynb", "00a_b.ipynb", "00a_c.ipynb"])  # duplicate appendix


def test_checker_size(tmp_path: Path) -> None:
    small, big = tmp_path / "00_small.ipynb", tmp_path / "01_big.ipynb"
    small.write_bytes(b"x" * 1000)
    big.write_bytes(b"x" * MAX_BYTES)
    assert check_size(small) == [] and check_size(big)
