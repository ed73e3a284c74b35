"""The Colab path, on Colab's own package versions: install, every notebook, every control.

Half of the series' learners press *Open in Colab*. Colab ships its own packages (ipywidgets 7.7.1,
IPython 7.34, ipykernel 6.17, numpy 2.1, matplotlib 3.10: ``tests/colab_versions.txt`` lists them
with their source), and its front end cannot draw ipywidgets 8. ``tools/colab_standin.py`` builds
an environment with those versions (once, reused while the versions file is unchanged) and, for each
test session, a fresh runtime over it in which the notebooks' unchanged set-up cell installs the
helpers from a throw-away copy of this checkout, with ``ipywidgets`` already imported and a fake
``google.colab`` present, as in a Colab kernel.

* ``test_colab_setup_cell_installs_only_the_helpers``: pip's own install report lists
  ``attn-helpers`` and nothing else; no package Colab has changes version; the kernel still uses
  ipywidgets 7.7.1; the helpers came from git (not editable) and agree with PyTorch.
* ``test_notebook_on_colab_versions[NN]``: every notebook runs top to bottom in a kernel of that
  runtime under strict nbval (same sanitizer as the main run), at a *different thread count* from
  the main nbval run (1 thread, or 2 where the machine's default is 1): no error, no stderr, every
  printed line as committed. This run is also the suite's second thread count (issue: every printed
  output holds on any machine).
* ``test_explorers_on_colab_versions[NN]``: after the notebook's last cell, in the same kernel, every
  explorer's display bundle holds a widget view, and every one of its controls, moved, changes the
  picture (``tools/colab_probe.py``).
* ``test_setup_cell_outside_colab``: without ``google.colab`` the cell runs nothing, and it seeds
  torch and sets the print precision so numbers repeat run to run.
* ``test_setup_cell_without_torch_says_how_to_set_up``: in a Python without torch its error names
  ``make lab`` and Colab.

The browser half (a kernel of this runtime in a real front end of ipywidgets 7, the classic Notebook
6.5.7 from Colab's list: Run All and a slider moved in every notebook) is in ``tests/notebooks/test_browser.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import colab_standin
from tools.browser_support import CommittedNotebook
from tools.colab_standin import ColabRuntime, StandinRun, colab_versions, normalise

REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP_CELL = (REPO_ROOT / "tests" / "notebook_setup_cell.py").read_text(encoding="utf-8")


@pytest.mark.slow
def test_colab_setup_cell_installs_only_the_helpers(colab_runtime: ColabRuntime) -> None:
    runtime = colab_runtime
    installed = [(item["metadata"]["name"], item["metadata"]["version"]) for item in runtime.install_report["install"]]
    print(f"pip's install report: {installed}; pip printed: {runtime.pip_output.strip()!r}")
    assert [normalise(name) for name, _ in installed] == ["attn-helpers"], (
        f"on Colab the set-up cell must install attn-helpers and nothing else; pip installed {installed}\n"
        f"{runtime.pip_output}")
    changed = {name: (runtime.before.get(name), version) for name, version in runtime.after.items()
               if runtime.before.get(name) != version and name != "attn-helpers"}
    assert not changed, f"packages Colab already has changed version (before, after): {changed}"
    pins = colab_versions()
    assert {name: runtime.after.get(name, "").split("+")[0] for name in pins} == pins, "the stand-in lost a pin"

    report = runtime.kernel_report
    assert report["ipywidgets_in_use"] == report["ipywidgets_installed"] == pins["ipywidgets"], report
    assert Path(report["attn_helpers"]).resolve().is_relative_to(runtime.site.resolve()), report
    assert Path(report["torch"]).resolve().is_relative_to(runtime.base_site.resolve()), report
    assert "vcs_info" in report["direct_url"], f"not installed from git: {report['direct_url']}"
    assert report["direct_url"]["url"] == colab_standin.repository_url(), report["direct_url"]
    assert not report["direct_url"].get("dir_info", {}).get("editable", False), report["direct_url"]
    assert report["max_abs_diff"] < 1e-5, report


@pytest.fixture(scope="module")
def standin_run(colab_session) -> StandinRun:
    """The run over every notebook (started in the background when the session began: conftest.py)."""
    run = colab_session.notebooks()
    print(f"Colab stand-in: every notebook at {run.threads} thread(s) in {run.seconds:.0f} s")
    return run


@pytest.mark.slow
def test_notebook_on_colab_versions(standin_run: StandinRun, notebook_path: Path) -> None:
    name = notebook_path.name
    outcomes = standin_run.outcomes.get(name, {})
    n_code = sum(c.cell_type == "code" for c in nbformat.read(notebook_path, as_version=4).cells)
    assert len(outcomes) == n_code + 1, (
        f"{name}: nbval reported {len(outcomes)} cells, expected {n_code} and the probe\n{standin_run.output[-3000:]}")
    failed = sorted(cell for cell, outcome in outcomes.items() if outcome != "PASSED")
    assert not failed, (f"{name} on Colab's versions at {standin_run.threads} thread(s): cells {failed} differ from the "
                        f"committed outputs or failed\n{standin_run.failures(name)}")


@pytest.mark.slow
def test_explorers_on_colab_versions(standin_run: StandinRun, notebook_path: Path) -> None:
    name = notebook_path.name
    reports = standin_run.probe(name)
    committed = sorted(CommittedNotebook.read(notebook_path).explorers)
    found = sorted(r["class"] for r in reports)
    assert all(found.count(c) >= committed.count(c) for c in committed), (
        f"{name}: explorers alive after the run {found}; the committed notebook shows {committed}")
    for report in reports:
        label = f"{name}: {report['class']}"
        assert report["start_valid"], f"{label} starts in an impossible state"
        assert report["widget_view"], f"{label}: its display bundle holds no widget view"
        dead = [control for control, changed in report["controls"].items() if not changed]
        moves = "\n  ".join(f"{m['control']} -> {m['value']}: {m['status']}" for m in report["moves"])
        assert not dead, f"{label}: moving {dead} never changed the picture\n  {moves}"
        assert report["restored"], f"{label}: did not come back to its first values"


OUTSIDE_COLAB_SCRIPT = """\
import json, subprocess, sys, time
calls = []
subprocess.run = lambda *args, **kwargs: calls.append(args)  # record, never run
started = time.perf_counter()
exec(compile({cell!r}, "setup_cell", "exec"))
seconds = time.perf_counter() - started
first = torch.rand(4).tolist()
exec(compile({cell!r}, "setup_cell", "exec"))
second = torch.rand(4).tolist()
print(json.dumps({{
    "colab": "google.colab" in sys.modules,
    "calls": [repr(c) for c in calls],
    "seconds": seconds,
    "same": first == second,
    "printed": str(torch.tensor([1 / 3, 12345.678])),
}}))
"""


def test_setup_cell_outside_colab(tmp_path: Path) -> None:
    script = tmp_path / "local_kernel.py"
    script.write_text(OUTSIDE_COLAB_SCRIPT.format(cell=SETUP_CELL), encoding="utf-8")
    result = colab_standin.run([sys.executable, script], cwd=tmp_path, timeout=120)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["colab"]
    assert report["calls"] == [], "outside Colab the set-up cell must not run pip (or anything else)"
    assert report["seconds"] < 30, report
    assert report["same"], "torch.rand after the set-up cell must repeat: the cell seeds torch"
    assert report["printed"] == "tensor([    0.333, 12345.678])", report["printed"]


def test_setup_cell_without_torch_says_how_to_set_up(tmp_path: Path) -> None:
    """In a Python without torch (a learner who opened a lesson in the wrong kernel), the set-up cell's error says
    what to do: `make lab`, or Colab's badge, rather than a bare ModuleNotFoundError."""
    script = tmp_path / "no_torch.py"
    script.write_text(f"import sys\nsys.modules['torch'] = None  # import torch fails as if not installed\n"
                      f"exec(compile({SETUP_CELL!r}, 'setup_cell', 'exec'))\n", encoding="utf-8")
    result = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError") and "make lab" in last and "Colab" in last, result.stderr
