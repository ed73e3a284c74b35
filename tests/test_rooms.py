"""Imports go one way through the package's rooms: widgets/checks -> views/lab -> core -> torch.

Every module of ``attn_helpers`` is parsed with ``ast`` (nothing is imported) and each import is held
against ``RULES``, one row per room: the rooms it may import, the libraries it may import at the top of a
module, and the heavy libraries it may import only inside a function (so importing the room stays cheap).
The standard library is always allowed. Besides the table:

* nothing inside the package imports the package's face (``attn_helpers/__init__.py``): no
  ``import attn_helpers``, ``from attn_helpers import X`` or ``from .. import X`` reaching it;
* no private name (a leading underscore: a module or a name) is imported from another room;
* the package's root holds only its face, its README and the ``py.typed`` marker, and every folder in it
  is a room of the table.

A failure lists every violation as ``file:line: what``. The ``test_checker_*`` tests plant one violation
of each rule in a snippet or a temporary package and make sure the checker names it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "attn_helpers"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE


@dataclass(frozen=True)
class Room:
    rooms: frozenset[str]  # the package's rooms it may import (itself included)
    libraries: frozenset[str]  # third-party libraries it may import anywhere
    inside_functions: frozenset[str] = frozenset()  # heavy libraries it may import only inside a function


def _room(rooms: str, libraries: str, inside_functions: str = "") -> Room:
    return Room(frozenset(rooms.split()), frozenset(libraries.split()), frozenset(inside_functions.split()))


# The direction: widgets/checks -> views/lab -> core -> torch. The face (the root's __init__.py) is
# the top: it may re-export any room, and imports no library itself.
RULES: dict[str, Room] = {
    #              rooms it may import             libraries                                  only inside a function
    "core":    _room("core",                       "torch"),
    "lab":     _room("core lab",                   "torch numpy",
                     "transformers huggingface_hub safetensors tokenizers"),
    "views":   _room("views",                      "torch numpy matplotlib"),
    "widgets": _room("core lab views widgets",     "torch numpy matplotlib ipywidgets PIL"),
    "checks":  _room("core lab views checks",      "torch numpy"),
    "":        _room("core lab views widgets checks", ""),
}
# Files the package's root may hold besides the rooms' folders: the face, the README (pyproject's
# readme) and PEP 561's marker that the package has type hints.
ROOT_FILES = {"__init__.py", "README.md", "py.typed"}
STDLIB = frozenset(sys.stdlib_module_names)


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _inside_function(tree: ast.Module) -> set[ast.AST]:
    """The import statements of ``tree`` that sit inside a function (at any depth)."""
    nested = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested.update(n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return nested


def _imports(tree: ast.Module, package: str) -> list[tuple[ast.stmt, str, list[str]]]:
    """``(node, absolute module, names imported from it)`` for every import of a module in ``package``.

    ``import a.b`` gives ``("a.b", [])``; ``from .x import y, z`` gives ``("<package>.x", ["y", "z"])``; a
    relative import reaching above the top gives ``""``.
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level - 1 >= len(base):  # above the top of the package: nothing to resolve it to
                    found.append((node, "", [alias.name for alias in node.names]))
                    continue
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node, module, [alias.name for alias in node.names]))
    return found


def _library_problem(room: str, rule: Room, library: str, in_function: bool) -> str | None:
    """What is wrong with ``room`` importing the third-party ``library`` (None: allowed)."""
    if library in rule.libraries or (library in rule.inside_functions and in_function):
        return None
    if library in rule.inside_functions:
        return f"imports {library} at module level; {room}/ may import it only inside a function"
    return (f"{room or 'the face'} imports {library}, which is not in its row "
            f"(libraries: {', '.join(sorted(rule.libraries)) or 'none'})")


def _package_problems(relpath: str, room: str, rule: Room, module: str, names: list[str]) -> list[str]:
    """What is wrong with ``room`` importing ``names`` from ``module``, a module of the package."""
    inner = module.split(".")[1:]
    if not inner and names and all(name in RULES and name for name in names):
        # `from .. import core, lab` imports the rooms themselves (their own __init__), not a name the face binds:
        # judge it as importing each room
        return [p for name in names for p in _package_problems(relpath, room, rule, f"{module}.{name}", [])]
    if not inner:  # `import attn_helpers`, `from attn_helpers import X`, `from .. import X` reaching the root
        if relpath == "__init__.py":
            return []
        shown = f"from {module} import {', '.join(names)}" if names else f"import {module}"
        return [f"imports the package's face ({shown}); import from the room's module"]
    target = inner[0]
    if target not in RULES:
        return [f"imports {module}, which is in no room"]
    problems = []
    if target not in rule.rooms:
        who = room or "the face"
        problems.append(f"{who} imports {module}: {who} may import only {', '.join(sorted(rule.rooms))}")
    if target != room:
        if _private(".".join(inner[1:])):
            problems.append(f"imports the private module {module} from another room")
        private = [name for name in names if _private(name)]
        if private:
            problems.append(f"imports the private name(s) {', '.join(private)} from {module}, another room")
    return problems


def module_problems(relpath: str, source: str) -> list[str]:
    """Every rule ``source`` breaks, as ``attn_helpers/<relpath>:line: what`` (empty list: all fine).

    ``relpath`` is the module's path inside the package, e.g. ``core/attention.py`` or ``__init__.py``.
    """
    parts = Path(relpath).parts
    room = parts[0] if len(parts) > 1 else ""
    where = f"{PACKAGE}/{relpath}"
    rule = RULES.get(room)
    if rule is None:
        return [f"{where}:1: the folder {room}/ is not a room of the table (tests/test_rooms.py RULES)"]
    tree = ast.parse(source, filename=relpath)
    nested = _inside_function(tree)
    package = ".".join([PACKAGE, *parts[:-1]])  # what a relative import starts from (also for an __init__.py)
    problems = []
    for node, module, names in _imports(tree, package):
        top = module.split(".")[0]
        if not top:
            found = ["a relative import reaching above the package, in no room"]
        elif top in STDLIB:
            found = []
        elif top != PACKAGE:
            found = list(filter(None, [_library_problem(room, rule, top, node in nested)]))
        else:
            found = _package_problems(relpath, room, rule, module, names)
        problems += [f"{where}:{node.lineno}: {problem}" for problem in found]
    return problems


def tree_problems(package_dir: Path) -> list[str]:
    """Every rule the package in ``package_dir`` breaks: its root's contents, then each module's imports."""
    problems = []
    for entry in sorted(package_dir.iterdir()):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir() and entry.name not in RULES:
            problems.append(f"{PACKAGE}/{entry.name}/: a folder that is not a room of the table (RULES)")
        elif entry.is_file() and entry.name not in ROOT_FILES:
            problems.append(f"{PACKAGE}/{entry.name}: the package's root holds only "
                            f"{', '.join(sorted(ROOT_FILES))}; put modules in a room")
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).parts
        if (len(parts) > 1 and parts[0] not in RULES) or (len(parts) == 1 and parts[0] != "__init__.py"):
            continue  # reported above, once for the folder or the file
        problems += module_problems("/".join(parts), path.read_text(encoding="utf-8"))
    return problems


# -- the package as it is --------------------------------------------------------------------------------

def test_imports_go_one_way_through_the_rooms():
    problems = tree_problems(PACKAGE_DIR)
    assert not problems, f"{len(problems)} import(s) against the rooms' rules:\n  " + "\n  ".join(problems)


def test_every_room_of_the_table_exists():
    missing = [room for room in RULES if room and not (PACKAGE_DIR / room / "__init__.py").is_file()]
    assert not missing, f"rooms in RULES without a folder: {missing}"


# -- the checker catches each rule (planted violations) -----------------------------------------------------

@pytest.mark.parametrize(("relpath", "source", "expected"), [
    # core imports torch, the standard library and core only
    ("core/attention.py", "import numpy as np\n", "core imports numpy"),
    ("core/attention.py", "from ..lab.example import SENTENCE\n", "core imports attn_helpers.lab.example"),
    ("core/layers.py", "def f():\n    from ..views import plotting\n", "core imports attn_helpers.views"),
    # lab: heavy libraries only inside a function; nothing from views, widgets or checks
    ("lab/pretrained.py", "import transformers\n", "imports transformers at module level"),
    ("lab/training.py", "import matplotlib.pyplot as plt\n", "lab imports matplotlib"),
    ("lab/training.py", "from ..views.plotting import heatmap\n", "lab imports attn_helpers.views.plotting"),
    ("lab/training.py", "from ..checks import checker\n", "lab imports attn_helpers.checks"),
    # views imports no math
    ("views/plotting.py", "from ..core.attention import scaled_dot_product_attention\n",
     "views imports attn_helpers.core.attention"),
    ("views/shapes.py", "from attn_helpers.lab import example\n", "views imports attn_helpers.lab"),
    # widgets and checks do not import each other
    ("widgets/heads.py", "from ..checks.heads import watcher\n", "widgets imports attn_helpers.checks.heads"),
    ("checks/heads.py", "from ..widgets import HeadsExplorer\n", "checks imports attn_helpers.widgets"),
    # nothing imports the package's face
    ("checks/values.py", "import attn_helpers\n", "imports the package's face (import attn_helpers)"),
    ("lab/bert.py", "from attn_helpers import padding_mask\n", "imports the package's face (from attn_helpers import"),
    ("checks/pretrained.py", "from .. import show_source\n", "imports the package's face (from attn_helpers import show_source)"),
    ("lab/tasks.py", "from .. import widgets\n", "lab imports attn_helpers.widgets: lab may import only"),
    ("core/layers.py", "from ... import x\n", "in no room"),
    # no private name crosses a folder
    ("widgets/heads.py", "from ..views.plotting import _figure\n", "private name(s) _figure"),
    ("checks/layer.py", "from ..widgets._display import WIDGET_VIEW_MIME\n", "checks imports attn_helpers.widgets"),
    ("widgets/heads.py", "from ..views._draw import figure\n", "private module attn_helpers.views._draw"),
    # a folder with no row
    ("show/plotting.py", "import torch\n", "the folder show/ is not a room"),
])
def test_checker_names_a_planted_violation(relpath, source, expected):
    problems = module_problems(relpath, source)
    assert any(expected in problem for problem in problems), problems
    assert all(problem.startswith(f"{PACKAGE}/{relpath}:") for problem in problems), problems


@pytest.mark.parametrize(("relpath", "source"), [
    ("core/attention.py", "from __future__ import annotations\nimport math\nimport torch\nfrom .arguments import check_qkv\n"),
    ("lab/pretrained.py", "import numpy as np\nfrom ..core import attention\n"
                          "def load():\n    from transformers import BertModel\n"),
    ("views/plotting.py", "import matplotlib\nimport numpy as np\nfrom .shapes import named_shape\n"),
    ("widgets/heads.py", "import ipywidgets as W\nfrom ..core.attention import split_heads\n"
                         "from ..views.plotting import heatmap\nfrom ._base import Explorer, _private_helper\n"),
    ("checks/layer.py", "from ..lab import training\nfrom ._core import checker, _parse\nfrom .heads import _WHOLE\n"),
    ("__init__.py", "from .core import Attention\nfrom . import views, widgets, checks\n"),
])
def test_checker_accepts_imports_the_table_allows(relpath, source):
    assert module_problems(relpath, source) == []


def test_checker_reports_file_and_line():
    source = "import torch\n\n\nimport numpy\n"
    assert module_problems("core/masks.py", source) == [
        "attn_helpers/core/masks.py:4: core imports numpy, which is not in its row (libraries: torch)"]


def test_checker_keeps_the_packages_root_to_its_face(tmp_path):
    package = tmp_path / PACKAGE
    for room in RULES:
        if room:
            (package / room).mkdir(parents=True)
            (package / room / "__init__.py").write_text("import torch\n", encoding="utf-8")
    (package / "__init__.py").write_text("from .core import *\n", encoding="utf-8")
    (package / "README.md").write_text("# attn_helpers\n", encoding="utf-8")
    assert tree_problems(package) == []

    (package / "plotting.py").write_text("import matplotlib\n", encoding="utf-8")
    (package / "extras").mkdir()
    (package / "extras" / "tools.py").write_text("import torch\n", encoding="utf-8")
    (package / "core" / "masks.py").write_text("from .. import views\n", encoding="utf-8")
    assert tree_problems(package) == [
        "attn_helpers/extras/: a folder that is not a room of the table (RULES)",
        "attn_helpers/plotting.py: the package's root holds only README.md, __init__.py, py.typed; put modules in a room",
        "attn_helpers/core/masks.py:1: core imports attn_helpers.views: core may import only core",
    ]
