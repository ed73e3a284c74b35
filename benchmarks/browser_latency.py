"""How long a learner waits for a new picture: every control of every explorer, input -> new picture painted.

Starts JupyterLab on a temporary copy of the notebooks and drives it with headless Chromium at 1366 x 768
(a common laptop screen), as the browser tests do. For every explorer of every notebook: Run All, then
move each control ``--moves`` times the way a learner would, and time each move with the page's own
clock, from the input event to the new picture painted (the image loaded and the next animation frame
after it):

* a slider: an arrow key on its handle (right, left, right, ...; left first at its maximum);
* a dropdown: an option picked from the list (the ``<select>``'s own input event; what a mouse pick does);
* a checkbox, a toggle button, toggle buttons: a mouse click.

Each control's moves alternate between values whose picture the explorer can draw ("not possible"
combinations are left out and counted). The kernel's share is timed in the kernel itself: the
explorers' ``Explorer.refresh`` is wrapped (by a silent execution, which leaves the notebook as it is)
so each move reports how long its refresh took and whether it laid the figure out anew (``rebuild``,
a *layout* move: the budget there is 150 ms in the kernel, against 100 ms key-to-paint for the rest).

Then, for every explorer: its height on the page against the notebook's visible height (JupyterLab at
1366 x 768 with the file browser open), i.e. whether its controls and its picture fit on one screen.

    python -m benchmarks.browser_latency [05_multi_head.ipynb ...]      (or: make bench-browser)
    python -m benchmarks.browser_latency --root OTHER_CHECKOUT           # another checkout's notebooks and package
    python -m benchmarks.browser_latency --density 1                     # pictures at another density than the checkout's

``--root``: serve that checkout's ``notebooks/`` and let its kernels import that checkout's ``attn_helpers``
(its folder first on ``PYTHONPATH``); the driving code is this one. Needs Chromium (env ``CHROMIUM``, else
chromium-headless-shell or chromium: see ``tools/browser_support.find_chromium``). Not a test: it prints
numbers, with the machine's load.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.browser_support import (
    DISCRETE_KINDS,
    REPO_ROOT,
    Browser,
    Control,
    ExplorerView,
    JupyterServer,
    LessonPage,
    find_chromium,
    widget_outputs,
    with_tempdir,
)

MOVES = 8
WIDTH, HEIGHT = 1366, 768
TARGET_MS, LAYOUT_KERNEL_MS = 100.0, 150.0
MOVE_TIMEOUT_MS = 20_000

# In the page: marks for one move. `start` is the first input event on the control after the move was
# armed (keydown, mousedown, or a select's input/change), `src` the explorer's image getting a new src,
# `load` that picture loaded, `paint` the animation frame after the load (the picture is on screen).
# `status` is the status line's change; when it changes and no new picture came before it, the move's
# picture is the same as before (the kernel sends no unchanged value): `same` is the frame after it.
INSTALL_JS = """([box, target]) => {
    if (window.__latencyCleanup) window.__latencyCleanup();
    const img = box.querySelector(':scope > img.widget-image');
    // the status line's own HTML widget (an explorer also has a caption and its picture in words)
    const code = box.querySelector(':scope > .widget-html code.explorer-status');
    const line = code ? code.closest('.widget-html') : box.querySelector(':scope > .widget-html');
    const m = window.__latency = {armed: false, start: 0, src: 0, load: 0, paint: 0, status: 0, same: 0};
    const onStatus = () => {
        if (!m.start || m.status) return;
        m.status = performance.now();
        if (!m.src) requestAnimationFrame(() => { m.same = performance.now(); });
    };
    const statusWatch = new MutationObserver(onStatus);
    statusWatch.observe(line, {subtree: true, childList: true, characterData: true});
    const onStart = () => { if (m.armed && !m.start) m.start = performance.now(); };
    const types = ['keydown', 'mousedown', 'input', 'change'];
    for (const t of types) target.addEventListener(t, onStart, {capture: true});
    const watch = new MutationObserver(() => { if (m.start && !m.src) m.src = performance.now(); });
    watch.observe(img, {attributes: true, attributeFilter: ['src']});
    const onLoad = () => {
        if (!m.src || m.load) return;
        m.load = performance.now();
        requestAnimationFrame(() => { m.paint = performance.now(); });
    };
    img.addEventListener('load', onLoad);
    window.__latencyCleanup = () => {
        for (const t of types) target.removeEventListener(t, onStart, {capture: true});
        watch.disconnect();
        statusWatch.disconnect();
        img.removeEventListener('load', onLoad);
    };
}"""
ARM_JS = "() => Object.assign(window.__latency, {armed: true, start: 0, src: 0, load: 0, paint: 0, status: 0, same: 0})"
# Done: the new picture is painted, or the status line changed and the picture stays (the same picture,
# or a state that has none).
DONE_JS = """([box, before]) => {
    const m = window.__latency;
    if (m.paint || m.same) return true;
    const status = box.querySelector(':scope > .widget-html code.explorer-status');
    return !!(m.start && status && status.textContent !== before && status.classList.contains('explorer-problem'));
}"""

# In the kernel (a silent execution: no output, no execution count): wrap Explorer.refresh and
# Explorer.rebuild so every refresh logs [seconds, rebuilt]; ``_latency_drain()`` returns the log as JSON
# and empties it. Works on any checkout whose explorers share ``Explorer.refresh`` (``rebuild`` optional).
KERNEL_INSTALL = """
def _attn_latency_install():
    import json, time
    from attn_helpers import widgets
    cls = widgets.Explorer
    if getattr(cls, "_latency_log", None) is not None:
        return
    log = cls._latency_log = []
    refresh, rebuild = cls.refresh, getattr(cls, "rebuild", None)

    def timed_refresh(self, *args, **kwargs):
        self._latency_rebuilt = False
        start = time.perf_counter()
        try:
            return refresh(self, *args, **kwargs)
        finally:
            log.append([time.perf_counter() - start, self._latency_rebuilt])

    def timed_rebuild(self, *args, **kwargs):
        self._latency_rebuilt = True
        return rebuild(self, *args, **kwargs)

    def drain():
        text = json.dumps(log)
        log.clear()
        return text

    cls.refresh = timed_refresh
    if rebuild is not None:
        cls.rebuild = timed_rebuild
    cls._latency_drain = staticmethod(drain)

_attn_latency_install()
del _attn_latency_install
"""
# Pictures rendered for high-density screens (``Explorer.pixel_density``), set in the kernel before Run All.
DENSITY_CODE = """
from attn_helpers import widgets as _widgets
if not hasattr(_widgets.Explorer, "pixel_density"):
    raise RuntimeError("this checkout's Explorer has no pixel_density")
_widgets.Explorer.pixel_density = {density}
del _widgets
"""
DRAIN_EXPRESSION = "__import__('attn_helpers.widgets', fromlist=['Explorer']).Explorer._latency_drain()"

# In the page: run code silently in the notebook's kernel (JupyterLab's app, exposed by the server
# flag below) and return the text of one user expression.
KERNEL_JS = """async ([code, expression]) => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    const kernel = panel.sessionContext.session.kernel;
    const future = kernel.requestExecute({code: code, silent: true, store_history: false,
                                          user_expressions: expression ? {r: expression} : {}});
    const reply = await future.done;
    if (reply.content.status !== 'ok') return {error: reply.content.ename + ': ' + reply.content.evalue};
    const r = (reply.content.user_expressions || {}).r;
    if (r && r.status !== 'ok') return {error: r.ename + ': ' + r.evalue};
    return {text: r ? r.data['text/plain'] : ''};
}"""

# In the page: the notebook's visible height (its scrolling area) and each explorer's extent.
FIT_JS = """([boxes]) => {
    const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
    const sidebar = document.querySelector('#jp-left-stack');
    return {visible: outer.clientHeight, sidebar: sidebar ? sidebar.getBoundingClientRect().width : 0,
            boxes: boxes.map(box => {
                const r = box.getBoundingClientRect();
                const img = box.querySelector(':scope > img.widget-image');
                const ir = img.getBoundingClientRect();
                return {height: r.height, toPicture: ir.bottom - r.top, picture: ir.height,
                        width: ir.width, natural: img.naturalWidth};
            })};
}"""


class LatencyServer(JupyterServer):
    """JupyterLab with its app object exposed to the page (to reach the kernel), and ``root``'s package
    first on the kernels' path."""

    def __init__(self, base: Path, root: Path) -> None:
        super().__init__(base, source=root / "notebooks")
        self.package_root = root

    def command(self) -> list[str]:
        return [*super().command(), "--LabApp.expose_app_in_browser=True"]

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.package_root), env.get("PYTHONPATH", "")]))
        return env


@dataclass
class Row:
    notebook: str
    explorer: str
    control: str
    kind: str
    paint_ms: list[float] = field(default_factory=list)
    kernel_ms: list[float] = field(default_factory=list)
    layouts: int = 0
    impossible: int = 0
    same_ms: list[float] = field(default_factory=list)  # moves that left the picture as it was: to the new status
    note: str = ""

    @property
    def layout(self) -> str:
        n = len(self.paint_ms)
        return "-" if not n else "yes" if self.layouts == n else "no" if not self.layouts else f"{self.layouts}/{n}"


def kernel(page: Any, code: str, expression: str = "") -> str:
    result = page.evaluate(KERNEL_JS, [code, expression])
    if "error" in result:
        raise RuntimeError(f"kernel: {result['error']}")
    return result["text"]


def drain(page: Any) -> list[list[Any]]:
    return json.loads(ast.literal_eval(kernel(page, "", DRAIN_EXPRESSION)))


HOW = {"slider": "arrow key", "dropdown": "pick (mouse)", "checkbox": "click", "toggle": "click",
       "togglebuttons": "click", "radio": "click"}


class ControlMover:
    """One control of one explorer: moves that give a new picture, each timed in the page and the kernel."""

    def __init__(self, explorer: ExplorerView, control: Control) -> None:
        self.explorer, self.control, self.page = explorer, control, explorer.page
        self.box = explorer.box.element_handle()

    def target(self) -> Any:
        if self.control.kind == "slider":
            return self.explorer.handle(self.control)
        return self.control.locator

    def act(self, action) -> tuple[dict[str, float], bool, list[list[Any]]]:
        """Arm the marks, do ``action``, wait for the picture (or a "not possible" line), then for the kernel."""
        before = self.explorer.state()
        self.page.evaluate(ARM_JS)
        action()
        self.page.wait_for_function(DONE_JS, arg=[self.box, before.status], timeout=MOVE_TIMEOUT_MS, polling="raf")
        marks = self.page.evaluate("() => window.__latency")
        log = drain(self.page)  # the kernel answers once the move's refresh has finished
        now = self.explorer.wait_for_value(self.control.name, before) if self.control.kind == "slider" \
            else self.explorer.state()
        return marks, now.valid and bool(marks["paint"]), log

    def record(self, row: Row, marks: dict[str, float], painted: bool, log: list[list[Any]]) -> None:
        if not painted:
            if marks["same"] and not marks["src"] and self.explorer.state().valid:
                row.same_ms.append(marks["same"] - marks["start"])
            else:
                row.impossible += 1
            return
        row.paint_ms.append(marks["paint"] - marks["start"])
        row.kernel_ms.append(1000 * sum(seconds for seconds, _ in log))
        row.layouts += any(rebuilt for _, rebuilt in log)

    def run(self, row: Row, moves: int) -> None:
        handle = self.target().element_handle() if self.control.kind != "checkbox" else \
            self.control.locator.locator("input[type=checkbox]").first.element_handle()
        self.page.evaluate(INSTALL_JS, [self.box, handle])
        if self.control.kind == "slider":
            self.slider(row, moves)
        elif self.control.kind == "dropdown":
            self.dropdown(row, moves)
        elif self.control.kind in DISCRETE_KINDS:
            self.clicks(row, moves)
        else:
            row.note = "not driven"

    def slider(self, row: Row, moves: int) -> None:
        first = self.explorer.slider_info(self.control)
        handle = self.explorer.handle(self.control)
        keys = ("ArrowRight", "ArrowLeft") if first["pos"] < first["max"] else ("ArrowLeft", "ArrowRight")
        for attempt in (keys, keys[::-1]):  # the first step must be drawable, else try the other side
            marks, painted, log = self.act(lambda: handle.press(attempt[0]))
            self.record(row, marks, painted, log)
            if painted:
                keys = attempt
                break
            self.explorer.set_slider(self.control.name, first)
        else:
            row.note = "no drawable neighbour"
            return
        for i in range(1, moves):
            marks, painted, log = self.act(lambda key=keys[i % 2]: handle.press(key))
            self.record(row, marks, painted, log)
        self.explorer.set_slider(self.control.name, first)

    def dropdown(self, row: Row, moves: int) -> None:
        _, labels, start = self.explorer.options(self.control)
        select = self.control.locator.locator("select").first
        order = [i for i in range(len(labels)) if i != start] + [start]
        drawable = list(order)
        done = 0
        while done < moves and drawable:
            for index in list(drawable):
                marks, painted, log = self.act(lambda index=index: select.select_option(index=index))
                self.record(row, marks, painted, log)
                if not painted:
                    drawable.remove(index)
                done += 1
                if done >= moves:
                    break
        if self.explorer.options(self.control)[2] != start:
            self.act(lambda: select.select_option(index=start))

    def clicks(self, row: Row, moves: int) -> None:
        if self.control.kind == "togglebuttons":
            elements, labels, start = self.explorer.options(self.control)
            order = [i for i in range(len(labels)) if i != start] + [start]
            targets = [elements[order[i % len(order)]] for i in range(moves)]
            targets += [] if len(targets) % len(order) == 0 else [elements[start]]
        else:
            target = self.control.locator.locator("input[type=checkbox]").first if self.control.kind == "checkbox" \
                else self.control.locator
            targets = [target] * (moves + moves % 2)  # an even number: back where it started
        for i, target in enumerate(targets):
            marks, painted, log = self.act(target.click)
            if i < moves:
                self.record(row, marks, painted, log)


PACKAGES_SEEN: set[str] = set()


def measure_notebook(lesson: LessonPage, moves: int, density: int | None = None) -> tuple[list[Row], dict[str, Any]]:
    lesson.open()
    page = lesson.page
    kernel(page, KERNEL_INSTALL)
    package = ast.literal_eval(kernel(page, "", "__import__('attn_helpers').__file__"))
    if package not in PACKAGES_SEEN:
        PACKAGES_SEEN.add(package)
        print(f"(the kernel imports {package})", flush=True)
    if density is not None:  # before Run All, so the explorers are built with it
        kernel(page, DENSITY_CODE.format(density=density))
    lesson.run_all()
    lesson.wait_rendered()
    drain(page)  # the refreshes of Run All itself
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")  # the file browser open
    rows = []
    explorers = lesson.explorers()
    for explorer in explorers:
        explorer.box.scroll_into_view_if_needed()
        for control in explorer.controls():
            row = Row(lesson.name, explorer.class_name, control.name, HOW.get(control.kind, control.kind))
            ControlMover(explorer, control).run(row, moves)
            rows.append(row)
            print_row(row)
    fit = page.evaluate(FIT_JS, [[e.box.element_handle() for e in explorers]])
    return rows, fit


def median(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f}" if values else f"{'-':>7}"


def print_header(moves: int) -> None:
    print(f"input -> new picture painted, {moves} moves per control (ms); kernel: Explorer.refresh's own time")
    print(f"{'notebook':<28} {'explorer':<27} {'control':<12} {'kind':<12} {'median':>7} {'worst':>7} "
          f"{'kernel':>7} {'kworst':>7} {'layout':>6}  note")


def print_row(row: Row) -> None:
    worst = f"{max(row.paint_ms):7.0f}" if row.paint_ms else f"{'-':>7}"
    kworst = f"{max(row.kernel_ms):7.0f}" if row.kernel_ms else f"{'-':>7}"
    note = row.note + (f" ({row.impossible} not drawable)" if row.impossible else "") \
        + (f" ({len(row.same_ms)} same picture: new status line painted, median "
           f"{statistics.median(row.same_ms):.0f} ms)" if row.same_ms else "")
    print(f"{row.notebook[:28]:<28} {row.explorer:<27} {row.control:<12} {row.kind:<12} {median(row.paint_ms)} "
          f"{worst} {median(row.kernel_ms)} {kworst} {row.layout:>6}  {note}", flush=True)


def print_verdicts(rows: list[Row]) -> None:
    slow = [r for r in rows if r.paint_ms and r.layout != "yes" and statistics.median(r.paint_ms) >= TARGET_MS]
    slow_layout = [r for r in rows if r.kernel_ms and r.layouts and statistics.median(r.kernel_ms) >= LAYOUT_KERNEL_MS]
    name = lambda r: f"{r.notebook[:2]} {r.explorer}.{r.control}"  # noqa: E731
    print(f"target: every control's median under {TARGET_MS:.0f} ms input-to-paint: "
          + ("met" if not slow else "NOT met by " + ", ".join(name(r) for r in slow)))
    print(f"target: every layout move under {LAYOUT_KERNEL_MS:.0f} ms in the kernel (median): "
          + ("met" if not slow_layout else "NOT met by " + ", ".join(name(r) for r in slow_layout)))


def print_fits(fits: list[tuple[str, list[str], dict[str, Any]]]) -> None:
    print()
    print(f"explorers on a {WIDTH} x {HEIGHT} page, file browser open (CSS px): does each fit the notebook's "
          "visible height?")
    print(f"{'notebook':<28} {'explorer':<27} {'visible':>7} {'box':>6} {'to pic':>6} {'picture':>8} {'shown':>6} "
          f"{'natural':>7}  fits")
    for notebook, names, fit in fits:
        for name, box in zip(names, fit["boxes"]):
            fits_ = "yes" if box["height"] <= fit["visible"] else \
                "controls+picture only" if box["toPicture"] <= fit["visible"] else "NO"
            print(f"{notebook[:28]:<28} {name:<27} {fit['visible']:>7.0f} {box['height']:>6.0f} "
                  f"{box['toPicture']:>6.0f} {box['picture']:>8.0f} {box['width']:>6.0f} {box['natural']:>7}  {fits_}")
    print("(box: the explorer's whole box; to pic: from its top to the picture's bottom; shown/natural: "
          "the picture's width on the page / in pixels)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebook names (default: every notebook with an explorer)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the checkout whose notebooks and attn_helpers are measured (default: this one)")
    parser.add_argument("--moves", type=int, default=MOVES, help=f"moves per control (default {MOVES})")
    parser.add_argument("--density", type=int, default=None,
                        help="pixels rendered per CSS pixel (Explorer.pixel_density; default: the checkout's own)")
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium found: set CHROMIUM or install Debian's chromium", file=sys.stderr)
        return 2
    root = args.root.resolve()
    every = sorted(p for p in (root / "notebooks").glob("*.ipynb") if not p.name.startswith("99_"))
    wanted = {Path(n).name for n in args.notebooks}
    paths = [p for p in every if (not wanted or p.name in wanted) and widget_outputs(p)]
    missing = wanted - {p.name for p in paths}
    if missing:
        print(f"no explorer in (or no such notebook): {sorted(missing)}", file=sys.stderr)
        return 2
    shown_density = f"{args.density}x" if args.density else "the checkout's own density"
    print(f"measuring {root} ({len(paths)} notebooks, pictures at {shown_density}); load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print_header(args.moves)
    rows, fits = [], []
    with with_tempdir() as tmp, LatencyServer(Path(tmp), root) as server:
        browser = Browser(chromium, width=WIDTH, height=HEIGHT)
        try:
            for path in paths:
                lesson = LessonPage(server, browser, path)
                try:
                    found, fit = measure_notebook(lesson, args.moves, args.density)
                    rows += found
                    fits.append((path.name, [e.class_name for e in lesson.explorers()], fit))
                finally:
                    lesson.close()
        finally:
            browser.close()
    print_verdicts(rows)
    print(f"load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print_fits(fits)
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s in all)")
    sys.exit(code)
