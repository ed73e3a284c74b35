"""``import attn_helpers`` stays cheap: views (matplotlib), widgets and checks load on first use.

Each import is checked in a fresh Python (this process has imported everything long ago); the two
children run in the background from the start of the session (``background.py``).
"""

from __future__ import annotations

import subprocess
import sys

from tools import background

HEAVY = ("matplotlib", "ipywidgets")


def imported_modules(stderr: str) -> set[str]:
    """Module names from ``python -X importtime`` output (lines ``import time: self | total | name``)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def run(code: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                          env=background.clean_environ(), timeout=300, check=True)


LAZY_CODE = "\n".join([
    "import sys",
    "import attn_helpers",
    "assert 'matplotlib' not in sys.modules",
    "heatmap = attn_helpers.views.heatmap",
    "assert 'matplotlib' in sys.modules and 'ipywidgets' not in sys.modules",
    "assert callable(heatmap) and attn_helpers.views.heatmap is heatmap",
    "assert callable(attn_helpers.widgets.HeadsExplorer)",
    "assert callable(attn_helpers.checks.checker)",
    "try:",
    "    attn_helpers.no_such_thing",
    "except AttributeError as error:",
    "    print(error)",
])
BACKGROUND_JOBS = {
    "test_import: import time": lambda: run("import attn_helpers", "-X", "importtime"),
    "test_import: lazy submodules": lambda: run(LAZY_CODE),
}


def outcome(name: str) -> subprocess.CompletedProcess:
    return background.result(name, BACKGROUND_JOBS[name])


def test_importing_the_package_imports_neither_matplotlib_nor_ipywidgets():
    result = outcome("test_import: import time")
    modules = imported_modules(result.stderr)
    assert "attn_helpers" in modules and "torch" in modules  # the measurement saw the import
    for heavy in HEAVY:
        loaded = sorted(m for m in modules if m == heavy or m.startswith(heavy + "."))
        assert not loaded, f"import attn_helpers loaded {loaded}"
    assert not {"attn_helpers.views.heatmaps", "attn_helpers.widgets", "attn_helpers.checks"} & modules


def test_submodules_load_lazily_on_first_attribute_access():
    result = outcome("test_import: lazy submodules")
    assert result.stdout.strip() == "module 'attn_helpers' has no attribute 'no_such_thing'"
    assert result.stderr == ""


def _modules_of(package) -> list:
    """Every topic module of ``package`` (not the private ``_*`` ones), imported."""
    import importlib
    import pkgutil

    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")]


def test_widgets_and_checks_export_every_name_of_every_topic_module():
    """Every name of every topic module's ``__all__`` is exported by its package: none forgotten."""
    from attn_helpers import checks, widgets

    for package in (widgets, checks):
        for module in _modules_of(package):
            assert hasattr(module, "__all__"), f"{module.__name__} has no __all__"
            missing = [name for name in module.__all__ if name not in package.__all__]
            assert not missing, f"{package.__name__}/__init__.py does not export {missing} of {module.__name__}"
            for name in module.__all__:
                assert getattr(package, name) is getattr(module, name), f"{package.__name__}.{name}"
        assert len(set(package.__all__)) == len(package.__all__), f"{package.__name__}.__all__ repeats a name"
