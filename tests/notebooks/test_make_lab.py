"""A newcomer's first minute: ``make lab`` prints a URL that opens the orientation notebook itself.

It also opens every notebook through the server (its contents API, as a browser tab does) and checks the
server never says a notebook "is not trusted": ``make lab`` trusts the committed notebooks before it starts.

Runs the README's own command (``make lab``, on a free port, with a temporary home so no personal
Jupyter settings take part), reads what it prints until the URL appears, and checks that the URL
opens ``00_orientation.ipynb`` (not the Launcher) and that JupyterLab will not ask about news
(the settings API gives ``fetchNews`` the default ``"false"``, "Never"). The server is stopped by its process group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools.browser_support import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def _get(request, attempts: int = 40) -> tuple[int, bytes]:
    """Status and body of a URL, retrying while the server that printed it is not answering yet."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=20) as reply:
                return reply.status, reply.read()
        except urllib.error.URLError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_prints_a_url_that_opens_the_orientation_notebook(tmp_path: Path, clean_env: dict[str, str]) -> None:
    if not (REPO_ROOT / ".venv" / ".installed").exists():
        pytest.skip("make lab would first build .venv; run `make setup` (make test does)")
    port = free_port()
    home = tmp_path / "home"
    env = dict(clean_env, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
               JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               IPYTHONDIR=str(home / ".ipython"), BROWSER="true")  # no web browser is opened
    process = subprocess.Popen(["make", "--no-print-directory", "lab", f"PORT={port}"], cwd=REPO_ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    printed: list[str] = []
    try:
        url = None
        deadline = time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            printed.append(line)
            match = re.search(rf"(http://127\.0\.0\.1:{port}/\S+\?token=\w+)", line)
            url = match.group(1) if match else None
        assert url, "make lab printed no URL with a token:\n" + "".join(printed)
        assert f"127.0.0.1:{port}/lab/tree/00_orientation.ipynb?token=" in url, url
        assert _get(url)[0] == 200
        token = url.rsplit("token=", 1)[1]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification",
            headers={"Authorization": f"token {token}"})
        settings = json.loads(_get(request)[1])
        # The override becomes the setting's default (a learner's own choice would still win).
        news = settings["schema"]["properties"]["fetchNews"]
        assert news["default"] == "false" and "fetchNews" not in settings["settings"], news
        for notebook in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
            opened = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/{notebook.name}?content=1",
                                            headers={"Authorization": f"token {token}"})
            assert _get(opened)[0] == 200, notebook.name
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    printed.append(process.stdout.read())
    untrusted = [line for line in "".join(printed).splitlines() if "not trusted" in line]
    assert not untrusted, "\n".join(untrusted)
