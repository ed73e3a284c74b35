"""Notebook 7 (``jupyter notebook``) in headless Chromium: the machinery of ``tests/notebooks/test_notebook7.py``.

Notebook 7 is JupyterLab's components in a one-document page, so most of :mod:`tools.browser_support` applies
(:class:`~tools.browser_support.JupyterServer`, :class:`~tools.browser_support.LessonPage`'s Run All and its
checks, :class:`~tools.browser_support.ExplorerView`); what differs is the command, the notebook's address,
how the page says its kernel is ready, and the keyboard.

**The arrow keys.** Notebook 7 starts its application without ``bubblingKeydown`` (its ``app/index.template.js``
calls ``app.start()``; JupyterLab 4's passes ``bubblingKeydown: true``), so Lumino reads every key press on the
document in the capture phase, before the page element that has focus. In command mode, JupyterLab's notebook
shortcuts bind ArrowUp/ArrowDown (move to the cell above/below) and ArrowLeft/ArrowRight (move to the heading
above/below) with the selector ``.jp-Notebook.jp-mod-commandMode:not(.jp-mod-readWrite) :focus``, which a focused
slider handle matches: the shortcut runs, stops the event, and the slider never sees it (focus moves to a cell and
the notebook scrolls). In JupyterLab the handle handles the key first and marks it handled, and Lumino then skips
it. Reported upstream for another widget as jupyter/notebook#7716 (open). Keys no notebook shortcut binds
(Home, End, Page Up, Page Down) reach the handle; a number slider's readout takes a typed value (it is editable,
and the notebook leaves editable elements alone); dragging works.

Measured: with ``data-lm-suppress-shortcuts`` on the handle itself, Lumino skips the shortcuts and the arrow keys
move the slider in Notebook 7; on the explorer's box it changes nothing (Lumino looks for the attribute only
above the element the selector matched, and the selector matches the focused handle). The explorers are
ipywidgets in Python, with no front-end code of their own that could set it, so the lessons cannot work around
it; lesson 00 tells learners which keys work there instead.

**The 'schema' error on load** (``TypeError: Cannot read properties of undefined (reading 'schema')``): thrown in
JupyterLab's shortcuts extension as Notebook 7 bundles it. Its ``pluginChanged`` listener resets the defaults of
its own settings (``registry.plugins['@jupyterlab/shortcuts-extension:shortcuts'].schema``) when another
plugin's settings load; in Notebook 7 ``@jupyterlab/docmanager-extension:plugin`` loads before the shortcuts
plugin's own settings exist, so that lookup is undefined. Measured: afterwards every shortcut that the loaded
plugins declare is bound, and the page shows nothing; the error is in the browser console only.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tools.browser_support import (
    HIGH_DENSITY,
    NAVIGATION_TIMEOUT_MS,
    NOTEBOOKS_DIR,
    SCREENSHOT_DIR,
    Browser,
    ExplorerView,
    JupyterServer,
    LessonPage,
    State,
    pictures,
)

# The lessons run in Notebook 7: 00 (the heads explorer, a selection slider and number sliders; the lesson that
# tells learners how to move a slider) and 01 (the projection explorer, number sliders and impossible combinations).
NOTEBOOK7_LESSONS = ("00_orientation.ipynb", "01_qkv_projection.ipynb")

# What the browser console may show while a lesson opens, each with why it is harmless.
KNOWN_LOAD_ERRORS = {
    "Cannot read properties of undefined (reading 'schema')":
        "JupyterLab's shortcuts extension in Notebook 7 (see this module's notes): every shortcut is bound afterwards",
}
# Keys that a notebook shortcut binds in command mode (JupyterLab's notebook-extension tracker.json), and keys
# that none binds: Notebook 7 gives the first to the notebook, the second reach a focused slider handle.
NOTEBOOK_ARROW_KEYS = ("ArrowRight", "ArrowLeft")
HANDLE_KEYS = ("End", "Home", "PageUp", "PageDown")
# A key as an explorer's caption names it (attn_helpers/widgets/_base.py's KEYS_CAPTION), and as Playwright presses it.
CAPTION_KEYS = {"End": "End", "Home": "Home", "Page Up": "PageUp", "Page Down": "PageDown"}


def keys_named(caption: str) -> tuple[str, ...]:
    """The keys a caption tells learners to press on a slider's handle, as Playwright names them (in HANDLE_KEYS'
    order, the order that moves a slider from anywhere: to the far end, back, then up and down)."""
    named = {CAPTION_KEYS[word] for word in CAPTION_KEYS if re.search(rf"\b{word}\b", caption)}
    return tuple(key for key in HANDLE_KEYS if key in named) + tuple(sorted(named - set(HANDLE_KEYS)))


# The caption above an explorer's status line (empty for an explorer without a slider).
CAPTION_JS = """box => {
    const children = [...box.children];
    const status = children.findIndex(c => c.querySelector('code.explorer-status'));
    const before = children.slice(0, status).filter(c => c.classList.contains('widget-html'));
    return before.length ? before[before.length - 1].textContent.trim() : '';
}"""


def notebook7_missing_reason() -> str | None:
    """Why Notebook 7 cannot be started from this environment, or None."""
    try:
        import notebook
    except ImportError:
        return "the notebook package (Notebook 7) is not installed: pip install -r requirements-test.txt"
    if not notebook.__version__.startswith("7."):
        return f"notebook {notebook.__version__} is installed, not Notebook 7"
    return None


class Notebook7Server(JupyterServer):
    """``jupyter notebook`` (Notebook 7) from this environment; otherwise like :class:`JupyterServer`."""

    def command(self) -> list[str]:
        """JupyterLab's command with ``notebook`` for ``lab``, without the options of JupyterLab's own app."""
        jupyter, app, *options = super().command()
        assert app == "lab", app
        return [jupyter, "notebook", *(option for option in options if not option.startswith("--LabApp."))]

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/notebooks/{name}?token={self.token}"


class Notebook7Page(LessonPage):
    """A lesson in Notebook 7: its own address and kernel indicator; Run All and the checks are JupyterLab's.

    Everything the page logs from the moment it starts loading is kept: :attr:`load_errors` is what it had
    logged when the kernel was first idle, before anything ran.
    """

    def __init__(self, server: Notebook7Server, browser: Browser, path: Path) -> None:
        super().__init__(server, browser, path)
        self.failed_requests: list[str] = []
        self.page.on("requestfailed", lambda request: self.failed_requests.append(request.url))
        self.load_errors: list[str] = []

    def open(self) -> None:
        self.page.bring_to_front()
        self.page.goto(self.server.notebook_url(self.name), wait_until="domcontentloaded",
                       timeout=NAVIGATION_TIMEOUT_MS)
        self.page.wait_for_function(
            "n => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length >= n",
            arg=self.committed.n_cells, timeout=60_000, polling=100)
        assert self.notebook.locator(".jp-Cell").count() == self.committed.n_cells
        self.wait_kernel_ready()
        self.load_errors = list(self.console_errors)

    def wait_kernel_ready(self, timeout: float = 60.0) -> None:
        """Notebook 7 has no status bar: wait for the server's kernel to be idle, then for the page to be connected
        to it (the top bar's kernel logo is drawn once the page's session is ready) and the toolbar's indicator."""
        deadline = time.monotonic() + timeout
        while True:
            sessions = self.server.sessions_for(self.name)
            if sessions and (sessions[0].get("kernel") or {}).get("execution_state") == "idle":
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no idle kernel {timeout:.0f} s after opening ({sessions})")
            time.sleep(0.2)
        self.page.wait_for_selector(".jp-NotebookKernelLogo img[src]", state="attached", timeout=timeout * 1000)
        self.page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout * 1000)

    def unexplained_load_errors(self) -> list[str]:
        """Console errors on load that are neither known (:data:`KNOWN_LOAD_ERRORS`) nor this offline machine
        failing to fetch a picture from another site (the lessons' Colab badge): as many "Failed to load
        resource" lines pass as requests to other sites failed, none if a request to the server failed."""
        local = [url for url in self.failed_requests if url.startswith(self.server.url)]
        remote = 0 if local else len(self.failed_requests)
        found = []
        for line in self.load_errors:
            if any(known in line for known in KNOWN_LOAD_ERRORS):
                continue
            if "Failed to load resource" in line and remote:
                remote -= 1
                continue
            found.append(line)
        return found + [f"request failed: {url}" for url in local]


@dataclass
class KeyTry:
    """One key pressed on a focused slider handle, and what it did."""

    key: str
    moved: bool
    status: str
    focus_after: str  # the class of the element with focus afterwards


@dataclass
class Notebook7Observation:
    """What one lesson showed in Notebook 7 and how its first explorer answered the mouse and the keyboard."""

    name: str
    load_errors: list[str] = field(default_factory=list)
    unexplained_load_errors: list[str] = field(default_factory=list)
    run_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # errors, stderr, widgets that failed to render
    unexecuted: list[str] = field(default_factory=list)
    explorers: list[State] = field(default_factory=list)
    committed_explorers: list[str] = field(default_factory=list)
    mouse: list[str] = field(default_factory=list)  # status lines after each drag, checked by ExplorerView
    keyboard: list[str] = field(default_factory=list)  # status lines after each key, checked by ExplorerView
    key_moves: list[tuple[str, str, str, str]] = field(default_factory=list)  # (slider, key, readout before, after)
    readout: list[str] = field(default_factory=list)  # status line after typing into a number slider's readout
    arrow_keys: list[KeyTry] = field(default_factory=list)
    pictures: list[dict] = field(default_factory=list)  # every figure and explorer picture (browser_support.pictures)
    device_scale: float = 0.0  # the page's devicePixelRatio
    captions: list[str] = field(default_factory=list)  # each explorer's caption, in order
    sliders: list[int] = field(default_factory=list)  # each explorer's number of sliders
    caption_moves: list[list[tuple[str, str, str, str]]] = field(default_factory=list)  # each explorer's key_moves
    problems_after: list[str] = field(default_factory=list)
    failed_step: str | None = None  # the step of observe_lesson that failed ("opening", "Run All", ...)
    error: str | None = None  # its message (an AssertionError of ExplorerView), or a traceback


def drive_by_mouse(explorer: ExplorerView, log: list[str]) -> None:
    """Drag the handle of every slider (``ExplorerView.drag_move``), each change checked.

    Run after :func:`drive_by_keyboard`: the drag's length is taken from the first key's move (End's, most of the
    track), so every drag moves its slider, from the minimum where Page Down left it.
    """
    for control in explorer.controls():
        if control.kind == "slider":
            start = len(explorer.steps)
            explorer.drag_move(control)
            log += explorer.steps[start:]


def drive_by_keyboard(explorer: ExplorerView, log: list[str], moves: list[tuple[str, str, str, str]],
                      keys: tuple[str, ...] = HANDLE_KEYS) -> None:
    """On every slider: click its handle and press each key (End, Home, Page Up, Page Down) that is not at the
    end it moves to; each press must move the slider, then the status line and the picture must follow."""
    for control in explorer.controls():
        if control.kind != "slider":
            continue
        for key in keys:
            info = explorer.slider_info(control)
            towards_max = key in ("End", "PageUp", "ArrowRight")
            if (towards_max and info["pos"] >= info["max"]) or (not towards_max and info["pos"] <= info["min"]):
                continue
            before = explorer.state()
            explorer.handle(control).click()
            moved = explorer.press(control, key)
            now = explorer.check_change(control.name, before, moved["readout"], f"{key} on {control.name}")
            log.append(f"{key} on {control.name}: {now.status}")
            moves.append((control.name, key, info["readout"], moved["readout"]))


def try_arrow_keys(explorer: ExplorerView, keys: tuple[str, ...] = NOTEBOOK_ARROW_KEYS) -> list[KeyTry]:
    """Click the first slider's handle and press each arrow key; record whether the slider moved, and where the
    focus went (the page is scrolled back to the explorer after each)."""
    control = next(c for c in explorer.controls() if c.kind == "slider")
    tries = []
    for key in keys:
        explorer.box.scroll_into_view_if_needed()
        before = explorer.slider_info(control)
        explorer.handle(control).click()
        explorer.page.keyboard.press(key)
        # the handle moves in the page, before any kernel answers: 0.6 s is ample for a key the slider got
        explorer.page.wait_for_timeout(600)
        after = explorer.slider_info(control)
        focus = explorer.page.evaluate("() => document.activeElement ? document.activeElement.className : ''")
        tries.append(KeyTry(key, after["pos"] != before["pos"] or after["readout"] != before["readout"],
                            explorer.state().status, str(focus)))
        if tries[-1].moved:  # the key worked after all: put the slider back where it was
            explorer.set_slider(control.name, before)
    explorer.box.scroll_into_view_if_needed()
    return tries


def type_into_readout(explorer: ExplorerView, log: list[str]) -> None:
    """Type a new value into the first number slider's readout and press Enter; the status line must show it."""
    for control in explorer.controls():
        if control.kind != "slider":
            continue
        readout = control.locator.locator(".widget-readout").first
        info = explorer.slider_info(control)
        if readout.get_attribute("contenteditable") != "true" or abs(info["pos"] - info["now"]) > 0.051:
            continue  # a selection slider (its position is an index, not its value) does not take typed values
        text = f"{info['max'] if info['now'] < info['max'] else info['min']:g}"  # the far end: a change
        before = explorer.state()
        readout.click(click_count=3)  # selects the value
        explorer.page.keyboard.type(text)
        explorer.page.keyboard.press("Enter")
        now = explorer.check_change(control.name, before, text, f"typed {text} into {control.name}'s readout")
        log.append(f"typed {text} into {control.name}: {now.status}")
        return
    raise AssertionError(f"{explorer.label}: no number slider whose readout takes a typed value")


def observe_lesson(page: Notebook7Page) -> Notebook7Observation:
    """Open a lesson, record the console on load, Run All, check the outputs, then drive its first explorer:
    arrow keys (what they do in Notebook 7), the keys a handle gets, a typed value, and the mouse."""
    seen = Notebook7Observation(page.name, committed_explorers=list(page.committed.explorers))
    step = "opening"
    try:
        page.open()
        seen.load_errors = list(page.load_errors)
        seen.unexplained_load_errors = page.unexplained_load_errors()
        step = "Run All"
        seen.run_seconds = page.run_all()
        page.wait_rendered()
        seen.problems, seen.unexecuted = page.problems(), page.unexecuted_cells()
        explorers = page.explorers()
        seen.explorers = [explorer.state() for explorer in explorers]
        step = "pictures"
        seen.device_scale = page.page.evaluate("() => window.devicePixelRatio")
        seen.pictures = pictures(page.page)
        step = "captions"
        seen.captions = [explorer.box.evaluate(CAPTION_JS) for explorer in explorers]
        seen.sliders = [sum(c.kind == "slider" for c in explorer.controls()) for explorer in explorers]
        if explorers:
            explorer = explorers[0]
            explorer.box.scroll_into_view_if_needed()
            explorer.last_valid = explorer.state()
            step = "arrow keys"
            seen.arrow_keys = try_arrow_keys(explorer)
            step = "Home, End, Page Up and Page Down"
            drive_by_keyboard(explorer, seen.keyboard, seen.key_moves, keys_named(seen.captions[0]))
            seen.caption_moves.append(seen.key_moves)
            step = "typing into a readout"
            type_into_readout(explorer, seen.readout)
            step = "dragging"
            drive_by_mouse(explorer, seen.mouse)
        step = "the other explorers' keys"
        for explorer, caption in zip(explorers[1:], seen.captions[1:]):
            explorer.box.scroll_into_view_if_needed()
            explorer.last_valid = explorer.state()
            seen.caption_moves.append([])
            drive_by_keyboard(explorer, seen.keyboard, seen.caption_moves[-1], keys_named(caption))
        seen.problems_after = page.problems()
    except AssertionError as failure:
        seen.failed_step, seen.error = step, f"{step}: {failure}"
    except Exception:  # noqa: BLE001 - reported by the tests, with where it happened
        seen.failed_step, seen.error = step, f"{step}: {traceback.format_exc()}"
    return seen


def run_notebook7(chromium: str, names: tuple[str, ...] = NOTEBOOK7_LESSONS,
                  screenshots: Path | None = SCREENSHOT_DIR,
                  observe: Callable[[Notebook7Page], Notebook7Observation] = observe_lesson,
                  device_scale: float = HIGH_DENSITY) -> dict[str, Notebook7Observation]:
    """Each lesson in ``names`` in Notebook 7 (one server, one Chromium at 1366 x 768 CSS px and ``device_scale``
    device pixels per CSS pixel, a page at a time).

    Serves a temporary copy of just those notebooks. Never raises for one lesson: what failed is in its
    observation. A picture of each lesson's first explorer (and of the page where a step failed) goes to
    ``screenshots``.
    """
    results: dict[str, Notebook7Observation] = {}
    with contextlib.ExitStack() as cleanup:
        folder = Path(tempfile.mkdtemp(prefix="attn-nb7-"))
        cleanup.callback(shutil.rmtree, folder, ignore_errors=True)
        (folder / "source").mkdir()
        for name in names:
            shutil.copy2(NOTEBOOKS_DIR / name, folder / "source" / name)
        server = cleanup.enter_context(Notebook7Server(folder, source=folder / "source", threads=1))
        browser = Browser(chromium, width=1366, height=768, device_scale=device_scale)
        cleanup.callback(browser.close)
        for name in names:
            page = Notebook7Page(server, browser, NOTEBOOKS_DIR / name)
            try:
                results[name] = observe(page)
                if screenshots is not None:
                    take_pictures(page, results[name], screenshots)
            finally:
                page.close()
    return results


def take_pictures(page: Notebook7Page, seen: Notebook7Observation, folder: Path) -> None:
    """The lesson's first explorer, and the page if a step failed; failing to take them hides nothing.

    Named ``notebook7__<lesson>...``: the JupyterLab run clears ``<lesson>__*`` when it starts a lesson.
    """
    stem = f"notebook7__{Path(page.name).stem}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        explorers = page.explorers()
        if explorers:
            explorers[0].box.screenshot(path=str(folder / f"{stem}_explorer0.png"))
        if seen.error:
            page.page.screenshot(path=str(folder / f"{stem}_failed.png"))
    except Exception:  # noqa: BLE001 - the pictures are diagnostics; the observation stands
        pass


def lesson_text(name: str) -> str:
    """A lesson's markdown, one string (for checking what it tells learners)."""
    import nbformat

    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
