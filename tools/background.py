"""Child processes whose outcome a test checks, started in the background as soon as the tests are known.

Some tests spend their time waiting for a child process: a fresh Python that imports the package, a
child pytest that runs nbval on a tiny notebook. Run in line, each wait holds up the unit tests behind
it. Instead, a test module lists such work in ``BACKGROUND_JOBS`` (a name and a zero-argument
function); ``conftest.py`` hands the jobs of every collected module to a small pool of threads when
collection ends, and a test asks for the job's outcome with :func:`result` (its return value, or its
exception raised again). The test keeps every assertion; only the waiting moves.

Run without ``conftest.py``'s start (a single test file, say), :func:`result` starts the job itself.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable, Iterable
from typing import Any

# Environment variables that must not reach a kernel, a child Python or a child pytest: MPLBACKEND
# removes figures, PYTHONWARNINGS can add stderr, PYTEST_ADDOPTS changes a child pytest's options.
LEAKY_ENV_VARS = ("MPLBACKEND", "PYTHONWARNINGS", "PYTEST_ADDOPTS")

Job = Callable[[], Any]
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_futures: dict[str, concurrent.futures.Future] = {}


def clean_environ() -> dict[str, str]:
    """A copy of this process's environment for a child process, without the leaky variables."""
    return {name: value for name, value in os.environ.items() if name not in LEAKY_ENV_VARS}


def start(jobs: Iterable[tuple[str, Job]]) -> None:
    """Start every job not started yet (three at a time: each mostly waits on its child process or the network)."""
    global _pool
    for name, job in jobs:
        if name in _futures:
            continue
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=3, thread_name_prefix="background")
        _futures[name] = _pool.submit(job)


def result(name: str, job: Job) -> Any:
    """The outcome of job ``name`` (started now if it was not): its value, or its exception raised here."""
    start([(name, job)])
    return _futures[name].result()


def shutdown() -> None:
    """Wait for the jobs still running (their children end with their timeouts) and forget them all."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
    _pool = None
    _futures.clear()
