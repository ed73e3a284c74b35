"""core/ is the math a learner reads: it imports torch, the standard library and other core modules only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "attn_helpers" / "core"


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_a_core_module_imports_torch_the_standard_library_and_core_only(path):
    outside = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 1:
            outside.append(f"{'.' * node.level}{node.module or ''}")  # another room of the package
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module.split(".")[0] not in {"torch", "__future__"} | sys.stdlib_module_names:
                outside.append(node.module)
        elif isinstance(node, ast.Import):
            outside += [a.name for a in node.names if a.name.split(".")[0] not in {"torch"} | sys.stdlib_module_names]
    assert outside == [], f"{path.name} imports {outside}"


def test_no_private_core_name_is_imported_by_another_room():
    package = CORE.parent
    crossings = []
    for path in package.rglob("*.py"):
        if CORE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "core" in (node.module or "").split("."):
                crossings += [f"{path.relative_to(package)}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert crossings == []
