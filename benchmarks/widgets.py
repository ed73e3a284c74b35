"""How long a control move takes in every explorer, and the heads explorer against redrawing the figure every time.

    python -m benchmarks.widgets            (or: make bench)
    python -m benchmarks.widgets --density 2    (the pictures rendered for high-density screens)
    python -m benchmarks.widgets --cells        (one heatmap panel redrawn: imshow against views.Cells)

A script, not a test: timings depend on the machine and on what else runs on it, so it prints
them (with the machine's load) instead of asserting them.

Every explorer: each control is moved through its values (sliders in a few steps from end to end,
every option of a dropdown), one move at a time, and each move's time is sorted by what it did:
an *update* (the layout kept, only what changed is drawn again) or a *layout change* (``draw`` ran:
the figure was laid out anew). Targets: update median under 100 ms, layout change under 150 ms.
Times are CPU seconds of this process (``time.process_time``), which another job on the machine
inflates much less than wall time; the wall-clock median is printed beside them.

The heads explorer against ``interact``, on the same picture: 8 heads over 32 labelled tokens,
rendered to the PNG the browser receives.

* ours: ``HeadsExplorer.set(chan=...)``: recompute the attention, change the heatmaps' data, paint
  them into the kept picture and encode the PNG (what one move of the ``chan`` slider costs).
* naive: what ``ipywidgets.interact`` with inline plots does on every move: the same computation,
  then a new pyplot figure with a 2 x 4 grid of labelled heatmaps and a colour bar, rendered to
  PNG (``bbox_inches="tight"``, as the inline backend does) and closed.

The target is a median under 100 ms for ours. A move of ``num_heads`` or ``tokens`` lays out no figure
(each head count's figure is drawn when the explorer is made, with room for every token count); its cost is
printed on its own line.
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
import numpy as np  # noqa: E402

import ipywidgets as W  # noqa: E402

from attn_helpers import widgets  # noqa: E402
from attn_helpers.views import head_grid, to_numpy  # noqa: E402
from attn_helpers.widgets import HeadsExplorer  # noqa: E402

NUM_HEADS, TOKENS = 8, 32
TARGET_MS = 100.0
LAYOUT_TARGET_MS = 150.0


BUILD_SECONDS: dict[str, float] = {}  # wall time of each explorer's construction (its first picture included)


def explorers() -> dict[str, widgets.Explorer]:
    """One explorer of every kind, as the lessons build them (trained runs and the real model where needed)."""
    from attn_helpers.lab import LookupTask, PreviousTokenTask, TrainConfig, train_many

    found = {}
    for name in widgets.__all__:
        cls = getattr(widgets, name)
        if not (isinstance(cls, type) and issubclass(cls, widgets.Explorer)) or cls is widgets.Explorer:
            continue
        arguments = ()
        if name == "AttentionSnapshotExplorer":
            config = TrainConfig(steps=20, snapshot_every=5, held_out=32)
            arguments = (train_many({"previous token": (PreviousTokenTask(), config),
                                     "lookup": (LookupTask(), config)}),)
        elif name == "PretrainedAttentionExplorer":
            from attn_helpers.lab.pretrained import load_from_package, packaged_model_available

            if not packaged_model_available():
                continue
            arguments = (load_from_package(),)
        start = time.perf_counter()
        found[name] = cls(*arguments)
        BUILD_SECONDS[name] = time.perf_counter() - start
    return found


def control_values(control: W.ValueWidget, steps: int = 4) -> list:
    """The values one control is moved through: every option, or a few steps across a slider's range."""
    if hasattr(control, "options") and control.options:
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return [o for o in options if o != control.value] + [control.value]
    if isinstance(control.value, bool):
        return [not control.value, control.value]
    if hasattr(control, "min") and hasattr(control, "max"):
        low, high, step = control.min, control.max, getattr(control, "step", 1) or 1
        count = max(int(round((high - low) / step)), 1)
        picks = sorted({low + step * round(count * i / steps) for i in range(steps + 1)})
        return [v for v in picks if v != control.value] + [control.value]
    return []


def time_every_explorer() -> list[tuple[str, str, list[float], list[float], list[float]]]:
    """``(explorer, control, update CPU s, layout-change CPU s, wall s)`` for every control of every explorer."""
    rows = []
    for name, explorer in explorers().items():
        draws = []
        original = explorer.draw
        explorer.draw = lambda figure, original=original: (draws.append(1), original(figure))[1]
        for control_name, control in explorer.controls.items():
            updates, layouts, wall = [], [], []
            for value in control_values(control):
                before, start, cpu = len(draws), time.perf_counter(), time.process_time()
                explorer.set(**{control_name: value})
                spent = time.process_time() - cpu
                wall.append(time.perf_counter() - start)
                (layouts if len(draws) > before else updates).append(spent)
            rows.append((name, control_name, updates, layouts, wall))
    return rows


def print_every_explorer(rows) -> None:
    print(f"{'explorer':<28} {'control':<14} {'update median':>14} {'worst':>10} {'layout median':>14} "
          f"{'worst':>10} {'wall median':>12}")

    def cell(times: list[float]) -> tuple[str, str]:
        if not times:
            return f"{'-':>11}   ", f"{'-':>7}   "
        return ms(statistics.median(times)), ms(max(times))

    for name, control, updates, layouts, wall in rows:
        u, uw = cell(updates)
        lay, lw = cell(layouts)
        print(f"{name:<28} {control:<14} {u:>14} {uw:>10} {lay:>14} {lw:>10} {ms(statistics.median(wall)):>12}")
    print("built in (wall, first picture included): " + ", ".join(
        f"{name} {1000 * seconds:.0f} ms" for name, seconds in BUILD_SECONDS.items()))
    updates = [statistics.median(r[2]) for r in rows if r[2]]
    layouts = [statistics.median(r[3]) for r in rows if r[3]]
    slow_updates = [f"{r[0]}.{r[1]}" for r in rows if r[2] and 1000 * statistics.median(r[2]) >= TARGET_MS]
    slow_layouts = [f"{r[0]}.{r[1]}" for r in rows if r[3] and 1000 * statistics.median(r[3]) >= LAYOUT_TARGET_MS]
    print(f"target: every update median under {TARGET_MS:.0f} ms CPU: "
          f"{'met' if not slow_updates else 'NOT met by ' + ', '.join(slow_updates)} "
          f"(slowest {1000 * max(updates):.1f} ms)")
    if layouts:
        print(f"target: every layout change median under {LAYOUT_TARGET_MS:.0f} ms CPU: "
              f"{'met' if not slow_layouts else 'NOT met by ' + ', '.join(slow_layouts)} "
              f"(slowest {1000 * max(layouts):.1f} ms)")


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


def time_layout_moves(count: int) -> list[float]:
    """``count`` moves of ``tokens`` (31, 32, 31, ...) and as many of ``num_heads`` (4, 8, 4, ...)."""
    explorer = HeadsExplorer(num_heads=NUM_HEADS, chan=64, tokens=TOKENS)
    times = []
    for i in range(2 * count):
        if i < count:
            change = {"tokens": TOKENS - 1 + i % 2}
        else:
            change = {"num_heads": NUM_HEADS // 2 if i % 2 == 0 else NUM_HEADS}
        start = time.perf_counter()
        explorer.set(**change)
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


def time_cells(repeats: int = 40) -> None:
    """One heatmap panel as an explorer redraws it on a move (the kept picture pasted back, the new matrix drawn on
    top): matplotlib's ``imshow(interpolation="nearest")``, which resamples the matrix to the panel's pixels,
    against :class:`attn_helpers.views.Cells`, which Agg fills as polygons. CPU time per redraw (median)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attn_helpers.views import WEIGHTS_CMAP, cells

    density = widgets.Explorer.pixel_density
    print(f"one {3.8 * 80 * density:.0f}-px square panel redrawn with a new matrix ({repeats} times, CPU time)")
    print(f"{'matrix':>8} {'imshow':>11} {'Cells':>11} {'ratio':>7}")
    generator = np.random.default_rng(0)
    for n in (8, 32):
        medians = []
        for way in ("imshow", "cells"):
            figure = Figure(figsize=(3.8, 3.8), dpi=80 * density)
            canvas = FigureCanvasAgg(figure)
            ax = figure.add_axes((0.0, 0.0, 1.0, 1.0))
            first = generator.random((n, n))
            artist = (ax.imshow(first, cmap=WEIGHTS_CMAP, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
                      if way == "imshow" else cells(ax, first, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0))
            artist.set_animated(True)
            canvas.draw()
            background = canvas.copy_from_bbox(figure.bbox)
            times = []
            for _ in range(repeats):
                artist.set_data(generator.random((n, n)))
                start = time.process_time()
                canvas.restore_region(background)
                figure.draw_artist(artist)
                times.append(time.process_time() - start)
            medians.append(statistics.median(times))
        print(f"{n:>3} x {n:<3} {ms(medians[0])} {ms(medians[1])} {medians[0] / medians[1]:>6.1f}x")


def ms(seconds: float) -> str:
    return f"{1000 * seconds:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=20, help="slider moves timed for ours (default 20)")
    parser.add_argument("--naive-moves", type=int, default=10,
                        help="slider moves timed for the naive way (default 10; each takes about a second)")
    parser.add_argument("--heads-only", action="store_true", help="only the heads explorer against interact")
    parser.add_argument("--cells", action="store_true",
                        help="only one heatmap panel's redraw: imshow against views.Cells (CPU time)")
    parser.add_argument("--density", type=int, default=widgets.Explorer.pixel_density,
                        help="pixels rendered per CSS pixel (Explorer.pixel_density; 2: for high-density screens)")
    args = parser.parse_args()
    widgets.Explorer.pixel_density = args.density

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPU cores, load average {load:.1f} at the start (other work slows everything)")
    print(f"pictures rendered at {args.density}x ({80 * args.density} dpi for the usual 80)")
    print()
    if args.cells:
        time_cells()
        return
    if not args.heads_only:
        print("Every explorer, every control (CPU time per move)")
        print_every_explorer(time_every_explorer())
        print()
    ours, ours_bytes = time_ours(chan_moves(args.moves))
    naive, naive_bytes = time_naive(chan_moves(args.naive_moves))
    layout = time_layout_moves(4)
    ours_median, naive_median = statistics.median(ours), statistics.median(naive)

    print(f"HeadsExplorer, {NUM_HEADS} heads x {TOKENS} labelled tokens, one slider move rendered to PNG (wall time)")
    print(f"{'way':<48} {'moves':>5} {'median':>11} {'worst':>11} {'PNG':>9}")
    print(f"{'ours: set_data, blit heatmaps, encode PNG':<48} {len(ours):>5} {ms(ours_median)} {ms(max(ours))} "
          f"{ours_bytes / 1024:>6.0f} kB")
    print(f"{'naive (interact): new figure, render, close':<48} {len(naive):>5} {ms(naive_median)} {ms(max(naive))} "
          f"{naive_bytes / 1024:>6.0f} kB")
    print(f"{'ratio naive / ours':<48} {'':>5} {naive_median / ours_median:>10.1f}x "
          f"{max(naive) / max(ours):>10.1f}x")
    print(f"{'ours, a num_heads or tokens move':<48} {len(layout):>5} "
          f"{ms(statistics.median(layout))} {ms(max(layout))}")
    print()
    verdict = "met" if 1000 * ours_median < TARGET_MS else "NOT met"
    print(f"target: ours under {TARGET_MS:.0f} ms median: {verdict} ({1000 * ours_median:.1f} ms)")


if __name__ == "__main__":
    main()
