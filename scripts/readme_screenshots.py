"""Regenerate the README's pictures of the series in JupyterLab: docs/images/*.png.

Opens the notebooks in real JupyterLab in headless Chromium (the browser tests' machinery,
``tools/browser_support.py``), runs them, and saves three crops:

* ``docs/images/heads_explorer.png`` — the multi-head explorer: its sliders, status line and the
  heads' attention heatmaps (the shape table under it is left out);
* ``docs/images/heads_eight.png`` — the same explorer at num_heads=8, chan=32, tokens=12: eight
  heads of head_dim 4, each with its own pattern;
* ``docs/images/heatmap_cell.png`` — a lesson cell and its heatmap, as a learner sees it.

Each is kept under 150 KB (colours reduced if needed).

    .venv/bin/python -m scripts.readme_screenshots   # from the repository's root

Needs Chromium (env CHROMIUM, else chromium-headless-shell or chromium: see tools/browser_support.find_chromium).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from tools.browser_support import (
    NOTEBOOKS_DIR,
    Browser,
    ExplorerView,
    JupyterServer,
    LessonPage,
    find_chromium,
    with_tempdir,
)

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "images"
MAX_BYTES = 150_000
EXPLORER_NOTEBOOK = "05_multi_head.ipynb"
HEATMAP_NOTEBOOK = "00_orientation.ipynb"
HEATMAP_CELL_MARKER = "plotting.heatmap("  # the first code cell containing this, with its picture


def save_small(png: bytes, path: Path) -> None:
    """Write ``png``; if it is over the budget, with fewer colours (a screenshot has few anyway)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    if len(png) > MAX_BYTES:
        image = Image.open(io.BytesIO(png)).convert("RGB")
        for colours in (256, 128, 64):
            buffer = io.BytesIO()
            image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(buffer, "PNG", optimize=True)
            png = buffer.getvalue()
            if len(png) <= MAX_BYTES:
                break
    path.write_bytes(png)
    print(f"{path.relative_to(REPO)}: {len(png) / 1000:.0f} KB")


def explorer_picture(explorer: ExplorerView, with_image: bool = True) -> bytes:
    """The explorer's own box (controls, status line, optionally its picture) without its shape
    table: the table (and the picture) are hidden for the moment of the screenshot."""
    explorer.box.evaluate("""(box, withImage) => {
        for (const c of box.children) {
            const table = c.classList.contains('widget-html') && !c.querySelector('code.explorer-status');
            if (table || (!withImage && c.matches('img'))) { c.dataset.hiddenForShot = c.style.display; c.style.display = 'none'; }
        }
        box.dataset.paddingBefore = box.style.padding;
        box.style.padding = '6px';
    }""", with_image)
    try:
        return explorer.box.screenshot()
    finally:
        explorer.box.evaluate("""box => {
            for (const c of box.children) if ('hiddenForShot' in c.dataset) {
                c.style.display = c.dataset.hiddenForShot; delete c.dataset.hiddenForShot; }
            box.style.padding = box.dataset.paddingBefore;
        }""")


def heads_pictures(server: JupyterServer, browser: Browser) -> None:
    lesson = LessonPage(server, browser, NOTEBOOKS_DIR / EXPLORER_NOTEBOOK)
    try:
        lesson.open_and_run_all()
        explorer = next(e for e in lesson.explorers() if e.class_name == "HeadsExplorer")
        lesson.page.evaluate("() => document.activeElement && document.activeElement.blur()")
        save_small(explorer_picture(explorer), OUT / "heads_explorer.png")

        explorer.set_slider("chan", 32)
        explorer.set_slider("tokens", 12)
        state = explorer.set_slider("num_heads", 8)
        assert "head_dim = 32 // 8 = 4" in state.status, state.status
        explorer.wait_for_image(None)
        lesson.page.evaluate("() => document.activeElement && document.activeElement.blur()")
        save_small(explorer_picture(explorer), OUT / "heads_eight.png")
    finally:
        lesson.close()


def heatmap_picture(server: JupyterServer, browser: Browser) -> None:
    import nbformat

    path = NOTEBOOKS_DIR / HEATMAP_NOTEBOOK
    cells = nbformat.read(path, as_version=4).cells
    index = next(i for i, c in enumerate(cells) if c.cell_type == "code" and HEATMAP_CELL_MARKER in c.source
                 and any("<img" in "".join(o.get("data", {}).get("text/html", ""))
                         for o in c.get("outputs", [])))
    lesson = LessonPage(server, browser, path)
    try:
        lesson.open_and_run_all()
        cell = lesson.notebook.locator(".jp-Cell").nth(index)
        cell.evaluate("c => c.scrollIntoView({block: 'start'})")
        # Click outside the notebook so no cell shows the blue "active" bar.
        lesson.page.evaluate("() => document.activeElement && document.activeElement.blur()")
        lesson.page.wait_for_timeout(300)
        save_small(cell.screenshot(), OUT / "heatmap_cell.png")
    finally:
        lesson.close()


def main() -> int:
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium found: set CHROMIUM or install Debian's chromium", file=sys.stderr)
        return 2
    with with_tempdir() as tmp, JupyterServer(Path(tmp)) as server:
        browser = Browser(chromium, width=1100, height=1400)
        try:
            heads_pictures(server, browser)
            heatmap_picture(server, browser)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
