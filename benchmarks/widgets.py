"""How long one slider move of the heads explorer takes, against redrawing the figure every time.

    python benchmarks/widgets.py            (or: make bench)

A script, not a test: timings depend on the machine and on what else runs on it, so it prints
them (with the machine's load) instead of asserting them. Both ways are measured in the same run,
on the same picture: 8 heads over 32 labelled tokens, rendered to the PNG the browser receives.

* ours: ``HeadsExplorer.set(chan=...)``: recompute the attention, change the heatmaps' data, paint
  them into the kept picture and encode the PNG (what one move of the ``chan`` slider costs).
* naive: what ``ipywidgets.interact`` with inline plots does on every move: the same computation,
  then a new pyplot figure with a 2 x 4 grid of labelled heatmaps and a colour bar, rendered to
  PNG (``bbox_inches="tight"``, as the inline backend does) and closed.

The target is a median under 100 ms for ours. A move of ``num_heads`` or ``tokens`` changes the
layout and redraws the whole figure once; that cost is printed on its own line.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time

import matplotlib

matplotlib.use("Agg")  # in-process, as the tests do; the kernel's inline backend renders with Agg too

import matplotlib.pyplot as plt  # noqa: E402

from attn_helpers.plotting import head_grid, to_numpy  # noqa: E402
from attn_helpers.widgets import HeadsExplorer  # noqa: E402

NUM_HEADS, TOKENS = 8, 32
TARGET_MS = 100.0


def chan_moves(count: int) -> list[int]:
    """Slider positions for ``chan`` (all divisible by 8 heads), each different from the one before:
    up from 16 to 128, then back down."""
    up = list(range(16, 129, 8))
    path = up + up[-2::-1] + up[1:]
    return path[:count]


def time_ours(moves: list[int]) -> tuple[list[float], int]:
    explorer = HeadsExplorer(num_heads=NUM_HEADS, chan=8, tokens=TOKENS)
    times = []
    for chan in moves:
        start = time.perf_counter()
        explorer.set(chan=chan)
        times.append(time.perf_counter() - start)
        assert explorer.valid, explorer.last_status
    return times, len(explorer.image.value)


def time_layout_changes(count: int) -> list[float]:
    explorer = HeadsExplorer(num_heads=NUM_HEADS, chan=64, tokens=TOKENS)
    times = []
    for i in range(count):
        start = time.perf_counter()
        explorer.set(tokens=TOKENS - 1 if i % 2 == 0 else TOKENS)  # 31, 32, 31, ...
        times.append(time.perf_counter() - start)
    return times


def naive_update(explorer: HeadsExplorer, num_heads: int, chan: int, tokens: int) -> bytes:
    """One move the ``interact`` way: compute, build a new figure, render it to PNG, close it."""
    weights = explorer.intermediates(num_heads, chan, tokens)["weights"][0]  # (H, N, N)
    head_grid(to_numpy(weights), list(HeadsExplorer.SENTENCE[:tokens]))  # a new pyplot figure
    figure = plt.gcf()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=explorer.figure.dpi, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def time_naive(moves: list[int]) -> tuple[list[float], int]:
    explorer = HeadsExplorer(num_heads=NUM_HEADS, chan=8, tokens=TOKENS)  # only for its computation
    naive_update(explorer, NUM_HEADS, 8, TOKENS)  # warm-up: font caches, as ours had in its constructor
    times, size = [], 0
    for chan in moves:
        start = time.perf_counter()
        size = len(naive_update(explorer, NUM_HEADS, chan, TOKENS))
        times.append(time.perf_counter() - start)
    return times, size


def ms(seconds: float) -> str:
    return f"{1000 * seconds:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=20, help="slider moves timed for ours (default 20)")
    parser.add_argument("--naive-moves", type=int, default=10,
                        help="slider moves timed for the naive way (default 10; each takes about a second)")
    args = parser.parse_args()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ours, ours_bytes = time_ours(chan_moves(args.moves))
    naive, naive_bytes = time_naive(chan_moves(args.naive_moves))
    layout = time_layout_changes(4)
    ours_median, naive_median = statistics.median(ours), statistics.median(naive)

    print(f"HeadsExplorer, {NUM_HEADS} heads x {TOKENS} labelled tokens, one slider move rendered to PNG")
    print(f"machine: {os.cpu_count()} CPU cores, load average {load:.1f} at the start (other work slows both)")
    print()
    print(f"{'way':<48} {'moves':>5} {'median':>11} {'worst':>11} {'PNG':>9}")
    print(f"{'ours: set_data, paint heatmaps, encode PNG':<48} {len(ours):>5} {ms(ours_median)} {ms(max(ours))} "
          f"{ours_bytes / 1024:>6.0f} kB")
    print(f"{'naive (interact): new figure, render, close':<48} {len(naive):>5} {ms(naive_median)} {ms(max(naive))} "
          f"{naive_bytes / 1024:>6.0f} kB")
    print(f"{'ratio naive / ours':<48} {'':>5} {naive_median / ours_median:>10.1f}x "
          f"{max(naive) / max(ours):>10.1f}x")
    print(f"{'ours, layout change (num_heads or tokens moved)':<48} {len(layout):>5} "
          f"{ms(statistics.median(layout))} {ms(max(layout))}")
    print()
    verdict = "met" if 1000 * ours_median < TARGET_MS else "NOT met"
    print(f"target: ours under {TARGET_MS:.0f} ms median: {verdict} ({1000 * ours_median:.1f} ms)")


if __name__ == "__main__":
    main()
