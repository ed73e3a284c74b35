"""How long a learner waits for a new picture: slider key press -> new image shown, in the browser.

Starts JupyterLab on a temporary copy of the notebooks and drives it with headless Chromium (as the
browser tests do). For every explorer of every notebook: Run All, then press an arrow key on one
slider 20 times (right, left, right, ...) and measure, with the page's own clock, the time from the
key press to the moment the explorer's new picture has loaded. Prints the median and the worst move.

    .venv/bin/python -m benchmarks.browser_latency [notebooks/05_multi_head.ipynb ...]   # from the repository's root

Needs Chromium (env CHROMIUM, else chromium-headless-shell or chromium: see tools/browser_support.find_chromium). Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from tools.browser_support import (
    Browser,
    ExplorerView,
    JupyterServer,
    LessonPage,
    find_chromium,
    lesson_notebooks,
    widget_outputs,
    with_tempdir,
)

MOVES = 20

# In the page: remember when the key went down, and when the explorer's image last got a new
# src and finished loading it.
INSTALL = """([box, handle]) => {
    const img = box.querySelector(':scope > img.widget-image');
    const marks = {key: 0, src: 0, load: 0};
    handle.addEventListener('keydown', () => { marks.key = performance.now(); marks.src = 0; marks.load = 0; },
                            {capture: true});
    new MutationObserver(() => { marks.src = performance.now(); }).observe(img, {attributes: true,
                                                                                   attributeFilter: ['src']});
    img.addEventListener('load', () => { if (marks.src) marks.load = performance.now(); });
    window.__latency = marks;
}"""


def pick_slider(explorer: ExplorerView):
    """The first slider whose arrow step (right, or left at the maximum) gives a new, valid picture."""
    for control in explorer.controls():
        if control.kind != "slider":
            continue
        info = explorer.slider_info(control)
        there, back = ("ArrowRight", "ArrowLeft") if info["pos"] < info["max"] else ("ArrowLeft", "ArrowRight")
        before = explorer.state()
        moved = explorer.press(control, there)
        now = explorer.wait_for_value(control.name, before, moved["readout"])
        explorer.set_slider(control.name, info)
        if now.valid:
            explorer.wait_back_to(before)
            return control, (there, back)
        explorer.wait_back_to(before)
    return None, None


def measure(explorer: ExplorerView) -> tuple[str, list[float]]:
    control, keys = pick_slider(explorer)
    if control is None:
        return "(no slider gives a new picture in one step)", []
    handle = explorer.handle(control)
    explorer.page.evaluate(INSTALL, [explorer.box.element_handle(), handle.element_handle()])
    times = []
    for i in range(MOVES):
        key = keys[i % 2]
        before = explorer.state()
        handle.focus()
        handle.press(key)
        explorer.page.wait_for_function("() => window.__latency.load > window.__latency.key", timeout=30_000)
        marks = explorer.page.evaluate("() => window.__latency")
        times.append(marks["load"] - marks["key"])
        explorer.wait_for_value(control.name, before)  # the status line agrees before the next move
    return control.name, times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook with an explorer")
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium found: set CHROMIUM or install Debian's chromium", file=sys.stderr)
        return 2
    paths = [p.resolve() for p in args.notebooks] or [p for p in lesson_notebooks() if widget_outputs(p)]
    print(f"key press -> new picture loaded, {MOVES} arrow-key moves per explorer (ms)")
    print(f"(load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'notebook':<32} {'explorer':<26} {'slider':<12} {'median':>7} {'worst':>7}")
    with with_tempdir() as tmp, JupyterServer(Path(tmp), source=paths[0].parent) as server:
        browser = Browser(chromium)
        try:
            for path in paths:
                lesson = LessonPage(server, browser, path)
                try:
                    lesson.open_and_run_all()
                    for explorer in lesson.explorers():
                        explorer.box.scroll_into_view_if_needed()
                        slider, times = measure(explorer)
                        stats = (f"{statistics.median(times):7.0f} {max(times):7.0f}" if times else f"{'-':>7} {'-':>7}")
                        print(f"{path.name:<32} {explorer.class_name:<26} {slider:<12} {stats}", flush=True)
                finally:
                    lesson.close()
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    start = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - start:.0f} s in all)")
    sys.exit(code)
