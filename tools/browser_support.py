"""Real JupyterLab in headless Chromium, driven like a learner would: the browser tests' machinery.

Used by ``tests/notebooks/test_browser.py`` (fixtures, imported there), ``scripts/readme_screenshots.py`` and
``benchmarks/browser_latency.py`` (the plain classes). Nothing here starts at import time.

* :func:`find_chromium` — the browser: env ``CHROMIUM`` (may be empty), else
  ``/usr/bin/chromium-headless-shell`` or ``/usr/bin/chromium``, else either on ``PATH``. Never downloads one.
* :class:`JupyterServer` — ``jupyter lab`` of *this* environment on ``127.0.0.1`` and a free port,
  a random token, serving a temporary copy of ``notebooks/`` with every Jupyter/IPython/matplotlib
  setting under a temporary home; stopped by its own PID.
* :class:`Browser` — Playwright driving the system Chromium with flags that work offline and as root.
* :class:`LessonPage` — one notebook open in JupyterLab: Run All, wait until every code cell has run,
  find the output problems, the static figures and the explorers.
* :func:`open_and_close_untouched` — every notebook opened from the file browser, left until its kernel
  is idle, closed: was it marked changed, did closing ask to save, did (a shortened) autosave rewrite it.
* :class:`ExplorerView` — one ``Explorer`` on the page (its VBox): its controls in order, its status
  line parsed into ``name=value`` pairs, its image; move a slider by keyboard or mouse, pick a
  dropdown option, click a toggle, and wait for the status line to show the new value.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SCREENSHOT_DIR = REPO_ROOT / "build" / "screenshots"
# Pictures of the whole notebook: on failure only, unless ATTN_SCREENSHOTS=all asks for every one.
# A whole-notebook picture makes Chromium lay out and paint the notebook at up to 1366 x 16000 px
# and encode it: about 3 CPU-seconds each, measured, three per notebook when always taken, on a
# 2-core machine that the suite keeps busy. The explorers' own pictures (small) are always taken.
ALL_SCREENSHOTS = os.environ.get("ATTN_SCREENSHOTS", "").lower() == "all"

# Flags measured to work for Debian's Chromium as root, offline (see the engineering notes).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Variables that leak from the shell into a kernel and change what a notebook shows, or point
# Jupyter at settings outside the temporary home.
LEAKY_ENV_VARS = ("MPLBACKEND", "PYTHONWARNINGS", "PYTEST_ADDOPTS", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH",
                  "JUPYTER_PREFER_ENV_PATH", "JUPYTER_PLATFORM_DIRS")
# JupyterLab settings: the learner's own, except the news question. The notebook keeps JupyterLab's
# default windowing ("contentVisibility", as learners have it): every cell is in the DOM, so it can be
# counted, and the browser skips painting the cells off screen.
LAB_USER_SETTINGS = {
    # What `make lab` sets for learners (an override): never fetch news, so the question is not asked.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}

SERVER_START_TIMEOUT = 180.0  # a server the whole suite keeps waiting for CPU can take minutes to answer
RUN_ALL_TIMEOUT = 300.0  # one notebook's Run All, kernel start included (budget: 20 s per notebook, 60 s for lesson 14, which trains; more under a loaded CI)
WIDGET_TIMEOUT = 15.0  # one control change until the status line shows it
# A page's first load: a full CI run (load about 14 on 2 cores) once missed 30 s for the classic Notebook's first page
NAVIGATION_TIMEOUT_MS = 120_000

STATUS = "code.explorer-status"
# An explorer's VBox: the box whose own child is the status line's HTML widget.
EXPLORER_BOX = ".widget-vbox:has(> .widget-html code.explorer-status)"
# Outputs a learner must never see: tracebacks, stderr, a widget that failed to render.
PROBLEM_OUTPUTS = ('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], '
                   '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"], '
                   '.jp-OutputArea-output.jp-mod-error')
WIDGET_FAILURES = ("Error displaying widget", "Model not found", "Failed to load model class",
                   "Error creating view", "Error rendering widget",
                   "Click to show javascript error")  # JupyterLab's placeholder when a renderer threw
# Static figures, as opposed to the explorers' ipywidgets Images: an image/png output, or a figure shown as one
# HTML <img> holding its PNG (attn_helpers/views/display.py: sharp at 2x, with its description in alt).
STATIC_PNG = ('.jp-OutputArea-output[data-mime-type="image/png"] img, '
              '.jp-OutputArea-output[data-mime-type="text/html"] img[src^="data:image/png"]')
FIGURE_HTML = re.compile(r'\s*<img src="data:image/png;base64,')


# The learner's screen the browser tests use: a common laptop's 1366 x 768 (issue 31), JupyterLab's default layout.
LAPTOP_WIDTH, LAPTOP_HEIGHT = 1366, 768

# Resolves after the browser has laid out and painted twice (e.g. after a viewport resize).
NEXT_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 50))))"


# -- a high-density screen ------------------------------------------------------------------------
# Most current laptops show 2 device pixels per CSS pixel. A page already open is switched to that density in place
# (Chrome's DevTools Emulation.setDeviceMetricsOverride, the call Playwright's device_scale_factor makes), so a
# lesson run once at scale 1 is checked again at scale 2 without a second Run All.
HIGH_DENSITY = 2


_SCALE_SESSIONS: dict[int, Any] = {}  # page -> the DevTools session that holds its override (detached, it ends)


def set_device_scale(page: Any, factor: float) -> float:
    """Show ``page`` at ``factor`` device pixels per CSS pixel (its viewport's CSS size kept); 1 gives the page back
    to its context's own scale. Returns the page's ``window.devicePixelRatio`` once it has laid out again."""
    session = _SCALE_SESSIONS.pop(id(page), None)
    if session is not None:
        session.detach()  # the override lasts as long as the session that set it
    if factor != 1:
        size = page.viewport_size or {"width": LAPTOP_WIDTH, "height": LAPTOP_HEIGHT}
        session = page.context.new_cdp_session(page)
        session.send("Emulation.setDeviceMetricsOverride", {"width": size["width"], "height": size["height"],
                                                            "deviceScaleFactor": factor, "mobile": False})
        _SCALE_SESSIONS[id(page)] = session
    page.evaluate(NEXT_FRAMES_JS)
    return page.evaluate("() => window.devicePixelRatio")


def device_screenshot(page: Any, path: Path) -> Path:
    """The page's viewport as the screen shows it: at device scale 2, twice its CSS size in pixels (Playwright's own
    screenshot knows only its context's scale)."""
    import base64

    session = _SCALE_SESSIONS.get(id(page))
    path.parent.mkdir(parents=True, exist_ok=True)
    if session is None:
        page.screenshot(path=str(path))
    else:
        path.write_bytes(base64.b64decode(session.send("Page.captureScreenshot", {"format": "png"})["data"]))
    return path


# Every static figure and every explorer's picture of the visible notebook, each scrolled into view and decoded:
# its pixels, the CSS width it is shown at, and what describes it (a figure's alt; an explorer's "The picture in
# words" fold, the <details> under its picture: an ipywidgets Image has no alt).
PICTURES_JS = r"""async ([staticSel, boxSel]) => {
    const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
    const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const rows = [];
    const measure = async (img, kind, description) => {
        img.scrollIntoView({block: 'center'});
        await frames();
        if (!img.complete) await img.decode().catch(() => null);
        rows.push({kind, naturalWidth: img.naturalWidth, shownWidth: img.getBoundingClientRect().width,
                   hidden: getComputedStyle(img).visibility === 'hidden', description: (description || '').trim()});
    };
    for (const img of nb.querySelectorAll(staticSel)) await measure(img, 'figure', img.getAttribute('alt'));
    for (const box of nb.querySelectorAll(boxSel)) {
        const img = box.querySelector(':scope > img.widget-image');
        const words = box.querySelector(':scope > .widget-html details');
        const said = words ? words.textContent.replace(words.querySelector('summary')?.textContent || '', '') : '';
        if (img) await measure(img, 'explorer', said);
    }
    return rows;
}"""


def pictures(page: Any) -> list[dict[str, Any]]:
    """Every picture of the notebook open on ``page`` (JupyterLab or Notebook 7), as :data:`PICTURES_JS` finds it."""
    return page.evaluate(PICTURES_JS, [STATIC_PNG, EXPLORER_BOX])


def picture_problems(rows: list[dict[str, Any]], density: float = HIGH_DENSITY) -> list[str]:
    """What a learner at ``density`` device pixels per CSS pixel would miss: a picture with fewer pixels than its shown
    width needs (the browser enlarges it, and its text blurs), or one without a description."""
    problems = []
    for i, row in enumerate(rows):
        label = f"{row['kind']} {sum(r['kind'] == row['kind'] for r in rows[:i])}"
        if row["hidden"]:
            continue
        if row["naturalWidth"] < density * row["shownWidth"] - 1:
            problems.append(f"{label}: {row['naturalWidth']} px shown {row['shownWidth']:.0f} CSS px wide, "
                            f"fewer than {density:g} per CSS px")
        description = (row["description"] or "").strip()
        if not description or description.startswith("A figure without a description"):
            problems.append(f"{label}: no description ({description!r})")
    return problems


# -- JupyterLab's themes -----------------------------------------------------------------------------
LIGHT_THEME, DARK_THEME = "JupyterLab Light", "JupyterLab Dark"


def set_theme(page: Any, name: str, timeout: float = 15.0) -> None:
    """Choose JupyterLab's theme as a learner does, from the Settings menu's Theme submenu; wait until the page
    wears it (``<body data-jp-theme-name>``) and has painted. JupyterLab keeps the choice in the server's user
    settings: every page opened later wears it too."""
    if page.evaluate("() => document.body.dataset.jpThemeName") == name:
        return
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=name).first.click()
    page.wait_for_function("name => document.body.dataset.jpThemeName === name", arg=name, timeout=timeout * 1000)
    page.keyboard.press("Escape")
    page.evaluate(NEXT_FRAMES_JS)


# Each picture's least opaque pixel (255 everywhere: drawn on its own background, not the page's), and each text the
# explorers write in HTML (status line, caption, "The picture in words", shape table, and the status line as a state
# that cannot be drawn shows it, ``problemStyle``) with its colour and the colour behind it, both composited as the
# page paints them: semi-transparent backgrounds up the tree over the first opaque one.
THEME_JS = r"""async ([staticSel, boxSel, problemStyle]) => {
    const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
    const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const rgba = css => {
        const m = css.match(/rgba?\(([^)]*)\)/);
        if (!m) return [0, 0, 0, 0];
        const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
        return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const blend = (top, under) => [0, 1, 2].map(i => top[3] * top[i] + (1 - top[3]) * under[i]).concat([1]);
    const behind = el => {
        const layers = [];
        for (let e = el; e; e = e.parentElement) {
            const c = rgba(getComputedStyle(e).backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let colour = [255, 255, 255, 1];  // the browser's canvas under everything
        for (const layer of layers.reverse()) colour = blend(layer, colour);
        return colour;
    };
    const pictures = [];
    const imgs = [...nb.querySelectorAll(staticSel)].map(img => ['figure', img]).concat(
        [...nb.querySelectorAll(boxSel)].map(box => ['explorer', box.querySelector(':scope > img.widget-image')]));
    for (const [kind, img] of imgs) {
        if (!img) continue;
        img.scrollIntoView({block: 'center'});
        await frames();
        if (!img.complete) await img.decode().catch(() => null);
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const ctx = canvas.getContext('2d', {willReadFrequently: true});
        ctx.drawImage(img, 0, 0);
        const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        let least = 255, transparent = 0;
        for (let i = 3; i < data.length; i += 4) { if (data[i] < least) least = data[i]; if (data[i] < 255) transparent++; }
        pictures.push({kind, width: img.naturalWidth, least, transparent});
    }
    const texts = [];
    const boxes = [...nb.querySelectorAll(boxSel)];
    boxes.forEach((box, b) => {
        const status = box.querySelector(':scope > .widget-html code.explorer-status');
        let planted = null;
        if (status) {  // the same line as an impossible state shows it, beside the real one
            planted = status.cloneNode(true);
            planted.setAttribute('style', problemStyle);
            planted.className = 'explorer-status explorer-problem';
            planted.textContent = 'not possible: a state shown for this check';
            status.parentElement.appendChild(planted);
        }
        for (const html of box.querySelectorAll(':scope > .widget-html')) {
            for (const el of html.querySelectorAll('*')) {
                if (['STYLE', 'SCRIPT'].includes(el.tagName)) continue;
                const own = [...el.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim()).map(n => n.textContent.trim()).join(' ');
                if (!own) continue;
                const style = getComputedStyle(el);
                const bar = el === planted ? rgba(style.borderLeftColor) : null;
                texts.push({explorer: b, tag: el.tagName.toLowerCase(), cls: el.className, text: own.slice(0, 60),
                            colour: rgba(style.color), background: behind(el), bar});
            }
        }
        if (planted) planted.remove();
    });
    return {theme: document.body.dataset.jpThemeName, pictures, texts};
}"""


def luminance(rgb: Any) -> float:
    """WCAG 2.x relative luminance of an sRGB colour (r, g, b in 0..255)."""
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(colour: Any, background: Any) -> float:
    """WCAG contrast ratio of ``colour`` (r, g, b, alpha) painted over the opaque ``background`` (r, g, b, ...)."""
    alpha = colour[3] if len(colour) > 3 else 1.0
    painted = [alpha * f + (1 - alpha) * b for f, b in zip(colour[:3], background[:3])]
    lighter, darker = sorted((luminance(painted), luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def theme_problems(found: dict[str, Any], text_ratio: float = 4.5, mark_ratio: float = 3.0) -> list[str]:
    """What :data:`THEME_JS` found that a learner could not read: a picture not opaque, a text under ``text_ratio``
    (WCAG 1.4.3), the problem state's bar under ``mark_ratio`` (WCAG 1.4.11, a mark beside text)."""
    problems = [f"{p['kind']} {i} ({p['width']} px): {p['transparent']} pixels not opaque (least alpha {p['least']}): "
                f"its background would be the page's" for i, p in enumerate(found["pictures"]) if p["least"] < 255]
    for t in found["texts"]:
        ratio = contrast_ratio(t["colour"], t["background"])
        if ratio < text_ratio:
            problems.append(f"explorer {t['explorer']} <{t['tag']} class={t['cls']!r}> {t['text']!r}: colour "
                            f"{t['colour']} on {t['background']}: {ratio:.1f}:1")
        if t["bar"] is not None and contrast_ratio(t["bar"], t["background"]) < mark_ratio:
            problems.append(f"explorer {t['explorer']}: the problem bar {t['bar']} on {t['background']}: "
                            f"{contrast_ratio(t['bar'], t['background']):.1f}:1")
    return problems


# -- what is being tested ------------------------------------------------------------------------
def lesson_notebooks() -> list[Path]:
    """The series' notebooks, in order; scratch files (``99_*``) are not part of it."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("*.ipynb") if not p.name.startswith("99_"))


def explorer_class_names() -> set[str]:
    """Names of every ``Explorer`` subclass the helper package exports."""
    from attn_helpers import widgets

    return {name for name in dir(widgets)
            if isinstance(getattr(widgets, name), type) and issubclass(getattr(widgets, name), widgets.Explorer)}


def widget_outputs(path: Path) -> list[str]:
    """Class names of the displayed widgets in a committed notebook (cheap: no helper import).

    An explorer's output carries a widget view and a text/plain ``ClassName(name=value ...)``.
    """
    names = []
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            match = re.match(r"([A-Za-z_]\w*)\(", text)
            if "application/vnd.jupyter.widget-view+json" in data and match:
                names.append(match.group(1))
    return names


@dataclass
class CommittedNotebook:
    """What the committed notebook's outputs promise a learner will see after Run All."""

    path: Path
    n_cells: int
    n_code_cells: int
    n_static_png: int
    explorers: list[str] = field(default_factory=list)  # class names, in order of appearance
    n_outputs: int = 0  # 0: committed without outputs, nothing to compare with

    @classmethod
    def read(cls, path: Path) -> CommittedNotebook:
        nb = nbformat.read(path, as_version=4)
        known = explorer_class_names()
        pngs, explorers, outputs = 0, [], 0
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                outputs += 1
                data = output.get("data", {})
                # A static figure; an explorer's output also carries a picture (for front ends without a
                # kernel), but after Run All JupyterLab shows its live widget instead.
                html = data.get("text/html", "")
                html = "".join(html) if isinstance(html, list) else html
                if "application/vnd.jupyter.widget-view+json" not in data and (
                        "image/png" in data or FIGURE_HTML.match(html)):
                    pngs += 1
                text = data.get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                match = re.match(r"([A-Za-z_]\w*)\(", text)
                if "application/vnd.jupyter.widget-view+json" in data and match and match.group(1) in known:
                    explorers.append(match.group(1))
        return cls(path, len(nb.cells), sum(c.cell_type == "code" for c in nb.cells), pngs, explorers, outputs)


# -- the browser ---------------------------------------------------------------------------------
# Debian's chromium-headless-shell first: the same Blink engine without the browser's own user
# interface (no window, no renderer for Chromium's own pages), the headless build Playwright itself
# uses. Measured on the JupyterLab half of the browser tests, idle 2-core machine: Chromium 247 -> 202
# CPU-s, the run 265 -> 228 s. The full browser works as well.
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium")


def find_chromium() -> str | None:
    """The Chromium to drive: ``$CHROMIUM`` if set and non-empty, else the system one, else None."""
    configured = os.environ.get("CHROMIUM", "").strip()
    if configured:
        return configured if Path(configured).exists() or shutil.which(configured) else None
    for name in CHROMIUM_NAMES:
        if Path("/usr/bin", name).exists():
            return f"/usr/bin/{name}"
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


def chromium_missing_reason() -> str:
    return ("no Chromium found (set CHROMIUM or install Debian's headless Chromium: "
            "apt-get install chromium-headless-shell)"
            + (f"; CHROMIUM={os.environ['CHROMIUM']!r} does not exist" if os.environ.get("CHROMIUM", "").strip() else ""))


def require_chromium() -> str:
    """The Chromium path, or skip the test (fail instead on CI, where a missing browser is a bug)."""
    path = find_chromium()
    if path is None:
        reason = chromium_missing_reason()
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests need Chromium on CI: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


class Browser:
    """Playwright's sync API driving the system Chromium (one process, pages opened on demand)."""

    def __init__(self, executable: str, *, width: int = LAPTOP_WIDTH, height: int = LAPTOP_HEIGHT,
                 device_scale: float = 1) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(executable_path=executable, headless=True,
                                                            args=CHROMIUM_ARGS)
            self.context = self.browser.new_context(viewport={"width": width, "height": height},
                                                    device_scale_factor=device_scale)
        except BaseException:
            self._playwright.stop()
            raise

    def close(self) -> None:
        try:
            self.context.close()
            self.browser.close()
        finally:
            self._playwright.stop()


# -- the server ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """``jupyter lab`` from this environment, on a temporary copy of ``source`` with a temporary home.

    Use as a context manager, or call :meth:`start` and (always) :meth:`stop`.
    """

    def __init__(self, base: Path, source: Path = NOTEBOOKS_DIR,
                 kernels: Callable[[Path], Any] | None = None, threads: int | None = None,
                 settings: dict[str, dict[str, Any]] | None = None, kernel_startup: str | None = None) -> None:
        self.base = Path(base)
        # Python run in every kernel before its first cell (an IPython startup file), e.g. figure_probe's.
        self.kernel_startup = kernel_startup
        # JupyterLab user settings on top of LAB_USER_SETTINGS: file name under user-settings -> values.
        self.settings = {**LAB_USER_SETTINGS, **(settings or {})}
        # Math threads of the kernels (None: the machine's default). The browser run goes alongside
        # other notebook runs on a small machine, where two-thread kernels stall each other; what a
        # notebook prints at each thread count is nbval's business, not the browser's.
        self.threads = threads
        self.source = Path(source)
        # Called with the server's Jupyter data folder before it starts: a kernelspec written to
        # ``<folder>/kernels/python3`` replaces this environment's own kernel (the Colab stand-in's).
        self.kernels = kernels
        self.root = self.base / "notebooks"
        self.home = self.base / "home"
        self.log_path = self.base / "jupyter-server.log"
        self.token = secrets.token_hex(24)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        # The "Jupyter news" question: LAB_USER_SETTINGS answers it ("Never"), so no page waits for it.
        self.news_answered = True

    # paths and environment
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV_VARS}
        h = self.home
        env.update(HOME=str(h), JUPYTER_CONFIG_DIR=str(h / ".jupyter"), JUPYTER_DATA_DIR=str(h / ".local/share/jupyter"),
                   JUPYTER_RUNTIME_DIR=str(h / ".local/share/jupyter/runtime"), IPYTHONDIR=str(h / ".ipython"),
                   MPLCONFIGDIR=str(h / ".config/matplotlib"))
        if self.threads is not None:
            env.update(OMP_NUM_THREADS=str(self.threads), MKL_NUM_THREADS=str(self.threads), MKL_DYNAMIC="FALSE")
        if self.kernels is not None:
            # Kernelspecs in the temporary data folder must win over the ones this environment
            # installs (in a virtual environment jupyter_core otherwise looks there first).
            env["JUPYTER_PREFER_ENV_PATH"] = "0"
        return env

    def command(self) -> list[str]:
        jupyter = Path(sys.executable).parent / "jupyter"
        cmd = [str(jupyter), "lab", "--no-browser", "--ip", "127.0.0.1", "--port", str(self.port),
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    def log(self, tail: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "(no server log)"

    # lifecycle
    def prepare(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        shutil.copytree(self.source, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        env = self.env()
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
            Path(env[name]).mkdir(parents=True, exist_ok=True)
        if self.kernels is not None:
            self.kernels(Path(env["JUPYTER_DATA_DIR"]))
        if self.kernel_startup is not None:
            startup = Path(env["IPYTHONDIR"]) / "profile_default" / "startup" / "50-harness.py"
            startup.parent.mkdir(parents=True, exist_ok=True)
            startup.write_text(self.kernel_startup, encoding="utf-8")
        settings = Path(env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings"
        for name, value in self.settings.items():
            target = settings / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value))

    def start(self, timeout: float = SERVER_START_TIMEOUT, attempts: int = 3) -> JupyterServer:
        self.prepare()
        for attempt in range(attempts):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                log.write(f"\n--- start attempt {attempt + 1}: port {self.port}\n".encode())
                log.flush()
                self.process = subprocess.Popen(self.command(), env=self.env(), cwd=self.root, stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if self._wait_ready(timeout):
                return self
            exited = self.process.poll() is not None
            self.stop()
            # Another process took the port between choosing and binding it: try a new port. A server still
            # running but silent gets another start: in two full runs of the suite on a 2-core machine the Colab
            # stand-in's classic server gave no answer for 60 s twice in a row (the same tests alone passed), so
            # the wait is 180 s and every attempt may retry; a retry costs a wait only when that happens.
            port_taken = exited and "already in use" in self.log()
            if not (port_taken or not exited):
                break
        raise RuntimeError(f"JupyterLab did not answer on {self.url}/api/status within {timeout:.0f} s.\n"
                           f"Command: {' '.join(self.command()).replace(self.token, '<token>')}\n"
                           f"Server log (tail):\n{self.log()}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as reply:
                    if reply.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        return False

    def stop(self) -> None:
        """Stop the server by its own PID: terminate, wait, kill if it does not go."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)  # jupyter_server shuts its kernels down on SIGTERM
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def __enter__(self) -> JupyterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # REST API
    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=20) as reply:
            raw = reply.read()
        return json.loads(raw) if raw else None

    def sessions_for(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.api("GET", "/api/sessions") if s.get("path") == name]

    def shut_down_notebook(self, name: str) -> None:
        """Delete the notebook's sessions, which shuts their kernels down."""
        for session in self.sessions_for(name):
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except urllib.error.HTTPError:
                kernel = session.get("kernel") or {}
                if kernel.get("id"):
                    self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def kernel_commands(self) -> dict[str, list[str]]:
        """Kernel id -> command line of each kernel process this server started (Linux ``/proc``)."""
        found: dict[str, list[str]] = {}
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                stat = (proc / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid != self.pid:
                    continue
                argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except (OSError, ValueError, IndexError):
                continue
            for arg in argv:
                match = re.search(r"kernel-([0-9a-f-]{36})\.json", arg)
                if match:
                    found[match.group(1)] = [a for a in argv if a]
        return found

    def lab_url(self, name: str) -> str:
        # A workspace of its own per notebook, reset: the page opens this notebook and nothing else.
        workspace = re.sub(r"[^A-Za-z0-9_-]", "-", Path(name).stem)
        return f"{self.url}/lab/workspaces/t-{workspace}/tree/{name}?reset&token={self.token}"


# -- one notebook in the browser -----------------------------------------------------------------
class NotebookPage:
    """One notebook in its own page of ``browser``, served by ``server``; its console errors are kept.

    :meth:`close` closes the page and shuts the notebook's kernel down. Subclasses drive one front end.
    """

    def __init__(self, server: JupyterServer, browser: Browser, path: Path) -> None:
        self.server = server
        self.name = path.name
        self.committed = CommittedNotebook.read(path)
        self.page = browser.context.new_page()
        self.page.set_default_timeout(30_000)
        self.console_errors: list[str] = []
        self.page.on("pageerror", lambda error: self.console_errors.append(f"pageerror: {error}"))
        self.page.on("console", lambda msg: self.console_errors.append(f"console.{msg.type}: {msg.text}")
                     if msg.type == "error" else None)
        self.run_seconds = 0.0

    def screenshot(self, path: Path) -> Path:
        raise NotImplementedError  # each front end pictures its whole notebook its own way

    def failure_picture(self, path: Path) -> None:
        """The whole notebook, pictured after a failure; failing to take it must not hide the failure."""
        try:
            self.screenshot(path)
        except Exception:  # noqa: BLE001 - the picture is a diagnostic, the verdict stands
            pass

    def close(self) -> None:
        """Close the page and shut the notebook's kernel down (sessions API)."""
        try:
            self.page.close()
        finally:
            self.server.shut_down_notebook(self.name)


class LessonPage(NotebookPage):
    """A notebook in JupyterLab; :meth:`open_and_run_all` does what a learner does first."""

    def __init__(self, server: JupyterServer, browser: Browser, path: Path) -> None:
        super().__init__(server, browser, path)
        self.timings: dict[str, float] = {}

    @property
    def notebook(self):  # the visible notebook panel's cells
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")

    def start_loading(self) -> LessonPage:
        """Navigate without waiting: JupyterLab boots (and starts the kernel) while Python goes on."""
        self.page.goto(self.server.lab_url(self.name), wait_until="commit")
        self.loading = True
        return self

    loading = False

    def open(self) -> None:
        # Only the front page answers quickly: keys and clicks on a page behind another one are
        # several times slower, even though it reports itself visible.
        self.page.bring_to_front()
        if not self.loading:
            self.page.goto(self.server.lab_url(self.name), wait_until="domcontentloaded",
                           timeout=NAVIGATION_TIMEOUT_MS)
        cells = self.notebook.locator(".jp-Cell")
        self.page.wait_for_function(
            "n => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length >= n",
            arg=self.committed.n_cells, timeout=60_000, polling=100)
        assert cells.count() == self.committed.n_cells
        self.wait_kernel_ready()
        self.dismiss_news()

    def kernel_status_text(self) -> str:
        item = self.page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\|\s*\w+\s*$"))
        return item.first.inner_text() if item.count() else ""

    def wait_kernel_ready(self, timeout: float = 60.0) -> None:
        """Wait until the page is connected to a started kernel: status bar "<kernel> | Idle".

        The toolbar's execution indicator already says idle while the kernel is still starting;
        Run All at that moment clears every prompt and runs nothing.
        """
        try:
            self.page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\|\s*Idle\s*$")).first.wait_for(
                timeout=timeout * 1000)
            self.page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout * 1000)
        except Exception as problem:  # noqa: BLE001
            dialog = self.page.locator(".jp-Dialog")
            extra = f"; a dialog is open: {dialog.first.inner_text()!r}" if dialog.count() else ""
            raise AssertionError(f"{self.name}: the kernel did not become idle within {timeout:.0f} s "
                                 f"(status bar: {self.kernel_status_text()!r}{extra})\n{problem}") from None

    def dismiss_news(self) -> None:
        """Answer the fresh profile's "Jupyter news" question with No, if it is there.

        The answer is kept in the server's (temporary) settings, so only the first page waits for it.
        """
        if self.server.news_answered:
            return
        toast = self.page.locator(".jp-Notification-Toast-Body, .Toastify__toast").filter(has_text="news")
        try:
            toast.first.wait_for(state="visible", timeout=3000)
        except Exception:  # noqa: BLE001 - the prompt is optional
            return
        toast.first.get_by_role("button", name=re.compile(r"^No$")).click()
        toast.first.wait_for(state="hidden", timeout=5000)
        self.server.news_answered = True

    def run_all(self, timeout: float = RUN_ALL_TIMEOUT) -> float:
        """Run → Run All Cells; wait until no cell is queued or running and the kernel is idle."""
        page = self.page
        # The committed outputs already show [1], [2] ...: watch for the run to really start ([*]).
        page.evaluate("""() => {
            window.__sawBusy = false;
            const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
            const check = () => {
                if ([...nb.querySelectorAll('.jp-InputArea-prompt')].some(p => p.textContent.includes('*')))
                    window.__sawBusy = true;
            };
            window.__busyObserver = new MutationObserver(check);
            window.__busyObserver.observe(nb, {subtree: true, childList: true, characterData: true});
        }""")
        start = time.perf_counter()
        page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
        page.locator("li[data-command='runmenu:run-all']").click()
        try:
            self._wait_run_finished(timeout)
        except Exception as problem:  # noqa: BLE001 - report what the page shows
            raise AssertionError(f"{self.name}: Run All did not finish within {timeout:.0f} s: {self.run_state()}"
                                 f"\nbrowser console errors: {self.console_errors[-5:]}\n{problem}") from None
        self.run_seconds = time.perf_counter() - start
        page.evaluate("() => window.__busyObserver.disconnect()")
        return self.run_seconds

    def run_state(self) -> dict[str, Any]:
        """Diagnostics: did the run start, the prompts, the kernel status."""
        return self.page.evaluate(r"""() => {
            const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
            const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
            const bar = [...document.querySelectorAll('#jp-main-statusbar *')].map(e => e.textContent)
                        .find(t => / \| \w+$/.test(t || ''));
            return {sawBusy: window.__sawBusy, kernel: ind && ind.getAttribute('data-status'), statusbar: bar,
                    prompts: [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent.trim())};
        }""")

    def _wait_run_finished(self, timeout: float) -> None:
        # Finished: the run started, no cell is queued or running ([*]) any more, the kernel is idle.
        # (A cell that raises stops Run All: the cells after it keep no count, see unexecuted_cells.)
        self.page.wait_for_function("""() => {
            if (!window.__sawBusy) return false;
            const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
            const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
            const running = prompts.some(p => p.textContent.includes('*'));
            return !running && document.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']") !== null;
        }""", timeout=timeout * 1000, polling=100)

    def unexecuted_cells(self) -> list[str]:
        """Code cells without an execution count after Run All, as "cell N: first line"."""
        return self.notebook.evaluate(r"""nb => [...nb.querySelectorAll('.jp-Cell')].map((c, i) => {
            if (!c.classList.contains('jp-CodeCell')) return null;
            const prompt = c.querySelector('.jp-InputArea-prompt').textContent.trim();
            if (/^\[\d+\]:$/.test(prompt)) return null;
            const line = (c.querySelector('.cm-line') || {textContent: ''}).textContent;
            return `cell ${i} ${prompt} ${line.slice(0, 80)}`;
        }).filter(x => x)""")

    def wait_rendered(self, timeout: float = 30.0) -> None:
        """Wait until the committed number of explorers and figures are there and loaded (or time out)."""
        try:
            self.page.wait_for_function("""([nExplorers, nPng, status, png]) => {
                const explorers = document.querySelectorAll(status);
                const pngs = [...document.querySelectorAll(png)];
                const imagesLoaded = [...explorers].every(s => {
                    const img = s.closest('.widget-vbox').querySelector(':scope > img.widget-image');
                    return img && img.complete && img.naturalWidth > 0;
                });
                return explorers.length >= nExplorers && pngs.length >= nPng && imagesLoaded
                       && pngs.every(i => i.complete && i.naturalWidth > 0);
            }""", arg=[len(self.committed.explorers), self.committed.n_static_png, STATUS, STATIC_PNG],
                timeout=timeout * 1000, polling=100)
        except Exception:  # noqa: BLE001 - the test's assertions report what is missing
            pass

    def open_and_run_all(self) -> None:
        t0 = time.perf_counter()
        self.open()
        t1 = time.perf_counter()
        self.run_all()
        self.wait_rendered()
        self.timings.update(open=t1 - t0, run_all=time.perf_counter() - t1)

    # what the page shows
    def problems(self) -> list[str]:
        """Text of every error/stderr output and every widget that failed to render."""
        found = [f"[{el.get_attribute('data-mime-type')}] {el.inner_text()[:800]}"
                 for el in self.notebook.locator(PROBLEM_OUTPUTS).all()]
        outputs_text = self.notebook.locator(".jp-OutputArea").all_inner_texts()
        for text in outputs_text:
            for marker in WIDGET_FAILURES + ("Traceback (most recent call last)",):
                if marker in text:
                    found.append(f"output contains {marker!r}: {text[:800]}")
        return found

    def static_images(self) -> list[dict[str, Any]]:
        return self.notebook.locator(STATIC_PNG).evaluate_all(
            "imgs => imgs.map(i => ({w: i.naturalWidth, h: i.naturalHeight, complete: i.complete,"
            " shownWidth: i.getBoundingClientRect().width, alt: i.getAttribute('alt')}))")

    def explorers(self) -> list[ExplorerView]:
        boxes = self.notebook.locator(EXPLORER_BOX)
        return [ExplorerView(self, boxes.nth(i), i) for i in range(boxes.count())]

    def screenshot(self, path: Path) -> Path:
        """The whole notebook in one picture: the viewport is made as tall as the notebook for it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        page = self.page
        size = page.viewport_size or {"width": LAPTOP_WIDTH, "height": LAPTOP_HEIGHT}
        height = page.evaluate("""() => {
            const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
            outer.scrollTop = 0;  // Run All leaves the notebook scrolled to its end
            return window.innerHeight - outer.clientHeight + outer.scrollHeight;
        }""")
        page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height), 16000))})
        try:
            page.evaluate(NEXT_FRAMES_JS)  # JupyterLab re-lays out on resize
            page.evaluate("""() => { document.querySelector(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer').scrollTop = 0; }""")
            page.screenshot(path=str(path))
        finally:
            page.set_viewport_size(size)
            page.evaluate(NEXT_FRAMES_JS)
        return path

    def wait_kernel_gone(self, timeout: float = 15.0) -> None:
        """After :meth:`close`: no session is left for this notebook (its kernel has shut down)."""
        deadline = time.monotonic() + timeout
        while self.server.sessions_for(self.name):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: its kernel is still running {timeout:.0f} s after closing")
            time.sleep(0.2)


# -- one explorer --------------------------------------------------------------------------------
def parse_status(text: str) -> tuple[dict[str, str], str]:
    """``"a=1 b=x y | rest"`` -> ``({"a": "1", "b": "x y"}, "rest")``."""
    values_part, _, rest = text.partition(" | ")
    pairs = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", values_part.strip()))
    return pairs, rest


CHOICE_KINDS = ("dropdown", "togglebuttons", "radio")
DISCRETE_KINDS = CHOICE_KINDS + ("checkbox", "toggle")


@dataclass
class Control:
    """One control of an explorer: its status-line name, its kind and its DOM element."""

    name: str
    kind: str  # "slider", "dropdown", "checkbox", "toggle", "togglebuttons", "radio", "other"
    locator: Any


@dataclass
class State:
    """What an explorer shows at one moment."""

    status: str
    values: dict[str, str]
    src: str | None
    visible: bool
    natural_width: int
    shown_width: float = 0.0  # CSS pixels on the page

    @property
    def valid(self) -> bool:
        return "not possible:" not in self.status and "could not draw this:" not in self.status


class ExplorerView:
    """One explorer's VBox on the page: controls, status line, image."""

    def __init__(self, lesson: LessonPage, box: Any, index: int) -> None:
        self.lesson = lesson
        self.page = lesson.page
        self.box = box
        self.index = index
        self.slider_step: dict[str, float] = {}
        self.aria_step: dict[str, float | None] = {}
        self.last_valid: State | None = None
        self._controls: list[Control] | None = None

    @property
    def class_name(self) -> str:
        """The explorer's class, from the committed notebook (same order of appearance)."""
        names = self.lesson.committed.explorers
        return names[self.index] if self.index < len(names) else "?"

    def state(self) -> State:
        raw = self.box.evaluate("""box => {
            const status = box.querySelector(':scope > .widget-html code.explorer-status');
            const img = box.querySelector(':scope > img.widget-image');
            const style = img ? getComputedStyle(img) : null;
            const rect = img ? img.getBoundingClientRect() : null;
            return {status: status ? status.textContent : '',
                    src: img ? img.getAttribute('src') : null,
                    visible: !!img && style.visibility !== 'hidden' && style.display !== 'none'
                             && rect.width > 0 && rect.height > 0,
                    naturalWidth: img ? img.naturalWidth : 0, shownWidth: rect ? rect.width : 0};
        }""")
        values, _ = parse_status(raw["status"])
        return State(raw["status"], values, raw["src"], raw["visible"], raw["naturalWidth"], raw["shownWidth"])

    def controls(self) -> list[Control]:
        """The controls in the explorer's first row, named by the status line's pairs (same order).

        Found once per explorer (ipywidgets keeps a control's element while its value changes).
        """
        if self._controls is not None:
            return self._controls
        names = list(self.state().values)
        row = self.box.locator(":scope > .widget-hbox").first
        classes = row.evaluate("""row => [...row.children].map(c =>
            c.className + (c.querySelector('.noUi-handle') ? ' widget-slider' : ''))""")
        kinds = (("widget-slider", "slider"), ("widget-dropdown", "dropdown"), ("widget-checkbox", "checkbox"),
                 ("widget-toggle-buttons", "togglebuttons"), ("widget-toggle-button", "toggle"),
                 ("widget-radio", "radio"))
        found = []
        for i, cls in enumerate(classes):
            words = cls.split()
            kind = next((k for marker, k in kinds if marker in words), "other")
            name = names[i] if i < len(names) else f"control{i}"
            found.append(Control(name, kind, row.locator(f":scope > :nth-child({i + 1})")))
        self._controls = found
        return found

    def control(self, name: str) -> Control:
        for control in self.controls():
            if control.name == name:
                return control
        raise LookupError(f"explorer #{self.index} has no control {name!r}; status: {self.state().status!r}")

    # waiting
    def wait_for_value(self, name: str, before: State, expected: str | None = None,
                       timeout: float = WIDGET_TIMEOUT) -> State:
        """Wait until the status line's ``name=`` pair differs from ``before`` (and matches ``expected``).

        The waiting happens in the page (one round trip), checking at every change of the status.
        """
        result = self.box.evaluate(WAIT_FOR_VALUE_JS, {"name": name, "old": before.values.get(name),
                                                       "expected": expected, "timeout": timeout * 1000})
        now = self.state()
        if not result["ok"]:
            raise AssertionError(f"{self.label}: after changing {name!r} the status line still shows "
                                 f"{now.status!r} (before: {before.status!r}; expected {name}={expected})")
        return now

    def wait_for_image(self, old_src: str | None, timeout: float = 5.0) -> State:
        """Wait until the image's src differs from ``old_src`` and the new picture has loaded."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.state()
            if (now.src != old_src and now.natural_width > 0) or time.monotonic() > deadline:
                return now
            self.page.wait_for_timeout(25)

    @property
    def label(self) -> str:
        return f"{self.lesson.name} explorer #{self.index} ({self.class_name})"

    # checking one change
    def check_change(self, name: str, before: State, expected: str | None, what: str, *, strict: bool = True) -> State:
        """After a change of control ``name``: the status line shows it; then the picture agrees.

        A valid state whose values differ from the last valid state's (``self.last_valid``) must show
        a new picture — for a discrete control (``strict=False``) an unchanged picture is only noted,
        since e.g. two mask conventions draw the same weights when no row is fully masked. An
        impossible combination ("not possible: ...") hides the picture; "could not draw this" means
        the explorer's code raised: always a failure.
        """
        now = self.wait_for_value(name, before, expected)
        what = what.replace("\xa0", " ")
        self.steps.append(f"{what}: {now.status}")
        assert "could not draw this" not in now.status, f"{self.label}: {what} made the explorer fail: {now.status!r}"
        if not now.valid:
            # Explorer.refresh hides the picture, then shows the status line: two widget messages, which a busy
            # page can paint apart.
            deadline = time.monotonic() + 5.0
            while now.visible and time.monotonic() < deadline:
                self.page.wait_for_timeout(25)
                now = self.state()
            assert not now.visible, f"{self.label}: {what}: status says {now.status!r} but the picture is still shown"
            return now
        last = self.last_valid
        if last is not None and now.values != last.values:
            # Explorer.refresh sets the picture before the status line, and the widget manager applies
            # a kernel's updates in order: once the status shows the new values, a new picture has
            # arrived (only its loading may lag). So an unchanged picture needs only a short grace.
            now = self.wait_for_image(last.src, timeout=5.0 if strict else 0.3)
            if now.src == last.src:
                message = (f"{self.label}: {what}: the status line changed to {now.status!r} but the picture did "
                           f"not change (still the one of {last.status!r})")
                assert not strict, message
                self.notes.append(f"same picture for {parse_status(now.status)[0]} as for {parse_status(last.status)[0]}")
            else:
                self.picture_changes[name] = self.picture_changes.get(name, 0) + 1
        if not now.visible or now.natural_width == 0:
            now = self.wait_for_image(None)
        assert now.visible and now.natural_width > 0, f"{self.label}: {what}: no picture for {now.status!r}"
        self.last_valid = now
        return now

    @property
    def steps(self) -> list[str]:
        """Every change made and the status line it produced."""
        return self.__dict__.setdefault("_steps", [])

    @property
    def notes(self) -> list[str]:
        """Changes that left the picture as it was (allowed for discrete controls, reported)."""
        return self.__dict__.setdefault("_notes", [])

    @property
    def picture_changes(self) -> dict[str, int]:
        return self.__dict__.setdefault("_picture_changes", {})

    # slider
    def handle(self, control: Control) -> Any:
        return control.locator.locator(".noUi-handle").first

    def slider_info(self, control: Control) -> dict[str, Any]:
        """Position of a slider: ``now`` from its readout when numeric (``aria-valuenow`` is rounded
        to one decimal), else from ``aria-valuenow`` (e.g. a selection slider's index)."""
        info = control.locator.evaluate("""c => {
            const h = c.querySelector('.noUi-handle'), r = c.querySelector('.widget-readout');
            const pos = parseFloat(h.getAttribute('aria-valuenow'));
            return {pos: pos, now: pos, min: parseFloat(h.getAttribute('aria-valuemin')),
                    max: parseFloat(h.getAttribute('aria-valuemax')), readout: r ? r.textContent.trim() : ''};
        }""")
        try:
            info["now"] = float(info["readout"].replace(",", ""))
        except ValueError:
            pass
        return info

    def wait_slider_moved(self, control: Control, old: dict[str, Any], what: str, timeout: float = 3.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.slider_info(control)
            if info["now"] != old["now"] or info["readout"] != old["readout"]:
                return info
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.label}: {what}: the slider {control.name!r} did not move "
                                     f"(still {old['readout']!r})")
            self.page.wait_for_timeout(25)

    def press(self, control: Control, key: str) -> dict[str, Any]:
        """Focus the slider's handle and press ``key``; return the slider's new position."""
        old = self.slider_info(control)
        self.handle(control).press(key)  # focuses the handle first
        info = self.wait_slider_moved(control, old, f"{key} on {control.name}")
        if control.name not in self.slider_step:
            # In the readout's units (for reaching a value) and in the handle's aria units (for
            # dragging: a selection slider's aria values are indices; a float's are rounded).
            self.slider_step[control.name] = abs(info["now"] - old["now"]) or 1.0
            self.aria_step[control.name] = abs(info["pos"] - old["pos"]) or None
        return info

    def key_move(self, control: Control, max_presses: int = 12) -> None:
        """Arrow keys, checked after each press: right (left at the maximum) until the explorer shows
        a picture for a new value — an impossible combination on the way is checked too —, then back."""
        first = self.slider_info(control)
        directions = ("ArrowRight", "ArrowLeft") if first["pos"] < first["max"] else ("ArrowLeft", "ArrowRight")
        for key in directions:
            for _ in range(max_presses):
                info = self.slider_info(control)
                if (key == "ArrowRight" and info["pos"] >= info["max"]) or (key == "ArrowLeft" and info["pos"] <= info["min"]):
                    break
                before = self.state()
                info = self.press(control, key)
                now = self.check_change(control.name, before, info["readout"], f"{key} on {control.name}")
                if now.valid:
                    break
            if self.picture_changes.get(control.name):
                break
            self.set_slider(control.name, first)
        self.steps.append(f"back to {control.name}={first['readout']} with arrow keys")
        self.set_slider(control.name, first)

    def drag_move(self, control: Control, steps: float = 1.6) -> None:
        """Drag the handle with the mouse by about ``steps`` steps (towards the far end), then check."""
        info = self.slider_info(control)
        handle = self.handle(control)
        handle.scroll_into_view_if_needed()
        track = control.locator.locator(".noUi-target").first.bounding_box()
        box = handle.bounding_box()
        assert track and box, f"{self.label}: slider {control.name!r} is not visible"
        step = self.aria_step.get(control.name) or self.slider_step.get(control.name, 1.0)
        span = max(info["max"] - info["min"], step)
        dx = max(track["width"] * step * steps / span, 6.0)
        if info["pos"] - info["min"] > info["max"] - info["pos"]:
            dx = -dx  # nearer the maximum: drag left
        before = self.state()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        self.page.mouse.move(x, y)
        self.page.mouse.down()
        self.page.mouse.move(x + dx, y, steps=8)
        self.page.mouse.up()
        moved = self.wait_slider_moved(control, info, f"dragging {control.name} by {dx:+.0f} px")
        self.check_change(control.name, before, moved["readout"], f"drag {control.name} {dx:+.0f} px")

    def set_slider(self, name: str, target: float | dict[str, Any], timeout: float = WIDGET_TIMEOUT) -> State:
        """Move slider ``name`` with arrow keys, as a learner would, to ``target``: a number (the
        readout's value) or an earlier :meth:`slider_info` (its exact position, e.g. to go back to
        where a slider started); then wait for the status line to show it."""
        control = self.control(name)
        info = self.slider_info(control)
        before = self.state()

        def reached(i: dict[str, Any]) -> bool:
            if isinstance(target, dict):
                return i["pos"] == target["pos"] and i["readout"] == target["readout"]
            # A number slider's handle sits at its value (aria rounds it to one decimal): within half a
            # step is there. A selection slider's handle sits at an index, and its values need not be
            # evenly spaced (e.g. 1, 2, 4, 8): only the value itself is there.
            even = abs(i["pos"] - i["now"]) <= 0.051
            return abs(i["now"] - target) <= (self.slider_step.get(name, 1e-9) / 2 if even else 1e-9)

        def key_for(i: dict[str, Any]) -> str:
            if isinstance(target, dict):  # by position; aria rounds a float slider's, then by value
                ahead = target["pos"] > i["pos"] if target["pos"] != i["pos"] else target["now"] > i["now"]
            else:
                ahead = target > i["now"]
            return "ArrowRight" if ahead else "ArrowLeft"

        presses = 0
        while not reached(info):
            info = self.press(control, key_for(info))
            presses += 1
            assert presses <= 300, f"{self.label}: could not reach {name}={target} with arrow keys"
        if presses == 0 or before.values.get(name) is not None and values_match(before.values[name], info["readout"]):
            return before
        return self.wait_for_value(name, before, info["readout"], timeout)

    # discrete controls
    def options(self, control: Control) -> tuple[list[Any], list[str], int]:
        """A dropdown's, toggle-buttons' or radio buttons' options: (elements, labels, selected index)."""
        if control.kind == "dropdown":
            select = control.locator.locator("select").first
            labels = select.locator("option").all_inner_texts()
            return [select] * len(labels), labels, select.evaluate("s => s.selectedIndex")
        items = control.locator.locator("button" if control.kind == "togglebuttons" else "input[type=radio]")
        elements = [items.nth(i) for i in range(items.count())]
        labels = [e.inner_text() if control.kind == "togglebuttons" else (e.get_attribute("value") or "")
                  for e in elements]
        if control.kind == "togglebuttons":
            selected = [i for i, e in enumerate(elements) if "mod-active" in (e.get_attribute("class") or "")]
        else:
            selected = [i for i, e in enumerate(elements) if e.is_checked()]
        return elements, labels, selected[0] if selected else -1

    def choose(self, control: Control, index: int, *, strict: bool = False) -> State:
        """Select option ``index`` of a dropdown / toggle buttons / radio buttons; check the change."""
        elements, labels, _ = self.options(control)
        before = self.state()
        if control.kind == "dropdown":
            elements[index].select_option(index=index)
        else:
            elements[index].click()
        return self.check_change(control.name, before, None,
                                 f"{control.name} -> {labels[index].replace(chr(160), ' ')!r}", strict=strict)

    def discrete_moves(self, control: Control) -> None:
        """Every other option once, then the first one again (checkbox / toggle: click, click back)."""
        if control.kind in ("checkbox", "toggle"):
            target = control.locator.locator("input[type=checkbox]").first if control.kind == "checkbox" \
                else control.locator
            for i in (1, 2):
                before = self.state()
                target.click()
                self.check_change(control.name, before, None, f"click {control.name} ({i})", strict=False)
            return
        _, labels, start = self.options(control)
        for i in [i for i in range(len(labels)) if i != start] + [start]:
            self.choose(control, i)

    def exercise(self) -> list[str]:
        """Every control moved the ways a learner moves it, each from the explorer's first values.

        Sliders: one arrow key step and back, then a mouse drag, then back to where they started.
        Dropdowns: every option, ending on the first one. Checkboxes/toggles: click, click back.
        Every control must change the picture at least once. Returns the log of status lines.
        """
        start = self.state()
        assert start.valid, f"{self.label}: starts in an impossible state: {start.status!r}"
        self.last_valid = start
        self.box.scroll_into_view_if_needed()
        for control in self.controls():
            if control.kind == "slider":
                initial = self.slider_info(control)
                self.key_move(control)
                self.drag_move(control)
                self.steps.append(f"back to {control.name}={initial['readout']} with arrow keys")
                self.set_slider(control.name, initial)
            elif control.kind in DISCRETE_KINDS:
                self.discrete_moves(control)
            else:
                self.steps.append(f"(not driven: {control.name}, a {control.locator.get_attribute('class')})")
                continue
            self.wait_back_to(start)
        for control in self.controls():
            if control.kind in DISCRETE_KINDS and not self.picture_changes.get(control.name):
                self.with_other_choices(control, start)
            assert control.kind == "other" or self.picture_changes.get(control.name, 0) > 0, (
                f"{self.label}: no change of {control.name!r} changed the picture:\n  " + "\n  ".join(self.steps))
        return self.steps

    def with_other_choices(self, control: Control, start: State) -> None:
        """A discrete control that changed nothing from the first values (e.g. a mask convention
        when no row is fully masked): try one other value of it under each option of the other
        choice controls (last options first: the special cases tend to come last), until the
        picture changes."""
        for other in self.controls():
            if other.name == control.name or other.kind not in CHOICE_KINDS:
                continue
            _, labels, first = self.options(other)
            for i in reversed(range(len(labels))):
                if i == first or not self.choose(other, i).valid:
                    continue
                self.one_other_value(control)
                if self.picture_changes.get(control.name):
                    break
            self.choose(other, first)
            self.wait_back_to(start)
            if self.picture_changes.get(control.name):
                return

    def one_other_value(self, control: Control) -> None:
        """Change a discrete control to one other value and back, each change checked."""
        if control.kind in ("checkbox", "toggle"):
            self.discrete_moves(control)
            return
        _, labels, current = self.options(control)
        self.choose(control, (current + 1) % len(labels))
        self.choose(control, current)

    def wait_back_to(self, start: State, timeout: float = WIDGET_TIMEOUT) -> None:
        """After a control is restored: the status shows the first values and the picture is back."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.state()
            if now.values == start.values and now.visible and now.natural_width > 0:
                self.last_valid = now
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.label}: after restoring, the status shows {now.status!r} "
                                     f"(expected the first values {start.status!r}; picture shown: {now.visible})")
            self.page.wait_for_timeout(25)


# In the page: resolve when the explorer's status line shows a new value for `name` (matching
# `expected` like values_match below), or after `timeout` ms. Mirrors parse_status.
WAIT_FOR_VALUE_JS = r"""(box, {name, old, expected, timeout}) => new Promise(resolve => {
    const status = () => box.querySelector(':scope > .widget-html code.explorer-status');
    const value = () => {
        const el = status();
        if (!el) return null;
        const part = el.textContent.split(' | ')[0].trim();
        const re = /(\w+)=(.*?)(?= \w+=|$)/g;
        let m;
        while ((m = re.exec(part)) !== null) if (m[1] === name) return m[2];
        return null;
    };
    const matches = v => {
        if (expected === null || v === expected) return true;
        v = v.replaceAll(',', ''); const e = expected.replaceAll(',', '');  // readouts may group digits
        const a = parseFloat(v), b = parseFloat(e);
        if (isNaN(a) || isNaN(b) || !/^[-+0-9.eE]+$/.test(v) || !/^[-+0-9.eE]+$/.test(e)) return false;
        const decimals = e.includes('.') ? e.split('.')[1].length : 0;
        return Math.abs(a - b) <= 0.5 * Math.pow(10, -decimals) + 1e-9;
    };
    const done = () => { const v = value(); return v !== null && v !== old && matches(v); };
    if (done()) { resolve({ok: true}); return; }
    const observer = new MutationObserver(() => {
        if (done()) { observer.disconnect(); clearTimeout(timer); resolve({ok: true}); }
    });
    observer.observe(box, {subtree: true, childList: true, characterData: true});
    const timer = setTimeout(() => { observer.disconnect(); resolve({ok: done()}); }, timeout);
})"""


def values_match(shown: str, expected: str) -> bool:
    """Does the status line's value agree with what the control displays (readout, label)?"""
    if shown == expected:
        return True
    shown, expected = shown.replace(",", ""), expected.replace(",", "")  # readouts may group digits: 8,192
    try:
        a, b = float(shown), float(expected)
    except ValueError:
        return False
    decimals = len(expected.split(".")[1]) if "." in expected else 0
    return abs(a - b) <= 0.5 * 10 ** (-decimals) + 1e-9


# -- pytest fixtures (imported by tests/notebooks/test_browser.py) ---------------------------------
@pytest.fixture(scope="session")
def chromium_path() -> str:
    return require_chromium()


# -- the JupyterLab run: every notebook, in a thread of its own -----------------------------------
LabCheck = Callable[["LessonPage", Path], None]


@dataclass
class Verdict:
    """One check on one notebook's page: passed, or what failed."""

    passed: bool
    message: str = ""
    note: str = ""  # printed by the test (its captured output): how long the page took


class LabRun:
    """Every planned notebook in real JupyterLab, in a thread of its own; the tests' checks run on each page.

    The browser half is the slowest part of the suite and mostly waits on a kernel or the page. Run
    in its own thread (its own server, Playwright and Chromium) from the moment the tests are
    collected (``conftest.py``), it overlaps the unit tests and nbval instead of following them.
    ``plan`` maps each notebook to the checks to run on its page, in order; each test then reports
    its check's verdict (:meth:`verdict`). Notebooks are opened in order, the next one loading while
    the current one's checks run, so at most two notebooks, and two kernels, are open at a time.
    """

    def __init__(self, chromium: str, plan: dict[Path, list[LabCheck]], folder: Path,
                 screenshots: Path = SCREENSHOT_DIR) -> None:
        self.plan = plan
        self.screenshots = screenshots
        from tools import figure_probe  # every picture a kernel renders is recorded (tools/figure_sizes.py reads it)

        self.server = JupyterServer(folder, threads=1,
                                    kernel_startup=figure_probe.startup_code(figure_probe.records_folder(folder)))
        self.kernelspecs: dict[str, Any] | None = None  # what the server offers, read once it answers
        self.stop = threading.Event()  # set by close(): notebooks not yet opened are left alone
        self.error: str | None = None  # the run itself failed (server, browser)
        self._verdicts: dict[tuple[str, str], Verdict] = {}
        self._finished = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(chromium,), name="jupyterlab-run", daemon=True)
        self._thread.start()

    def verdict(self, check: LabCheck, path: Path, timeout: float = 1800.0) -> None:
        """Wait for ``check``'s verdict on ``path``; fail the calling test with its message if it failed."""
        key = (check.__name__, path.name)
        with self._changed:
            self._changed.wait_for(lambda: key in self._verdicts or self._finished, timeout)
        found = self._verdicts.get(key)
        if found is None:
            pytest.fail(self.error or f"the JupyterLab run ended without checking {path.name}", pytrace=False)
        print(found.note)
        if not found.passed:
            pytest.fail(found.message, pytrace=False)

    def wait_server(self, timeout: float = SERVER_START_TIMEOUT * 3) -> dict[str, Any]:
        """The kernelspecs the server offered (fails the test if the server never answered)."""
        with self._changed:
            self._changed.wait_for(lambda: self.kernelspecs is not None or self._finished, timeout)
        if self.kernelspecs is None:
            pytest.fail(self.error or "JupyterLab did not start", pytrace=False)
        return self.kernelspecs

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=120)

    # the thread
    def _record(self, results: dict[str, Verdict], path: Path) -> None:
        with self._changed:
            self._verdicts.update({(name, path.name): verdict for name, verdict in results.items()})
            self._changed.notify_all()

    def _run(self, chromium: str) -> None:
        try:
            self.server.start()
            specs = self.server.api("GET", "/api/kernelspecs")
            with self._changed:
                self.kernelspecs = specs
                self._changed.notify_all()
            browser = Browser(chromium)
            try:
                self._lessons(browser)
            finally:
                browser.close()
        except BaseException as problem:  # noqa: BLE001 - reported by every test still waiting
            self.error = f"the JupyterLab run failed: {type(problem).__name__}: {problem}"
        finally:
            self.server.stop()
            with self._changed:
                self._finished = True
                self._changed.notify_all()

    def _lessons(self, browser: Browser) -> None:
        paths = list(self.plan)
        loading: dict[str, LessonPage] = {}
        self.screenshots.mkdir(parents=True, exist_ok=True)
        try:
            for i, path in enumerate(paths):
                if self.stop.is_set():
                    return
                page = loading.pop(path.name, None) or LessonPage(self.server, browser, path)
                for old in self.screenshots.glob(f"{path.stem}__*"):
                    old.unlink(missing_ok=True)
                results = self._check(page, path)
                if i + 1 < len(paths) and not self.stop.is_set():
                    loading[paths[i + 1].name] = LessonPage(self.server, browser, paths[i + 1]).start_loading()
                page.close()
                try:
                    page.wait_kernel_gone()
                except AssertionError as problem:
                    last = self.plan[path][-1].__name__
                    results[last] = Verdict(False, f"{results[last].message}\n{problem}".strip())
                self._record(results, path)
        finally:
            for page in loading.values():
                page.close()

    def _check(self, page: LessonPage, path: Path) -> dict[str, Verdict]:
        """Open the notebook, Run All, then every planned check on the page, each to its verdict."""
        names = [check.__name__ for check in self.plan[path]]
        try:
            page.open_and_run_all()
        except Exception as problem:  # noqa: BLE001 - every check of this notebook reports it
            page.page.screenshot(path=str(self.screenshots / f"{path.stem}__0_run_all_failed.png"))
            return {name: Verdict(False, f"{path.name}: {problem}") for name in names}
        if ALL_SCREENSHOTS:
            page.screenshot(self.screenshots / f"{path.stem}__1_after_run_all.png")
        results = {}
        for check in self.plan[path]:
            started = time.perf_counter()
            try:
                check(page, self.screenshots)
                results[check.__name__] = Verdict(True)
            except AssertionError as failure:
                results[check.__name__] = Verdict(False, str(failure))
            except Exception:  # noqa: BLE001 - a broken check is a failure with its traceback
                results[check.__name__] = Verdict(False, traceback.format_exc())
            if not results[check.__name__].passed:  # the page as the check left it
                page.failure_picture(self.screenshots / f"{path.stem}__failed_{check.__name__}.png")
            results[check.__name__].note = (f"{path.name}: opened in {page.timings['open']:.1f} s, Run All "
                                            f"{page.timings['run_all']:.1f} s; this check {time.perf_counter() - started:.1f} s")
        return results


class LabRuns:
    """The planned notebooks shared out, every other one, between ``count`` :class:`LabRun` that go side by side.

    One run opens the notebooks one after the other; with two, each has half the chain, and the two
    fill the time the other spends waiting on its page or kernel (measured: the single chain was the
    last thing the suite waited for).
    """

    def __init__(self, chromium: str, plan: dict[Path, list[LabCheck]], folder: Path, count: int = 2) -> None:
        paths = list(plan)
        self.runs: list[LabRun] = []
        self._by_name: dict[str, LabRun] = {}
        for i in range(count):
            part = {path: plan[path] for path in paths[i::count]}
            if part:
                run = LabRun(chromium, part, folder / f"lab{i}")
                self.runs.append(run)
                self._by_name.update({path.name: run for path in part})

    def verdict(self, check: LabCheck, path: Path) -> None:
        """See :meth:`LabRun.verdict`."""
        self._by_name[path.name].verdict(check, path)

    def wait_server(self) -> dict[str, Any]:
        """The kernelspecs the first run's server offers (every run's server is set up the same way)."""
        return self.runs[0].wait_server()

    def close(self) -> None:
        for run in self.runs:
            run.close()


def with_tempdir() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for scripts that use :class:`JupyterServer` outside pytest."""
    return tempfile.TemporaryDirectory(prefix="attn-browser-")


# -- nothing changes on open --------------------------------------------------------------------
# A notebook opened and closed untouched must stay as committed: no "unsaved changes" mark, no "Save your
# work" question on closing, no autosave writing it back. JupyterLab replaces a notebook's kernelspec and
# language_info with what the kernel reports as soon as the kernel starts; any difference marks it changed.
# The docmanager's autosave is shortened here so that a notebook marked changed is written back to disk
# within the test, as it would be after two minutes on a learner's machine.
AUTOSAVE_SECONDS = 0.5
UNTOUCHED_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": True,
                                                                    "autosaveInterval": AUTOSAVE_SECONDS},
}
MAIN_TAB = "#jp-main-dock-panel .lm-TabBar-tab"
DIALOG = ".jp-Dialog"


@dataclass
class UntouchedObservation:
    """One notebook opened in JupyterLab, left alone until its kernel was idle, and closed."""

    name: str
    dirty: bool = False  # its tab showed unsaved changes once the kernel was idle
    dialogs: list[str] = field(default_factory=list)  # dialogs that closing the tab opened ("Save your work")
    changed_on_disk: bool = False  # the served file's bytes differ from what was served
    open_seconds: float = 0.0  # from navigation to an idle kernel
    error: str | None = None  # the page could not be driven (timeout, missing element)

    def problems(self) -> list[str]:
        found = [f"{self.name}: {self.error}"] if self.error else []
        if self.dirty:
            found.append(f"{self.name}: JupyterLab marked the notebook changed on opening (its tab shows unsaved changes)")
        found += [f"{self.name}: closing it untouched asked: {text!r}" for text in self.dialogs]
        if self.changed_on_disk:
            found.append(f"{self.name}: the file on disk changed although nobody edited it (autosave wrote it back)")
        return found


def open_and_close_untouched(server: JupyterServer, browser: Browser, paths: list[Path],
                             settle: float = AUTOSAVE_SECONDS + 0.5,
                             screenshots: Path | None = SCREENSHOT_DIR) -> dict[str, UntouchedObservation]:
    """Open each served notebook in turn as a learner does, wait for an idle kernel, run nothing, close its tab.

    ``paths`` name notebooks in the server's root (``server.root``). One JupyterLab page: each notebook is
    opened by a double click in the file browser (no page load per notebook). After its kernel is idle
    the page is left alone for ``settle`` seconds, longer than the autosave interval of
    :data:`UNTOUCHED_SETTINGS`, so a notebook marked changed is autosaved before it is closed. A dialog that
    closing opens is answered "Discard", so one notebook's failure does not block the next; its kernel is
    then shut down. Never raises for one notebook: what went wrong is recorded in its observation.
    """
    results: dict[str, UntouchedObservation] = {}
    page = browser.context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(f"{server.url}/lab/workspaces/untouched?reset&token={server.token}", wait_until="domcontentloaded",
                  timeout=NAVIGATION_TIMEOUT_MS)
        page.locator(".jp-DirListing-item").first.wait_for(timeout=60_000)
        for path in paths:
            seen = results[path.name] = UntouchedObservation(path.name)
            served = server.root / path.name
            before = served.read_bytes()
            try:
                _open_and_close(page, server, path.name, CommittedNotebook.read(served).n_cells, settle, seen)
            except Exception as problem:  # noqa: BLE001 - reported by the test
                seen.error = f"{type(problem).__name__}: {problem}".strip()
                if screenshots is not None:  # the page as it was left
                    screenshots.mkdir(parents=True, exist_ok=True)
                    try:
                        page.screenshot(path=str(screenshots / f"{path.stem}__untouched_failed.png"))
                    except Exception:  # noqa: BLE001 - the picture is a diagnostic, the verdict stands
                        pass
                _close_everything(page)
            finally:
                server.shut_down_notebook(path.name)
            seen.changed_on_disk = served.read_bytes() != before
    finally:
        page.close()
    return results


def _main_tab(page: Any, name: str) -> Any:
    return page.locator(MAIN_TAB).filter(has=page.locator(".lm-TabBar-tabLabel", has_text=re.compile(f"^{re.escape(name)}$")))


def _open_and_close(page: Any, server: JupyterServer, name: str, n_cells: int, settle: float,
                    seen: UntouchedObservation) -> None:
    start = time.perf_counter()
    item = page.locator(".jp-DirListing-item").filter(
        has=page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$")))
    item.dblclick()
    page.wait_for_function(
        "n => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length >= n",
        arg=n_cells, timeout=60_000, polling=100)
    # Connected to a started kernel: the status bar says "<kernel> | Idle" (the toolbar's indicator says
    # idle while the kernel is still starting), and the server has the notebook's session.
    page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\|\s*Idle\s*$")).first.wait_for(timeout=60_000)
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=60_000)
    assert server.sessions_for(name), "the page shows an idle kernel but the server has no session for the notebook"
    seen.open_seconds = time.perf_counter() - start
    tab = _main_tab(page, name)
    assert tab.count() == 1, f"{tab.count()} main-area tabs are labelled {name!r}"
    seen.dirty = "jp-mod-dirty" in (tab.get_attribute("class") or "")  # changed as the kernel started
    page.wait_for_timeout(settle * 1000)
    seen.dirty = seen.dirty or "jp-mod-dirty" in (tab.get_attribute("class") or "")  # or later, not yet autosaved
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    # Closed: the tab is gone, or a dialog asks first.
    page.wait_for_function(
        "([tab, label, dialog]) => document.querySelector(dialog) !== null || ![...document.querySelectorAll(tab)]"
        ".some(t => (t.querySelector('.lm-TabBar-tabLabel') || {}).textContent === label)",
        arg=[MAIN_TAB, name, DIALOG], timeout=10_000, polling=50)
    dialog = page.locator(DIALOG)
    if dialog.count():
        seen.dialogs.append(" ".join(dialog.first.inner_text().split()))
        _answer_dialogs(page)
        _main_tab(page, name).wait_for(state="detached", timeout=10_000)


def _answer_dialogs(page: Any) -> None:
    """Answer every open dialog without saving: "Discard" where offered, else "Cancel"."""
    for _ in range(5):
        dialog = page.locator(DIALOG)
        if not dialog.count():
            return
        discard = dialog.first.locator("button.jp-mod-warn")
        (discard if discard.count() else dialog.first.locator("button.jp-mod-reject")).first.click()
        page.wait_for_timeout(100)


def _close_everything(page: Any) -> None:
    """After a failure: close every document tab without saving, so the next notebook starts alone."""
    try:
        _answer_dialogs(page)
        for _ in range(20):
            icons = page.locator(f"{MAIN_TAB} .lm-TabBar-tabCloseIcon")
            if not icons.count():
                return
            icons.first.click()
            _answer_dialogs(page)
    except Exception:  # noqa: BLE001 - best effort; the next notebook's own checks report what is left
        pass


# -- the classic Notebook: the front end of ipywidgets 7 ------------------------------------------
# JupyterLab 4's widget manager (jupyterlab_widgets 3) draws only ipywidgets 8 models: an ipywidgets
# 7 kernel's widgets fail there with "Module @jupyter-widgets/controls, version ^1.5.0 is not
# registered, however, 2.0.0 is" (measured). The front end that speaks ipywidgets 7 and that Colab's
# own package list ships (notebook 6.5.7 with widgetsnbextension 3.6.10) is the classic Notebook, so
# the Colab stand-in's kernel is driven there, from the stand-in's own environment.

# The notebooks are saved with the widget state of the ipywidgets 8 kernel that ran them (models of
# @jupyter-widgets/controls 2.x). This front end tries to restore it on opening, cannot (it knows the
# 1.x models of ipywidgets 7), and logs one error per saved model; nothing shows on the page, and Run
# All replaces every widget with a live one of the kernel's own version. Only those errors are let pass.
SAVED_STATE_ERROR = re.compile(r"Cannot find model module @jupyter-widgets/\w+@2\.\d+\.\d+")


class ClassicNotebookServer(JupyterServer):
    """``python -m notebook`` (classic Notebook 6) of another environment, on a temporary copy of ``source``.

    ``prefix`` is the environment whose ``share/jupyter`` and ``etc/jupyter`` hold the widget
    extension (the stand-in's base environment: the runtime sees its packages through a ``.pth``).
    """

    def __init__(self, base: Path, python: Path, prefix: Path, source: Path = NOTEBOOKS_DIR,
                 kernels: Callable[[Path], Any] | None = None) -> None:
        super().__init__(base, source, kernels=kernels)
        self.python = Path(python)
        self.prefix = Path(prefix)

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(JUPYTER_PATH=str(self.prefix / "share" / "jupyter"),
                   JUPYTER_CONFIG_PATH=str(self.prefix / "etc" / "jupyter"))
        return env

    def command(self) -> list[str]:
        cmd = [str(self.python), "-m", "notebook", "--no-browser", "--ip", "127.0.0.1", "--port", str(self.port),
               "--NotebookApp.port_retries=0", f"--NotebookApp.token={self.token}",
               f"--NotebookApp.notebook_dir={self.root}",
               # The classic Notebook stands in for Colab's widget front end only; Colab typesets
               # the lessons' math itself, not with this MathJax 2, so its typesetting is left out.
               "--NotebookApp.enable_mathjax=False"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/notebooks/{name}?token={self.token}"


class ClassicLessonPage(NotebookPage):
    """A notebook in the classic Notebook: Cell → Run All, then one slider moved."""

    def open_and_run_all(self, timeout: float = RUN_ALL_TIMEOUT) -> float:
        page = self.page
        page.goto(self.server.notebook_url(self.name), wait_until="domcontentloaded", timeout=NAVIGATION_TIMEOUT_MS)
        page.wait_for_function("""() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel
            && Jupyter.notebook.kernel.is_connected()
            && document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null""", timeout=60_000)
        # Count finished executions: the saved notebook already shows prompt numbers.
        page.evaluate("""() => { window.__finished = 0;
            Jupyter.notebook.events.on('finished_execute.CodeCell', () => { window.__finished += 1; }); }""")
        start = time.perf_counter()
        page.click("#celllink")
        page.click("#run_all_cells")
        try:
            page.wait_for_function("""n => window.__finished >= n
                && document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null""",
                                   arg=self.committed.n_code_cells, timeout=timeout * 1000, polling=100)
        except Exception as problem:  # noqa: BLE001 - report what the page shows
            done = page.evaluate("() => window.__finished")
            raise AssertionError(f"{self.name}: Run All did not finish within {timeout:.0f} s ({done} of "
                                 f"{self.committed.n_code_cells} cells)\nconsole: {self.console_errors[-5:]}\n{problem}") from None
        self.run_seconds = time.perf_counter() - start
        return self.run_seconds

    def problems(self) -> list[str]:
        """Errors, stderr and widgets that failed to render, as a learner would see them."""
        found = [f"[{el.get_attribute('class')}] {el.inner_text()[:800]}"
                 for el in self.page.locator(".output_area .output_error, .output_area .output_stderr").all()]
        for text in self.page.locator(".output_area").all_inner_texts():
            for marker in WIDGET_FAILURES + ("Traceback (most recent call last)",):
                if marker in text:
                    found.append(f"output contains {marker!r}: {text[:800]}")
        found += [line for line in self.console_errors
                  if ("widget" in line.lower() or "model" in line.lower()) and not SAVED_STATE_ERROR.search(line)]
        return found

    def explorer_boxes(self):
        return self.page.locator(".widget-vbox:has(> .widget-html code.explorer-status)")

    def state(self, box) -> dict[str, Any]:
        return box.evaluate("""box => {
            const status = box.querySelector(':scope > .widget-html code.explorer-status');
            const img = box.querySelector(':scope > img');
            return {status: status ? status.textContent : '', src: img ? img.getAttribute('src') : null,
                    width: img ? img.naturalWidth : 0,
                    visible: !!img && getComputedStyle(img).visibility !== 'hidden'};
        }""")

    def move_first_slider(self, box, max_presses: int = 12) -> list[str]:
        """Arrow keys on the explorer's first slider until it shows a new valid picture; the log of states."""
        handle = box.locator(".widget-slider .ui-slider-handle").first
        handle.scroll_into_view_if_needed()
        log = []
        start = self.state(box)
        key = "ArrowRight"
        for _ in range(max_presses):
            before = self.state(box)
            handle.focus()
            handle.press(key)
            deadline = time.monotonic() + WIDGET_TIMEOUT
            now = self.state(box)
            while now["status"] == before["status"] and time.monotonic() < deadline:
                self.page.wait_for_timeout(25)
                now = self.state(box)
            log.append(now["status"])
            if now["status"] == before["status"]:  # at the end of the slider: go the other way
                key = "ArrowLeft"
                continue
            if "not possible:" in now["status"] or "could not draw this:" in now["status"]:
                continue
            deadline = time.monotonic() + 5
            while (now["src"] == start["src"] or now["width"] == 0) and time.monotonic() < deadline:
                self.page.wait_for_timeout(25)
                now = self.state(box)
            log.append(f"picture {'changed' if now['src'] != start['src'] and now['width'] > 0 else 'unchanged'}")
            return log
        return log

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path


@dataclass
class ClassicObservation:
    """What one notebook showed in the classic Notebook on the Colab stand-in's kernel."""

    name: str
    committed_explorers: list[str] = field(default_factory=list)
    run_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    kernel: str | None = None  # the kernel's interpreter, when /proc shows it
    explorers: list[dict[str, Any]] = field(default_factory=list)  # each explorer's first state
    slider_log: list[str] = field(default_factory=list)  # the first explorer's first slider, moved
    problems_after_move: list[str] = field(default_factory=list)
    error: str | None = None  # the page could not be driven (timeout, missing element)


def run_classic_lessons(runtime: Any, chromium: str, folder: Path, paths: list[Path],
                        screenshots: Path | None = SCREENSHOT_DIR,
                        stop: threading.Event | None = None) -> dict[str, ClassicObservation]:
    """Every notebook in ``paths`` with the Colab stand-in's kernel in the classic Notebook.

    Opens each (one page at a time), Run All, records what a learner would see, then moves the first
    explorer's first slider by arrow keys. Runs in its own thread (``ColabSession``): it starts its own
    Playwright and Chromium, so it can go alongside the JupyterLab tests. Never raises for one notebook:
    a failure to drive a page is recorded in its observation, for the test to report.
    """
    server = ClassicNotebookServer(folder, runtime.python, runtime.base_prefix,
                                   kernels=lambda data_dir: runtime.kernelspec(data_dir, name="python3", threads=1))
    results: dict[str, ClassicObservation] = {}
    server.start()
    try:
        browser = Browser(chromium)
        try:
            for path in paths:
                if stop is not None and stop.is_set():  # the test session ended without needing these
                    break
                seen = results[path.name] = ClassicObservation(path.name)
                page = ClassicLessonPage(server, browser, path)
                seen.committed_explorers = list(page.committed.explorers)
                try:
                    seen.run_seconds = page.open_and_run_all()
                    seen.problems = page.problems()
                    if screenshots is not None and (ALL_SCREENSHOTS or seen.problems):
                        page.screenshot(screenshots / f"{path.stem}__colab_after_run_all.png")
                    commands, sessions = server.kernel_commands(), server.sessions_for(page.name)
                    if commands and sessions:
                        seen.kernel = (commands.get(sessions[0]["kernel"]["id"]) or [None])[0]
                    boxes = page.explorer_boxes()
                    seen.explorers = [page.state(boxes.nth(i)) for i in range(boxes.count())]
                    if boxes.count():
                        seen.slider_log = page.move_first_slider(boxes.first)
                        if screenshots is not None:
                            boxes.first.screenshot(path=str(screenshots / f"{path.stem}__colab_explorer0.png"))
                    seen.problems_after_move = page.problems()
                except Exception as problem:  # noqa: BLE001 - reported by the test
                    seen.error = f"{type(problem).__name__}: {problem}"
                    if screenshots is not None:
                        page.failure_picture(screenshots / f"{path.stem}__colab_failed.png")
                finally:
                    page.close()
        finally:
            browser.close()
    finally:
        server.stop()
    return results


def classic_run(chromium: str) -> Callable[[Any, Path, threading.Event], dict[str, ClassicObservation]]:
    """``run(runtime, folder, stop)`` for ``ColabSession.start_browser``: every lesson, classic Notebook."""
    return lambda runtime, folder, stop: run_classic_lessons(runtime, chromium, folder, lesson_notebooks(), stop=stop)
