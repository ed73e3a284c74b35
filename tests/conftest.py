"""Shared pytest set-up for the whole suite: where things are, and the series' notebooks.

Fixtures that only one area needs belong in that area's own test files; what is here starts background
work that must begin before any test runs.

* ``repo_root``, ``notebooks_dir``, ``setup_cell_source``: paths and the canonical first cell.
* ``clean_env``: ``os.environ`` without the variables that leak into a kernel and change what a
  notebook prints (``MPLBACKEND`` removes figures, ``PYTHONWARNINGS`` can add stderr), and without
  ``PYTEST_ADDOPTS``, for tests that start Python or pytest in a subprocess.
* ``colab_runtime``: the Colab stand-in (``tools/colab_standin.py``) with the helpers installed by
  the set-up cell, built once per session for ``tests/notebooks/test_colab.py`` and the browser tests.
* ``main_nbval``, ``lab_run``: strict nbval over every notebook (a child pytest) and the JupyterLab
  browser runs, both started in the background when the tests are collected; their tests report
  what the background work found, and run last (``REPORTING_LAST``), after the unit tests.
* The session itself: matplotlib draws with Agg, kernels get a matplotlib folder with a prebuilt font
  cache, and OpenMP threads wait passively (``pytest_configure``).
* Any test that takes a ``notebook_path`` argument runs once per ``notebooks/*.ipynb``, with the
  file name as the test id. With no notebook at all pytest reports one skipped test
  ("got empty parameter set"), so an empty series is visible rather than silently green.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tools import background

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SETUP_CELL_FILE = REPO_ROOT / "tests" / "notebook_setup_cell.py"

LEAKY_ENV_VARS = background.LEAKY_ENV_VARS  # must not reach a kernel, a child Python or a child pytest


def series_notebooks() -> list[Path]:
    """The series' notebooks, in order (checkpoint folders are not included)."""
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "notebook_path" in metafunc.fixturenames:
        paths = series_notebooks()
        metafunc.parametrize("notebook_path", paths, ids=[p.name for p in paths])


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def notebooks_dir() -> Path:
    return NOTEBOOKS_DIR


@pytest.fixture(scope="session")
def setup_cell_source() -> str:
    """The canonical first cell of every notebook, stripped of surrounding blank lines."""
    return SETUP_CELL_FILE.read_text(encoding="utf-8").strip()


@pytest.fixture
def clean_env() -> dict[str, str]:
    """A copy of the environment for subprocesses, without the leaky variables."""
    return background.clean_environ()



# -- matplotlib's font cache -----------------------------------------------------------------------
_MPL_DIR: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Give this session's kernels a matplotlib folder of their own, its font cache built up front;
    draw with the Agg backend in this process.

    The font cache in the user's home lists font files by path, including the ones inside whichever
    virtual environment wrote it last. When that environment is gone (a deleted clone, a rebuilt
    .venv), the next plot rebuilds the cache and logs a warning to stderr: the first figure of a
    notebook would then fail strict nbval. Built here, before any kernel starts, the cache points
    at this environment's fonts and nothing rebuilds it during the session.
    """
    import subprocess
    import sys
    import tempfile

    # Several notebook kernels, a browser and this process share two cores during a run: threads that
    # wait for work sleep instead of spinning (OpenMP's passive wait), which changes no result, only
    # how much CPU time idle threads burn while others need it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not config.option.collectonly and "MPLCONFIGDIR" not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="attn-mpl-"))
        os.environ["MPLCONFIGDIR"] = str(folder)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True, capture_output=True,
                       env={k: v for k, v in os.environ.items() if k not in LEAKY_ENV_VARS})
        _MPL_DIR.append(folder)
    # Once for the whole suite, before any test module imports pyplot: tests draw in this process, off screen.
    import matplotlib

    matplotlib.use("Agg")


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _MPL_DIR:
        os.environ.pop("MPLCONFIGDIR", None)
        shutil.rmtree(folder, ignore_errors=True)


# -- the Colab stand-in --------------------------------------------------------------------------
_colab: dict[str, object] = {}


def _start_colab() -> None:
    """Start the stand-in (runtime, then every notebook in its kernel) in a background thread."""
    import shutil
    import subprocess
    import tempfile

    import torch
    from tools.colab_standin import ColabSession, child_env

    if shutil.which("git") is None:
        _colab["skip"] = "git is not installed"
        return
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO_ROOT, env=child_env(),
                            capture_output=True, text=True)
    if inside.stdout.strip() != "true":
        _colab["skip"] = "the project is not a git checkout"
        return
    # The main nbval run uses the machine's default thread count; the stand-in's run another one.
    threads = 1 if torch.get_num_threads() != 1 else 2
    _colab["session"] = ColabSession(Path(tempfile.mkdtemp(prefix="attn-colab-")), threads)


# Tests that report on work running in the background (pip's dry run, the strict-nbval proof's and the exercises'
# child runs, the Colab stand-in, the JupyterLab run) go last, so the unit tests and nbval run while that work goes on
# instead of waiting for it.
REPORTING_LAST = ("test_setup_dry_run.py", "test_nbval_strict.py", "test_exercises.py", "test_notebooks.py",
                  "test_colab.py", "test_browser.py", "test_notebook7.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return REPORTING_LAST.index(name) + 1 if name in REPORTING_LAST else 0

    items.sort(key=rank)  # stable: the order within each group is kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the Colab stand-in as soon as the selected tests are known, if any needs it.

    Preparing the runtime, running every notebook in its kernel and then in a browser take a few
    minutes and mostly wait on pip, a kernel or a page; started here they overlap the rest of the
    suite (its own thread, its own browser).
    """
    if session.config.option.collectonly:
        return
    needed = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if "colab_session" in needed:
        _start_colab()
    if "classic_results" in needed and "session" in _colab:
        _start_classic_browser()
    if "main_nbval" in needed:
        _start_main_nbval()
    _start_lab(session.items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker starts a module's jobs when it runs the module's first test (pytest_runtest_setup)
    modules = {item.module: None for item in session.items if getattr(item, "module", None) is not None}
    # child processes some tests only check the outcome of (tools/background.py); a module that mostly waits on
    # the network says BACKGROUND_FIRST = True, so its job is not queued behind the notebook runs
    for module in sorted(modules, key=lambda m: not getattr(m, "BACKGROUND_FIRST", False)):
        background.start(getattr(module, "BACKGROUND_JOBS", {}).items())


def pytest_runtest_setup(item: pytest.Item) -> None:
    """In a pytest-xdist worker (``make check``), start the background jobs of a test's module with its first test.

    Each worker collects every test but runs only some files (``--dist loadfile``): started at collection,
    every job would run once per worker. Started here they still overlap the module's other tests.
    """
    module = getattr(item, "module", None)
    if module is not None and os.environ.get("PYTEST_XDIST_WORKER"):
        background.start(getattr(module, "BACKGROUND_JOBS", {}).items())


# -- strict nbval over every notebook (tests/notebooks/test_notebooks.py) ----------------------------------
_nbval: dict[str, object] = {}


def _start_main_nbval() -> None:
    """Run strict nbval over the series in a child pytest, in a background thread (see notebooks/test_notebooks.py)."""
    import concurrent.futures
    import sys
    import tempfile
    import threading

    from tools.nbval_run import NbvalRun

    folder = Path(tempfile.mkdtemp(prefix="attn-nbval-"))
    stop = threading.Event()
    # The project's own pytest options (pyproject.toml: --nbval, --nbval-current-env, the sanitizer).
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", *map(str, series_notebooks())]
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV_VARS}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbval")
    _nbval.update(folder=folder, stop=stop, pool=pool,
                  run=pool.submit(NbvalRun, cmd, REPO_ROOT, env, folder / "nbval.log", stop=stop))


@pytest.fixture(scope="session")
def main_nbval():
    """The strict nbval run over every notebook (``nbval_run.NbvalRun``), started at collection."""
    if "run" not in _nbval:
        _start_main_nbval()
    return _nbval["run"].result()


# -- the JupyterLab run (tests/notebooks/test_browser.py) ---------------------------------------------
_lab: dict[str, object] = {}


def _start_lab(items: list[pytest.Item]) -> None:
    """Start the JupyterLab run over the notebooks and checks the selected browser tests ask for."""
    plan: dict[Path, list] = {}
    for item in items:
        check = getattr(getattr(item, "function", None), "lab_check", None)
        if check is not None:
            plan.setdefault(item.callspec.params["path"], []).append(check)
    if not plan:
        return
    import tempfile

    from tools.browser_support import LabRuns, find_chromium

    chromium = find_chromium()
    if chromium is not None:  # without it the tests skip, or fail on CI (the chromium_path fixture)
        _lab["folder"] = Path(tempfile.mkdtemp(prefix="attn-lab-"))
        _lab["run"] = LabRuns(chromium, plan, _lab["folder"])


def _start_classic_browser() -> None:
    from tools.browser_support import classic_run, find_chromium

    chromium = find_chromium()
    if chromium is not None:
        _colab["session"].start_browser(classic_run(chromium))


def pytest_sessionfinish(session: pytest.Session) -> None:
    background.shutdown()
    if "run" in _nbval:
        _nbval["stop"].set()
        _nbval["pool"].shutdown(wait=True)
        shutil.rmtree(_nbval.pop("folder"), ignore_errors=True)
        _nbval.clear()
    colab = _colab.pop("session", None)
    if colab is not None:
        colab.close()
    lab = _lab.pop("run", None)
    if lab is not None:
        lab.close()
        shutil.rmtree(_lab.pop("folder"), ignore_errors=True)


@pytest.fixture(scope="session")
def lab_run(chromium_path: str):
    """The JupyterLab runs (``browser_support.LabRuns``), started when the tests were collected."""
    if "run" not in _lab:
        pytest.fail("the JupyterLab run was not started for this test", pytrace=False)
    return _lab["run"]


@pytest.fixture(scope="session")
def colab_session():
    """The Colab stand-in (``tools/colab_standin.py``); skips without git or outside a checkout."""
    if not _colab:
        _start_colab()
    if "skip" in _colab:
        pytest.skip(str(_colab["skip"]))
    return _colab["session"]


@pytest.fixture(scope="session")
def colab_runtime(colab_session):
    """The Colab stand-in's runtime, the helpers installed into it by the unchanged set-up cell."""
    runtime = colab_session.runtime()
    print(f"Colab stand-in: {runtime.timings}")
    return runtime
