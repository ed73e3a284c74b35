"""The README's notebook index and every Colab link agree with notebooks/ and with pyproject.toml.

* The README has an index table with one row per notebook: each row names exactly one notebook
  file (``00_orientation.ipynb``), every notebook in ``notebooks/`` has exactly one row, and the
  README mentions no ``.ipynb`` file that does not exist in ``notebooks/``.
* Every Colab link has the form
  ``https://colab.research.google.com/github/<owner>/<repo>/blob/main/notebooks/<file>``, where
  ``<owner>/<repo>`` is pyproject.toml's ``[project.urls] Repository`` and ``<file>`` exists; each
  index row has exactly one Colab link, to its own notebook.
* The set-up cell's ``REPO`` (what Colab pip-installs) is that same Repository URL.

``index_problems`` does the README checks on text, so ``test_index_checker_*`` can feed it a
broken README and make sure it complains.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SETUP_CELL_FILE = REPO_ROOT / "tests" / "notebook_setup_cell.py"
BRANCH = "main"

IPYNB = re.compile(r"(?<![\w.-])([\w.-]+\.ipynb)\b")
COLAB = re.compile(
    r"https?://colab\.research\.google\.com/github/"
    r"(?P<owner>[^/\s)]+)/(?P<repo>[^/\s)]+)/blob/(?P<branch>[^/\s)]+)/(?P<path>[^\s)\]\"'<>#?]+)"
)


def repository_url() -> str:
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


def owner_repo(url: str) -> str:
    """``https://github.com/owner/repo`` -> ``owner/repo``."""
    parts = urlsplit(url)
    path = parts.path.strip("/").removesuffix(".git")
    assert parts.scheme == "https" and parts.netloc == "github.com" and path.count("/") == 1, (
        f"Repository URL {url!r} is not https://github.com/<owner>/<repo>"
    )
    return path


def setup_cell_repo() -> str:
    tree = ast.parse(SETUP_CELL_FILE.read_text(encoding="utf-8"))
    values = [
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "REPO" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    ]
    assert len(values) == 1, "tests/notebook_setup_cell.py must assign REPO = '<url>' exactly once"
    return values[0]


def index_problems(readme: str, notebooks: set[str], expected_owner_repo: str) -> list[str]:
    """Everything wrong with a README's index and Colab links (empty list: all fine)."""
    problems = []
    mentioned = set(IPYNB.findall(readme))
    for name in sorted(mentioned - notebooks):
        problems.append(f"the README mentions {name}, which is not in notebooks/")

    for link in COLAB.finditer(readme):
        where = f"Colab link {link.group(0)}"
        found = f"{link['owner']}/{link['repo']}"
        if found != expected_owner_repo:
            problems.append(f"{where} points at {found}, not {expected_owner_repo} (pyproject Repository)")
        if link["branch"] != BRANCH:
            problems.append(f"{where} uses branch {link['branch']!r}, not {BRANCH!r}")
        folder, _, file = link["path"].rpartition("/")
        if folder != "notebooks" or file not in notebooks:
            problems.append(f"{where} does not point at an existing notebooks/<file>.ipynb")

    rows: dict[str, int] = {name: 0 for name in notebooks}
    for line in readme.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        names = set(IPYNB.findall(COLAB.sub("", line)))  # the row's own notebook, not its link target
        if not names:
            continue
        if len(names) > 1:
            problems.append(f"index row names several notebooks {sorted(names)}: {line.strip()}")
            continue
        (name,) = names
        if name in rows:
            rows[name] += 1
        colab = [m["path"].rpartition("/")[2] for m in COLAB.finditer(line)]
        if colab != [name]:
            problems.append(f"index row for {name} must have exactly one Colab link, to {name}; has {colab}")
    for name, count in sorted(rows.items()):
        if count != 1:
            problems.append(f"{name} has {count} rows in the README's index table; expected exactly 1")
    return problems


# ------------------------------------------------------------------------------------------ tests


def test_repository_url_is_a_github_repository() -> None:
    owner_repo(repository_url())


def test_setup_cell_installs_from_the_repository() -> None:
    assert setup_cell_repo() == repository_url()


def test_readme_index_and_colab_links() -> None:
    assert README.is_file(), "README.md is missing"
    notebooks = {p.name for p in NOTEBOOKS_DIR.glob("*.ipynb")}
    problems = index_problems(README.read_text(encoding="utf-8"), notebooks, owner_repo(repository_url()))
    assert not problems, "README.md:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------- the checker itself is checked

_OR = "attention-step-by-step/attention-step-by-step"
_NOTEBOOKS = {"00_orientation.ipynb", "01_qkv_projection.ipynb"}


def _row(name: str, owner_repo_: str = _OR, branch: str = "main", target: str | None = None) -> str:
    url = f"https://colab.research.google.com/github/{owner_repo_}/blob/{branch}/notebooks/{target or name}"
    return f"| [{name}](notebooks/{name}) | what it teaches | [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url}) |"


def _readme(*rows: str) -> str:
    return "# Attention, step by step\n\nRun `make lab`.\n\n| notebook | topic | Colab |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def test_index_checker_accepts_a_good_readme() -> None:
    text = _readme(_row("00_orientation.ipynb"), _row("01_qkv_projection.ipynb"))
    assert index_problems(text, _NOTEBOOKS, _OR) == []


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([_row("00_orientation.ipynb")], "01_qkv_projection.ipynb has 0 rows"),
        ([_row("00_orientation.ipynb"), _row("00_orientation.ipynb"), _row("01_qkv_projection.ipynb")], "has 2 rows"),
        ([_row("00_orientation.ipynb"), _row("01_qkv_projection.ipynb"), _row("02_gone.ipynb")], "02_gone.ipynb, which is not"),
        ([_row("00_orientation.ipynb", owner_repo_="someone/fork"), _row("01_qkv_projection.ipynb")], "points at someone/fork"),
        ([_row("00_orientation.ipynb", branch="master"), _row("01_qkv_projection.ipynb")], "branch 'master'"),
        ([_row("00_orientation.ipynb", target="01_qkv_projection.ipynb"), _row("01_qkv_projection.ipynb")], "exactly one Colab link"),
        (["| 00_orientation.ipynb | no badge |", _row("01_qkv_projection.ipynb")], "exactly one Colab link"),
    ],
    ids=["missing", "duplicate", "nonexistent", "wrong-repo", "wrong-branch", "wrong-target", "no-badge"],
)
def test_index_checker_rejects(rows: list[str], expected: str) -> None:
    problems = index_problems(_readme(*rows), _NOTEBOOKS, _OR)
    assert any(expected in p for p in problems), problems
