"""The Colab path: the notebooks' first cell installs the helpers on Colab, and only there.

``test_colab_install`` (slow: about 20 s on an idle 2-core machine) replays what happens on Colab, offline:

1. The files of this checkout as they are on disk (tracked and untracked, minus what .gitignore
   ignores; uncommitted changes included) are committed into a throw-away git repository, which
   stands in for the GitHub repository.
2. A fresh virtual environment stands in for Colab's Python. Colab already has torch, numpy,
   matplotlib and ipywidgets; here the new environment sees the project environment's packages
   through a ``.pth`` file pointing at a folder of links to them (everything except
   ``attn_helpers`` itself, its editable-install hooks and ``.pth`` files), so nothing is installed
   twice and pip sees the pre-installed packages as pip on Colab does. pip itself is one of them
   (the new environment is made ``--without-pip``); it installs into the new environment.
3. The canonical set-up cell runs in that environment's Python with a fake ``google.colab`` in
   ``sys.modules`` and ``REPO`` pointing at the throw-away repository (``git+file://...``). Then, in
   the same process (as in a Colab kernel, without a restart), ``attn_helpers`` is imported and
   computes attention.

It asserts that pip installed ``attn-helpers`` and nothing else (in particular no torch), that the
package came from the new environment's site-packages as a regular (non-editable) install from
git, that its subpackages import, and that it agrees with PyTorch.

``test_setup_cell_outside_colab`` checks that without ``google.colab`` the cell runs nothing, and
that it seeds torch and sets the print precision so numbers repeat run to run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SETUP_CELL = (REPO_ROOT / "tests" / "notebook_setup_cell.py").read_text(encoding="utf-8")
REPO_LINE = re.compile(r'^REPO = "[^"]*"$', re.MULTILINE)

# Not linked into the stand-in for Colab's packages: the package under test (Colab does not have
# it) and the files that would re-install the project's editable copy of it.
NOT_INHERITED = re.compile(r"^(attn_helpers([-.].*)?|__editable__.*|.*\.pth|.*\.egg-link)$")


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({result.returncode})\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )
    return result


def _git(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return _run(["git", *args], cwd=cwd, env=env)


def _snapshot_checkout(dest: Path, env: dict[str, str]) -> None:
    """Commit the checkout's non-ignored files, as they are on disk, into a new repository ``dest``."""
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO_ROOT, env=env).stdout
    dest.mkdir()
    for rel in filter(None, listed.split("\0")):
        source = REPO_ROOT / rel
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree but still in the index
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    _git("init", "--quiet", "--initial-branch=main", cwd=dest, env=env)
    _git("add", "--all", cwd=dest, env=env)
    _git("-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
         "commit", "--quiet", "--message", "snapshot of the working tree", cwd=dest, env=env)


def _inherit_packages(venv_python: Path, farm: Path, env: dict[str, str], cwd: Path) -> Path:
    """Let the new environment see this environment's packages (not attn_helpers); return its purelib."""
    farm.mkdir()
    sources = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for site in map(Path, sorted(sources)):
        for entry in site.iterdir():
            if not NOT_INHERITED.match(entry.name) and not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry)
    purelib = Path(
        _run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=cwd, env=env)
        .stdout.strip()
    )
    (purelib / "zz_preinstalled_like_colab.pth").write_text(f"{farm}\n", encoding="utf-8")
    return purelib


def _installed(venv_python: Path, purelib: Path, env: dict[str, str], cwd: Path) -> set[str]:
    """Names of the distributions installed in the new environment's own site-packages."""
    out = _run([str(venv_python), "-m", "pip", "list", "--path", str(purelib), "--format", "json"], cwd=cwd, env=env)
    return {d["name"].lower().replace("_", "-") for d in json.loads(out.stdout)}


def _child_env(clean_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in clean_env.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", GIT_TERMINAL_PROMPT="0")
    return env


COLAB_SCRIPT = """\
import json, sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")  # what Colab's kernel has loaded

# ---- the set-up cell, REPO pointing at the local stand-in for GitHub
{cell}
# ---- the next cells: the helpers are importable in the same process, without a restart
import importlib.metadata
import attn_helpers
import attn_helpers.checks, attn_helpers.plotting, attn_helpers.widgets

q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
out, weights = attn_helpers.scaled_dot_product_attention(q, k, v, return_weights=True)
expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
print(json.dumps({{
    "attn_helpers": attn_helpers.__file__,
    "torch": torch.__file__,
    "direct_url": json.loads(importlib.metadata.distribution("attn-helpers").read_text("direct_url.json")),
    "shape": list(out.shape),
    "weights_shape": list(weights.shape),
    "max_abs_diff": float((out - expected).abs().max()),
}}))
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_colab_install(tmp_path: Path, clean_env: dict[str, str]) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = _child_env(clean_env)
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if inside.stdout.strip() != "true":
        pytest.skip("the project is not a git checkout")
    steps: dict[str, float] = {}
    clock = time.perf_counter()

    def step(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        steps[name] = round(now - clock, 1)
        clock = now

    source = tmp_path / "github"
    _snapshot_checkout(source, env)
    step("snapshot")

    venv = tmp_path / "colab-venv"
    # Without its own pip: like Colab's other tools, pip comes with the pre-installed packages
    # (it still installs into the new environment, its sys.prefix). Saves several seconds.
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=env)
    venv_python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = _inherit_packages(venv_python, tmp_path / "preinstalled", env, tmp_path)
    before = _installed(venv_python, purelib, env, tmp_path)
    step("venv")
    assert "attn-helpers" not in before and "torch" not in before, before

    cell, replaced = REPO_LINE.subn(f'REPO = "{source.as_uri()}"', SETUP_CELL)
    assert replaced == 1, "tests/notebook_setup_cell.py must have one line REPO = \"<url>\""
    script = tmp_path / "colab_kernel.py"
    script.write_text(COLAB_SCRIPT.format(cell=cell), encoding="utf-8")
    result = _run([str(venv_python), str(script)], cwd=tmp_path, env=env)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    step("set-up cell + attention")

    after = _installed(venv_python, purelib, env, tmp_path)
    assert after - before == {"attn-helpers"}, f"pip installed {sorted(after - before)}; expected only attn-helpers"
    pip_output = "\n".join(result.stdout.strip().splitlines()[:-1]) + result.stderr
    assert not re.search(r"(?i)(collecting|downloading|installing)\b.*\btorch\b", pip_output), pip_output
    assert Path(report["attn_helpers"]).resolve().is_relative_to(purelib.resolve()), report
    assert not Path(report["torch"]).is_relative_to(purelib), "torch must come from the pre-installed packages"
    assert "vcs_info" in report["direct_url"], f"not installed from git: {report['direct_url']}"
    assert not report["direct_url"].get("dir_info", {}).get("editable", False), report["direct_url"]
    assert report["shape"] == [2, 5, 3] and report["weights_shape"] == [2, 5, 7]
    assert report["max_abs_diff"] < 1e-5, report
    step("checks")
    print(f"Colab install path: {sum(steps.values()):.1f} s {steps}")


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


def test_setup_cell_outside_colab(tmp_path: Path, clean_env: dict[str, str]) -> None:
    script = tmp_path / "local_kernel.py"
    script.write_text(OUTSIDE_COLAB_SCRIPT.format(cell=SETUP_CELL), encoding="utf-8")
    result = _run([sys.executable, str(script)], cwd=tmp_path, env=_child_env(clean_env), timeout=120)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["colab"]
    assert report["calls"] == [], "outside Colab the set-up cell must not run pip (or anything else)"
    assert report["seconds"] < 30, report
    assert report["same"], "torch.rand after the set-up cell must repeat: the cell seeds torch"
    assert report["printed"] == "tensor([    0.333, 12345.678])", report["printed"]
