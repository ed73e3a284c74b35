"""Each room's face (its ``__init__``) exports exactly the public names its modules declare in ``__all__``.

A name a module declares but its room does not export is unreachable the documented way
(``attn_helpers.<room>.<name>``); a name the face exports that no module declares has no home.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import json
import pkgutil
import re
import tokenize
from pathlib import Path

import pytest

import attn_helpers

ROOMS = ("core", "lab", "views", "widgets", "checks")
#: Modules whose names a room makes reachable but does not export: core's argument checks (``core.check_heads``),
#: which are no lesson's math and must stay off the exercise guard's watch list (it watches every export).
BY_PATH = {"core": {"arguments"}}


def declared(room: str) -> dict[str, str]:
    """``name -> module`` for every name in the ``__all__`` of the room's modules (private modules included)."""
    package = importlib.import_module(f"attn_helpers.{room}")
    names: dict[str, str] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"attn_helpers.{room}.{info.name}")
        for name in getattr(module, "__all__", ()):
            names.setdefault(name, info.name)
    return names


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_exports_what_its_public_modules_declare(room):
    package = importlib.import_module(f"attn_helpers.{room}")
    names = declared(room)
    public = {name: module for name, module in names.items()
              if not module.startswith("_") and module not in BY_PATH.get(room, set())}
    missing = sorted(f"{module}.{name}" for name, module in public.items() if name not in package.__all__)
    assert not missing, f"declared in a module's __all__ but not exported by attn_helpers.{room}: {missing}"
    homeless = sorted(set(package.__all__) - set(names))
    assert not homeless, f"attn_helpers.{room} exports names no module of it declares: {homeless}"
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_the_package_face_exports_names_of_the_rooms_only():
    rooms = {name for room in ROOMS for name in importlib.import_module(f"attn_helpers.{room}").__all__}
    extra = sorted(set(attn_helpers.__all__) - rooms - set(ROOMS))
    assert not extra, f"attn_helpers exports names no room exports: {extra}"


@pytest.mark.parametrize("face", ["attn_helpers/__init__.py", "attn_helpers/core/__init__.py",
                                  "attn_helpers/lab/__init__.py", "attn_helpers/widgets/__init__.py"])
def test_a_face_writes_each_public_name_once(face):
    """``core``, ``lab`` and ``widgets`` star-import their modules (a name lives in its module's ``__all__`` only);
    the package face imports each name once and reads ``__all__`` off its namespace: no list of names to keep in
    step."""
    tree = ast.parse((Path(attn_helpers.__file__).parents[1] / face).read_text(encoding="utf-8"))
    assigned = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "__all__" for t in node.targets)]
    assert len(assigned) == 1 and not isinstance(assigned[0].value, (ast.List, ast.Tuple)), \
        f"{face}: __all__ must be read off the modules or the namespace, not written out"
    assert not any(isinstance(node, ast.AugAssign) for node in ast.walk(tree)), f"{face}: no __all__ += ..."
    if face != "attn_helpers/__init__.py":
        named = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                 and node.module for alias in node.names if alias.name != "*"]
        assert not named, f"{face} imports {named} by name; star-import the module instead"


# -- d2l's "Defined in" habit: a lesson's code is found with grep ---------------------------------------
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: ``Lesson 05:``, ``Lessons 00, 07 and 11:``, ``Lessons 00-14:``, ``Exercise 3a:``, ``Prediction 9:``
NAMED = re.compile(r"\b(?:Lessons?|Exercises?|Predictions?)\s+((?:\d+a?(?:\.\d+)?(?:\s*(?:,|and|-)\s*)?)+)")


def lessons_named(first_line: str) -> set[str]:
    """The lesson numbers a docstring's first line names ("03a", "7"; a range "00-14" expanded), without zeros."""
    found: set[str] = set()
    for match in NAMED.finditer(first_line):
        text = match.group(1)
        for start, stop in re.findall(r"(\d+)\s*-\s*(\d+)", text):
            found.update(str(n) for n in range(int(start), int(stop) + 1))
        found.update(n.lstrip("0") or "0" for n in re.findall(r"(?<![.\d])\d+a?", text))  # not 4 of 5.4
    return found


def without_words(source: str) -> str:
    """A code cell's names and operators: its comments and string literals (docstrings, messages) left out, so a
    word such as "cells" in a sentence is not taken for a use of ``views.cells``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # not plain Python (a shell line): comments only
        return re.sub(r"#.*", "", source)
    kept = " ".join(t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING))
    return kept.replace(" . ", ".")  # attribute access written together again: lab.train, drop_layer.train


def notebook_code() -> dict[str, str]:
    """``lesson number (no leading zero) -> its code cells`` without comments and string literals."""
    code = {}
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join(without_words("".join(c["source"])) for c in cells if c["cell_type"] == "code")
        code[path.name.split("_")[0].lstrip("0") or "0"] = text
    return code


def test_every_definition_a_lesson_uses_names_a_lesson_that_uses_it():
    """The first docstring line of each exported function or class a notebook's code uses names a lesson (or an
    exercise, a prediction) that uses it, so ``grep "Lesson 05"`` finds lesson 05's code."""
    code = notebook_code()
    wrong = []
    for room in ROOMS:
        face = importlib.import_module(f"attn_helpers.{room}")
        for name in face.__all__:
            obj = getattr(face, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            # a use: room.name, or the bare name (imported from the face); not another object's attribute
            # (drop_layer.train() is nn.Module.train, not lab.train)
            use = rf"\b{room}\.{re.escape(name)}\b|(?<![\w.]){re.escape(name)}\b"
            using = {lesson for lesson, text in code.items() if re.search(use, text)}
            first = (inspect.getdoc(obj) or "").split("\n")[0]
            if using and not using & lessons_named(first):
                wrong.append(f"{room}.{name}: used by lessons {sorted(using)}, first line {first[:70]!r}")
    assert not wrong, "\n".join(wrong)


def test_a_word_in_a_string_or_comment_is_not_a_use():
    code = without_words('def f():\n    """the next two cells call it"""\n    return views.heatmap(x)  # cells\n')
    assert not re.search(r"\bcells\b", code) and re.search(r"\bheatmap\b", code)
    assert re.search(r"\bcells\b", without_words("!pip install cells  # a shell line\nviews.cells(x)"))
    assert "drop_layer.train (" in without_words("weights = drop_layer.train()(x)")


def test_lessons_named_reads_ranges_and_lists():
    assert lessons_named("Lessons 00-03, 03a and 12: x") == {"0", "1", "2", "3", "3a", "12"}
    assert lessons_named("Exercise 5.4: y") == {"5"} and lessons_named("A helper.") == set()
