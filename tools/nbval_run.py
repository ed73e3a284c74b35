"""Strict nbval over several notebooks in a child pytest, its verdicts read back per notebook and cell.

Used for the series' own run (``tests/notebooks/test_notebooks.py``: this environment's kernel, the machine's
default thread count) and the Colab stand-in's (``tools/colab_standin.py``: Colab's versions at another
thread count). Run in a child process, each goes alongside the rest of the suite instead of before it.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

# nbval's per-cell result lines in pytest's -rA summary.
RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED)\S* (\S+\.ipynb)::Cell (\d+)", re.MULTILINE)


# The limit guards against a hung run, not a slow one (each cell also has nbval's 300-s timeout). Beside the rest of
# the suite on a 2-core CI machine (unit tests, the other nbval run, two browsers) a limit of 1,200 s cut the main
# run off after 496 of the series' 499 cells and the Colab stand-in's after 511 of 515, every one of them passed.
LIMIT_SECONDS = 3000.0


class NbvalRun:
    """``cmd`` (a pytest command line ending with the notebooks) run in ``cwd`` with ``env``; stops early
    when ``stop`` is set (the test session ended without needing the results) or after ``limit`` seconds,
    and then says so at the end of :attr:`output`.

    Then :attr:`outcomes` maps each notebook's file name to ``{cell: "PASSED" | "FAILED" | ...}``,
    :attr:`output` holds pytest's whole report and :attr:`seconds` the time it took.
    """

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str], log: Path, *,
                 stop: threading.Event | None = None, limit: float = LIMIT_SECONDS) -> None:
        started = time.perf_counter()
        ended = ""
        with open(log, "w", encoding="utf-8") as out:
            process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
            while process.poll() is None:
                if stop is not None and stop.wait(0.5):
                    process.terminate()
                    process.wait(timeout=30)
                    ended = "stopped: the test session ended"
                    break
                if stop is None:
                    time.sleep(0.5)
                if time.perf_counter() - started > limit:
                    process.kill()
                    process.wait(timeout=30)
                    ended = f"killed after {limit:.0f} s, the run's limit (tools/nbval_run.py)"
                    break
        self.seconds = time.perf_counter() - started
        self.output = log.read_text(encoding="utf-8", errors="replace")
        if ended:
            self.output += f"\n[nbval run {ended}, {self.seconds:.0f} s after it started]\n"
        self.outcomes: dict[str, dict[int, str]] = {}
        for outcome, name, cell in RESULT_LINE.findall(self.output):
            self.outcomes.setdefault(Path(name).name, {})[int(cell)] = outcome

    def failures(self, name: str) -> str:
        """nbval's report of the failed cells of one notebook."""
        # pytest's report: one "____ name::Cell N ____" block per failure, then "==== ... ====" sections.
        blocks = re.split(r"\n(?=_{5,} |={5,} )", self.output)
        return "\n".join(b for b in blocks if f"{name}::Cell" in b.splitlines()[0])[:6000]
