"""pip's dry run of the learner's requirements picks PyTorch's CPU build and no CUDA package (nothing downloaded).

In a module of its own: its child process (about three minutes of waiting on the registry in a fresh clone) starts in
the background when this module's test is collected (tools/background.py), and only then.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from test_setup import LEARNER, REPO_ROOT, TEST_ONLY  # tests/notebooks/test_setup.py, beside this file
from tools import background


def pips_dry_run() -> tuple[subprocess.CompletedProcess, dict | None]:
    """pip resolves the learner's set-up as make lab does (ignoring what is installed) and downloads nothing:
    its result and its report. Mostly waiting on the registry (about three minutes here), so it runs in the
    background from the start of the session (tools/background.py)."""
    env = {k: v for k, v in os.environ.items() if k != "PIP_REQUIRE_VIRTUALENV"}
    try:
        socket.getaddrinfo("download.pytorch.org", 443)
    except OSError:  # the Makefile does the same: one try per package on an index that does not resolve
        env["PIP_RETRIES"] = "0"
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
             "--disable-pip-version-check", "--report", str(report), "-r", str(LEARNER)],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
        return result, (json.loads(report.read_text()) if report.exists() else None)


BACKGROUND_JOBS = {"test_setup: pip's dry run of the learner requirements": pips_dry_run}
BACKGROUND_FIRST = True  # it waits on the registry: start it before the notebook runs take the pool


@pytest.mark.slow
def test_pips_dry_run_of_the_learner_requirements_lists_no_cuda_package() -> None:
    """pip resolves the learner's set-up as make lab does (ignoring what is installed) and downloads nothing."""
    name = "test_setup: pip's dry run of the learner requirements"
    result, report = background.result(name, BACKGROUND_JOBS[name])
    assert result.returncode == 0, result.stderr[-3000:]
    chosen = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}
    cuda = sorted(name for name in chosen if name.startswith("nvidia-") or name == "triton")
    assert not cuda, cuda
    assert {"torch", "jupyterlab", "matplotlib", "ipywidgets", "transformers", "attn-helpers"} <= set(chosen)
    assert not set(chosen) & TEST_ONLY, set(chosen) & TEST_ONLY
    if sys.platform == "linux" and os.uname().machine == "x86_64":
        assert chosen["torch"] == "2.13.0+cpu", chosen["torch"]
