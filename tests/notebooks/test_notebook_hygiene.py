"""Hygiene of the committed notebooks: what strict nbval cannot see on its own.

nbval re-runs every notebook and compares its printed outputs, but it compares only the cells that
were executed when the notebook was saved, and it does not look at errors in the saved file,
stderr, metadata, size or naming. Each ``check_*`` function below returns a list of problems (empty
when the notebook is fine) and is run once per ``notebooks/*.ipynb``; the ``test_checker_*`` tests
at the end feed each check a broken notebook, so a check that silently stopped checking fails too.

Rules (``make notebooks`` produces notebooks that follow all of them):

* The notebook is valid nbformat 4, and the file is under 1.5 MB (1,500,000 bytes). Its kernelspec is
  exactly the one this environment's ipykernel reports (name, display name, language: what JupyterLab
  writes when the kernel starts), so opening a notebook does not mark it changed.
* The first cell is the lesson's title (markdown, ``# ...``); the second is a code cell whose source is
  ``tests/notebook_setup_cell.py`` (both stripped), and it printed nothing.
* No empty code cells; every code cell was executed, with execution counts 1, 2, ..., n in order
  (one clean run from top to bottom).
* No ``error`` outputs and no ``stderr`` stream outputs (warnings print to stderr).
* No machine path or user name anywhere in the outputs or in notebook or cell metadata:
  ``/home/``, ``/root/``, ``/Users/``, ``C:\\Users``, ``/tmp/``, ``/var/folders/``,
  ``site-packages``, ``dist-packages``, the current home directory, the current user name as a
  path component or before ``@``, and this checkout's absolute path. Base64 images are not scanned.
* nbval's markers are cell tags, never comments a learner reads: no code cell has a comment line
  that mentions ``NBVAL`` (``# NBVAL_IGNORE_OUTPUT`` and the like; move it to the tag nbval reads,
  ``nbval-ignore-output``). A tag that mentions ``nbval`` but that nbval does not know is reported.
* Justified nbval exceptions. Rule: every cell with a tag that weakens the comparison
  (``nbval-ignore-output``, ``nbval-skip``, ``raises-exception``, ...) has a row in
  ``tests/notebooks/IGNORED_OUTPUTS.md`` (notebook, cell id, its weakening tags) whose reason has at
  least 10 characters, and every row there names such a cell (no stale rows).
* No missing figures: a cell with a top-level ``plt.show()`` line or a top-level call of a drawing
  helper from ``attn_helpers.views`` (``heatmap``, ``head_grid``, ...) has a picture: an ``image/png``
  output or a figure shown as one HTML ``<img>`` of its PNG (``attn_helpers/views/display.py``), unless it
  displays a widget; and every displayed ``<Figure ...>`` has its picture. ``MPLBACKEND=Agg`` leaking into the
  kernel breaks this.

Also: notebook file names are ``NN_snake_case.ipynb`` with unique, consecutive two-digit prefixes
starting at ``00`` (an optional appendix to lesson NN is ``NNa_snake_case.ipynb``), and the series starts with ``notebooks/00_orientation.ipynb``.
"""

from __future__ import annotations

import functools
import getpass
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipykernel.kernelspec
import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SETUP_CELL = (REPO_ROOT / "tests" / "notebook_setup_cell.py").read_text(encoding="utf-8").strip()
FIRST_NOTEBOOK = "00_orientation.ipynb"
MAX_BYTES = 1_500_000
NAME_PATTERN = re.compile(r"^(\d\d)([a-z]?)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")  # 03a_...: an appendix to 03

# What nbval 0.11 itself recognises (nbval/plugin.py: comment_markers, and metadata_tags made from them
# as marker.lower().replace("_", "-"), plus "raises-exception"). Comment markers are not used here.
COMMENT_MARKERS = {
    "NBVAL_IGNORE_OUTPUT",
    "PYTEST_VALIDATE_IGNORE_OUTPUT",
    "NBVAL_SKIP",
    "NBVAL_RAISES_EXCEPTION",
    "NBVAL_CHECK_OUTPUT",
}
WEAKENING_TAGS = {
    "nbval-ignore-output",
    "pytest-validate-ignore-output",
    "nbval-skip",
    "nbval-raises-exception",
    "raises-exception",
}
KNOWN_TAGS = WEAKENING_TAGS | {"nbval-check-output"}
# Where the reasons are written: one row per cell with a weakening tag.
IGNORED_OUTPUTS = Path(__file__).resolve().with_name("IGNORED_OUTPUTS.md")
IGNORED_OUTPUTS_COLUMNS = ("notebook", "cell id", "tags", "why nbval does not compare it")
MIN_JUSTIFICATION_CHARS = 10

# Output data that is base64, not text: not scanned for paths (base64 contains "/").
BINARY_MIME_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}
# A figure shown as HTML (attn_helpers/views/display.py): <img src="data:image/png;base64,..." ...>; its base64 is
# not scanned either.
FIGURE_HTML = re.compile(r'^\s*<img src="data:image/png;base64,')
BASE64_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")
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
        yield where, BASE64_PNG.sub("data:image/png;base64,", obj)
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


def expected_kernelspec() -> dict[str, str]:
    """What JupyterLab writes into a notebook when this environment's kernel starts: ipykernel's own
    kernelspec (name, display name, language), read from the installed ipykernel."""
    spec = ipykernel.kernelspec.get_kernel_dict()
    return {"name": ipykernel.kernelspec.KERNEL_NAME, "display_name": spec["display_name"], "language": spec["language"]}


# ---------------------------------------------------------------------------------------- checks


def check_format(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    if nb.get("nbformat") != 4:
        problems.append(f"nbformat version {nb.get('nbformat')}, expected 4")
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"not a valid notebook: {exc.message}")
    found = dict(nb.get("metadata", {}).get("kernelspec", {}))
    expected = expected_kernelspec()
    if found != expected:
        problems.append(f"kernelspec is {found}, expected {expected}, what ipykernel reports (JupyterLab would "
                        "mark the notebook changed on opening); `make notebooks` writes it")
    return problems


def check_setup_cell(nb: nbformat.NotebookNode) -> list[str]:
    if len(nb.cells) < 2:
        return ["the notebook needs its title cell and its set-up cell"]
    title, first = nb.cells[0], nb.cells[1]
    problems = []
    if title.cell_type != "markdown" or not title.source.startswith("# "):
        problems.append("the first cell must be the lesson's title (a markdown cell starting '# '): the lesson "
                        "comes before the plumbing")
    if first.cell_type != "code":
        return problems + [f"the second cell is a {first.cell_type} cell; it must be the set-up code cell"]
    if first.source.strip() != SETUP_CELL:
        problems.append("the set-up cell differs from tests/notebook_setup_cell.py; paste that file's text")
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


def check_nbval_markers_are_tags(nb: nbformat.NotebookNode) -> list[str]:
    """No nbval comment marker in a code cell (a learner reads it); no tag nbval would not recognise."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for line in _comment_lines(cell.source):
                text = line.lstrip("#").strip()
                if text in COMMENT_MARKERS:
                    problems.append(
                        f"cell {index} has the comment {line!r}: use the cell tag "
                        f"{text.lower().replace('_', '-')!r} instead and write the reason in {IGNORED_OUTPUTS.name}"
                    )
                elif "NBVAL" in text.upper():
                    problems.append(
                        f"cell {index} has the comment {line!r}, which mentions NBVAL: nbval would ignore it "
                        "(it is not a marker), and markers belong in the cell's tags"
                    )
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag not in KNOWN_TAGS and "nbval" in tag.lower():
                problems.append(f"cell {index}: tag {tag!r} is not a tag nbval recognises; nbval would ignore it")
    return problems


# ------------------------------------------------------------------ the reasons for weakening tags


@dataclass(frozen=True)
class IgnoreReason:
    """One row of ``IGNORED_OUTPUTS.md``."""

    notebook: str
    cell_id: str
    tags: frozenset[str]
    reason: str
    line: int


def read_ignore_reasons(text: str) -> tuple[dict[tuple[str, str], IgnoreReason], list[str]]:
    """The table's rows by (notebook, cell id), and the problems of the table itself.

    The table is the first Markdown table in ``text`` with the columns of ``IGNORED_OUTPUTS_COLUMNS``;
    values may be written in backticks, several tags separated by commas.
    """
    rows: dict[tuple[str, str], IgnoreReason] = {}
    problems: list[str] = []
    table = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if line.strip().startswith("|")]
    if not table:
        return rows, ["no table found"]

    def cells(line: str) -> list[str]:
        return [c.strip().strip("`").strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]

    header = tuple(c.lower() for c in cells(table[0][1]))
    if header != IGNORED_OUTPUTS_COLUMNS:
        problems.append(f"line {table[0][0]}: the table's columns are {header}, expected {IGNORED_OUTPUTS_COLUMNS}")
    for number, line in table[1:]:
        values = cells(line)
        if all(re.fullmatch(r":?-+:?", v) for v in values):
            continue  # the separator row
        if len(values) != len(IGNORED_OUTPUTS_COLUMNS):
            problems.append(f"line {number}: {len(values)} columns, expected {len(IGNORED_OUTPUTS_COLUMNS)}: {line!r}")
            continue
        notebook, cell_id, tags, reason = values
        key = (notebook, cell_id)
        if key in rows:
            problems.append(f"line {number}: a second row for {notebook} cell {cell_id} (first on line {rows[key].line})")
            continue
        rows[key] = IgnoreReason(notebook, cell_id, frozenset(t.strip().strip("`") for t in tags.split(",") if t.strip()),
                                 reason, number)
    return rows, problems


def check_weakening_tags_explained(name: str, nb: nbformat.NotebookNode,
                                   reasons: dict[tuple[str, str], IgnoreReason]) -> list[str]:
    """Every cell of notebook ``name`` with a weakening tag has its row with a reason; no row of this
    notebook names a cell that is gone or no longer tagged."""
    problems = []
    tagged: set[str] = set()
    for index, cell in enumerate(nb.cells):
        weakening = {t for t in cell.get("metadata", {}).get("tags", []) if t in WEAKENING_TAGS}
        if not weakening:
            continue
        cell_id = cell.get("id")
        if not cell_id:
            problems.append(f"cell {index} has {sorted(weakening)} but no cell id to name it by (nbformat 4.5)")
            continue
        tagged.add(cell_id)
        row = reasons.get((name, cell_id))
        if row is None:
            problems.append(
                f"cell {index} (id {cell_id}) has the tags {sorted(weakening)} but {IGNORED_OUTPUTS.name} has no row "
                f"for it: add '| {name} | {cell_id} | {', '.join(sorted(weakening))} | <why> |'"
            )
            continue
        if row.tags != weakening:
            problems.append(f"cell {index} (id {cell_id}) has the tags {sorted(weakening)}, its row in "
                            f"{IGNORED_OUTPUTS.name} (line {row.line}) says {sorted(row.tags)}")
        if len(row.reason) < MIN_JUSTIFICATION_CHARS:
            problems.append(f"cell {index} (id {cell_id}): the reason {row.reason!r} in {IGNORED_OUTPUTS.name} "
                            f"(line {row.line}) is shorter than {MIN_JUSTIFICATION_CHARS} characters")
    for (notebook, cell_id), row in reasons.items():
        if notebook == name and cell_id not in tagged:
            problems.append(f"{IGNORED_OUTPUTS.name} line {row.line} names cell {cell_id}, which has no "
                            "weakening tag in this notebook (or does not exist): delete the row")
    return problems


def check_figures_present(nb: nbformat.NotebookNode) -> list[str]:
    problems = []
    for index, cell in _code_cells(nb):
        if cell.get("execution_count") is None:
            continue  # never executed: check_executed_in_order reports it
        outputs = cell.get("outputs", [])
        datas = [o.get("data", {}) for o in outputs if o.output_type in ("display_data", "execute_result")]
        has_png = any(_has_picture(d) for d in datas)
        has_widget = any(WIDGET_VIEW in d for d in datas)
        drawing = DRAWS_FIGURE.search(cell.source)
        if drawing and not has_png and not has_widget:
            problems.append(
                f"cell {index} draws a figure ({drawing.group(0)!r}) but has no image/png output (MPLBACKEND leaked?)"
            )
        for d in datas:
            if str(d.get("text/plain", "")).startswith("<Figure size") and not _has_picture(d):
                problems.append(f"cell {index} displays {d['text/plain']!r} without its image/png")
    return problems


def _has_picture(data: dict) -> bool:
    """An image/png, or a figure shown as one HTML <img> of its PNG."""
    html = data.get("text/html", "")
    return "image/png" in data or bool(FIGURE_HTML.match("".join(html) if isinstance(html, list) else html))


def check_size(path: Path) -> list[str]:
    size = path.stat().st_size
    return [] if size < MAX_BYTES else [f"{path.name} is {size:,} bytes; the limit is {MAX_BYTES:,}"]


NOTEBOOK_CHECKS = [
    check_format,
    check_setup_cell,
    check_executed_in_order,
    check_no_errors_or_stderr,
    check_no_machine_paths,
    check_nbval_markers_are_tags,
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


@functools.lru_cache(maxsize=None)
def ignore_reasons() -> tuple[dict[tuple[str, str], IgnoreReason], list[str]]:
    return read_ignore_reasons(IGNORED_OUTPUTS.read_text(encoding="utf-8"))


def test_weakening_tags_explained(notebook_path: Path) -> None:
    problems = check_weakening_tags_explained(notebook_path.name, load(notebook_path), ignore_reasons()[0])
    assert not problems, _report(notebook_path, problems)


def test_ignored_outputs_table() -> None:
    """The reasons' table reads cleanly and names only notebooks of the series."""
    rows, problems = ignore_reasons()
    names = {p.name for p in NOTEBOOKS_DIR.glob("*.ipynb")}
    problems += [f"line {row.line}: {row.notebook!r} is not a notebook in notebooks/" for row in rows.values()
                 if row.notebook not in names]
    assert not problems, f"{IGNORED_OUTPUTS}:\n  " + "\n  ".join(problems)


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
        nbformat.v4.new_markdown_cell("# 02 · Scores\nOne sentence of what the lesson does."),
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
            "interact(show, t=(0.1, 2.0))",
            metadata={"tags": ["nbval-ignore-output"]},
            id="interact-cell",
            execution_count=4,
            outputs=[new_output("display_data", data={WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0}, "text/plain": "interactive(...)"})],
        ),
        new_cell("def draw(t):\n    heatmap(w / t)\n    plt.show()", execution_count=5),  # defines, draws nothing
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = expected_kernelspec()
    return nb


GOOD_REASONS = f"""# Outputs nbval does not compare

| Notebook | Cell id | Tags | Why nbval does not compare it |
|---|---|---|---|
| `good.ipynb` | `interact-cell` | `nbval-ignore-output` | the slider's figure lands in the widget state, an extra output for nbval |
"""


def _reason_problems(nb: nbformat.NotebookNode, table: str = GOOD_REASONS) -> list[str]:
    rows, problems = read_ignore_reasons(table)
    return problems + check_weakening_tags_explained("good.ipynb", nb, rows)


def _problems(nb: nbformat.NotebookNode) -> list[str]:
    return [p for check in NOTEBOOK_CHECKS for p in check(nb)]


def test_checker_accepts_a_clean_notebook() -> None:
    assert _problems(_good_notebook()) == []
    assert _reason_problems(_good_notebook()) == []


def test_expected_kernelspec_is_what_the_installed_kernel_reports() -> None:
    """Read independently of ipykernel's module: the kernelspec Jupyter finds for this environment's
    ``python3`` (the one JupyterLab starts and copies into the notebook)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert expected_kernelspec() == {"name": "python3", "display_name": spec.display_name, "language": spec.language}


def test_run_notebooks_joins_consecutive_stream_outputs_only() -> None:
    """A busy kernel sends one cell's printing in several messages: the saved notebook has one output per run of them,
    and keeps outputs of another kind (or another stream) where they were."""
    from scripts.run_notebooks import joined_streams

    out = nbformat.v4.new_output
    outputs = [out("stream", name="stdout", text="a\n"), out("stream", name="stdout", text="b\n"),
               out("display_data", data={"text/plain": "figure"}), out("stream", name="stdout", text="c\n"),
               out("stream", name="stderr", text="d\n")]
    joined = joined_streams(outputs)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in joined] == [
        ("stream", "stdout", "a\nb\n"), ("display_data", None, None), ("stream", "stdout", "c\n"),
        ("stream", "stderr", "d\n")]


def test_run_notebooks_writes_the_expected_kernelspec() -> None:
    from scripts.run_notebooks import kernelspec

    assert kernelspec() == expected_kernelspec()


def _broken(change) -> list[str]:
    nb = _good_notebook()
    change(nb)
    return _problems(nb)


def _set(obj, key, value):
    obj[key] = value


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda nb: _set(nb.cells[3], "execution_count", None), "never executed"),
        (lambda nb: (_set(nb.cells[3], "execution_count", None), _set(nb.cells[3], "outputs", [])), "never executed"),
        (lambda nb: _set(nb.cells[4], "execution_count", 7), "execution counts"),
        (lambda nb: nb.cells.append(nbformat.v4.new_code_cell("")), "empty code cell"),
        (lambda nb: nb.cells[3].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="UserWarning: x\n")), "stderr"),
        (lambda nb: nb.cells[3].outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])), "error output"),
        (lambda nb: _set(nb.cells[3].outputs[0], "text", "File /usr/lib/python3/site-packages/x.py\n"), "site-packages"),
        (lambda nb: _set(nb.cells[3].outputs[0], "text", f"saved to {REPO_ROOT / 'build'}\n"), "checkout's path"),
        (lambda nb: _set(nb.cells[3].outputs[0], "text", "C:\\Users\\ada\\x.txt\n"), "C:\\Users"),
        (lambda nb: _set(nb.metadata, "vscode", {"interpreter": "/home/ada/venv/bin/python"}), "/home/"),
        (lambda nb: _set(nb.metadata["kernelspec"], "name", "attention"), "kernelspec"),
        (lambda nb: _set(nb.metadata["kernelspec"], "display_name", "Python 3"), "kernelspec"),
        (lambda nb: nb.metadata["kernelspec"].pop("language"), "kernelspec"),
        (lambda nb: _set(nb.cells[1], "source", "import torch"), "tests/notebook_setup_cell.py"),
        (lambda nb: nb.cells.pop(0), "title"),
        (lambda nb: _set(nb.cells[0], "source", "Some text"), "title"),
        (lambda nb: nb.cells.insert(1, nbformat.v4.new_markdown_cell("More")), "set-up code cell"),
        (lambda nb: _set(nb.cells[5], "source", "# NBVAL_IGNORE_OUTPUT\n# why: widget state\ninteract(show)"), "use the cell tag 'nbval-ignore-output'"),
        (lambda nb: _set(nb.cells[3], "source", "#NBVAL_SKIP\nprint(q.shape)"), "use the cell tag 'nbval-skip'"),
        (lambda nb: _set(nb.cells[5], "source", "# NBVAL_IGNORE_OUTPUT because widgets\ninteract(show)"), "nbval would ignore"),
        (lambda nb: _set(nb.cells[3].metadata, "tags", ["nbval-ignore"]), "nbval would ignore"),
        (lambda nb: nb.cells[4].outputs[0].data.pop("image/png"), "no image/png"),
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
        "kernelspec-old-display-name",
        "kernelspec-without-language",
        "setup-cell-changed",
        "title-missing",
        "title-not-a-heading",
        "setup-cell-not-second",
        "comment-marker",
        "comment-marker-without-space",
        "marker-not-alone",
        "unknown-tag",
        "missing-figure",
        "helper-without-figure",
        "assigned-helper-without-figure",
    ],
)
def test_checker_rejects(change, expected: str) -> None:
    problems = _broken(change)
    assert any(expected in p for p in problems), problems


def _retag(nb: nbformat.NotebookNode, index: int, tags: list[str]) -> nbformat.NotebookNode:
    nb.cells[index].metadata["tags"] = tags
    return nb


def _cell_id(nb: nbformat.NotebookNode, index: int, cell_id: str) -> nbformat.NotebookNode:
    nb.cells[index]["id"] = cell_id
    return nb


ROW = "| `good.ipynb` | `interact-cell` | `nbval-ignore-output` | the slider's figure lands in the widget state, an extra output for nbval |"


@pytest.mark.parametrize(
    "nb, table, expected",
    [
        (_retag(_good_notebook(), 3, ["nbval-skip"]), GOOD_REASONS, "has no row for it"),
        (_good_notebook(), GOOD_REASONS.replace(ROW, "| good.ipynb | interact-cell | nbval-ignore-output | widgets |"), "shorter than 10"),
        (_good_notebook(), GOOD_REASONS.replace(ROW, "| good.ipynb | interact-cell | nbval-ignore-output |  |"), "shorter than 10"),
        (_good_notebook(), GOOD_REASONS.replace(ROW, ROW.replace("`nbval-ignore-output`", "`nbval-skip`")), "its row in"),
        (_retag(_good_notebook(), 5, ["nbval-ignore-output", "nbval-skip"]), GOOD_REASONS, "its row in"),
        (_retag(_good_notebook(), 5, []), GOOD_REASONS, "delete the row"),
        (_cell_id(_good_notebook(), 5, "renamed"), GOOD_REASONS, "has no row for it"),
        (_good_notebook(), GOOD_REASONS + ROW.replace("interact-cell", "gone") + "\n", "delete the row"),
        (_good_notebook(), GOOD_REASONS + ROW + "\n", "a second row"),
        (_good_notebook(), GOOD_REASONS + "| good.ipynb | x | nbval-skip |\n", "3 columns"),
        (_good_notebook(), GOOD_REASONS.replace("| Tags |", "| Tag |"), "columns are"),
        (_good_notebook(), "no table here", "has no row for it"),
    ],
    ids=["tag-without-row", "short-reason", "empty-reason", "row-with-other-tag", "cell-with-more-tags", "stale-row-untagged",
         "stale-row-renamed-cell", "stale-row-unknown-cell", "duplicate-row", "short-row", "wrong-header", "no-table"],
)
def test_checker_rejects_unexplained_tags(nb: nbformat.NotebookNode, table: str, expected: str) -> None:
    problems = _reason_problems(nb, table)
    assert any(expected in p for p in problems), problems


def test_checker_reads_the_reasons_table() -> None:
    rows, problems = read_ignore_reasons(GOOD_REASONS + "| a.ipynb | b | nbval-skip, raises-exception | a reason with a \\| pipe |\n")
    assert problems == []
    assert rows[("a.ipynb", "b")].tags == {"nbval-skip", "raises-exception"}
    assert rows[("good.ipynb", "interact-cell")].reason.startswith("the slider's figure")


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
