"""Strict nbval over every notebook at several math-library thread counts (``make check-threads``).

A multi-threaded matrix product hands rows to threads whose kernels may round differently, so a
float printed with too many digits, or compared exactly, can change with the thread count. This
runs the same strict comparison as ``make test`` (the project's pytest options: ``--nbval``, the
sanitizer) once per thread count, with ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` fixed and
``MKL_DYNAMIC=FALSE``, and prints one line per count. Exit status 1 if any count failed.

    python -m scripts.check_threads             # 1, 2, 3, 4 and 8 threads (about 1 minute each)
    python -m scripts.check_threads 2 8         # chosen counts
    python -m scripts.check_threads 2 --cpu-capability default   # as on a CPU without AVX

``--cpu-capability`` sets PyTorch's ``ATEN_CPU_CAPABILITY`` (``default``, ``avx2``, ``avx512``): the
vector kernels of another kind of CPU, the nearest this machine can come to running elsewhere.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LEAKY_VARIABLES = ("MPLBACKEND", "PYTHONWARNINGS", "PYTEST_ADDOPTS")
SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")
FAILED_CELL = re.compile(r"^FAILED (\S+::Cell \d+)", re.MULTILINE)


def run(threads: int, notebooks: list[str], capability: str | None = None) -> tuple[dict[str, int], list[str], float]:
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_VARIABLES}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), MKL_DYNAMIC="FALSE")
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:randomly", *notebooks],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    tail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    counts = {kind.rstrip("s") if kind == "errors" else kind: int(n) for n, kind in SUMMARY.findall(tail)}
    if result.returncode not in (0, 1):
        counts["error"] = counts.get("error", 0) + 1
    return counts, FAILED_CELL.findall(result.stdout), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("threads", nargs="*", type=int, default=[1, 2, 3, 4, 8])
    parser.add_argument("--notebooks", nargs="+", default=["notebooks"], help="notebooks or folders to check")
    parser.add_argument("--cpu-capability", choices=["default", "avx2", "avx512"],
                        help="PyTorch's CPU kernels to use (ATEN_CPU_CAPABILITY), as on another kind of CPU")
    args = parser.parse_args(argv)
    if args.cpu_capability:
        print(f"PyTorch CPU kernels: {args.cpu_capability}")
    print(f"{'threads':>7}  {'passed':>6}  {'failed':>6}  {'seconds':>7}  failed cells")
    bad = False
    for threads in args.threads:
        counts, failed, seconds = run(threads, args.notebooks, args.cpu_capability)
        ok = counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("error")
        bad |= not ok
        print(f"{threads:>7}  {counts.get('passed', 0):>6}  {counts.get('failed', 0) + counts.get('error', 0):>6}  "
              f"{seconds:>7.0f}  {', '.join(failed) or ('-' if ok else 'see pytest')}", flush=True)
    print("every thread count passed" if not bad else "some thread counts FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
