"""Every picture of a lesson as a learner sees it in JupyterLab: its displayed size and its smallest text.

Used by ``tests/notebooks/test_browser.py`` on each notebook's page after Run All (``LabRun``). Two halves
meet by the picture's pixels:

* the kernel's record (``tools/figure_probe.py``, installed in every kernel of the browser run): each
  picture matplotlib rendered, with the font size of its smallest text in the picture's own pixels;
* the page (:func:`measure`): every static figure (an ``image/png`` output) and every explorer's picture,
  its natural size, the width it is shown at, and the SHA-256 of its RGB pixels, decoded by the browser.

Smallest text as displayed = smallest text in the picture's pixels x (shown width / natural width).
A picture whose pixels match no record cannot be measured and is reported as such.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.figure_probe import read_records, records_folder

SMALLEST_TEXT_PX = 8.0  # issue 31: no text below 8 px as displayed

# In the page: every static figure and every explorer's picture in the notebook, in order, each
# scrolled into view (the notebook skips laying out cells off screen), with its pixels' hash.
MEASURE_JS = r"""async ([staticSel, explorerSel]) => {
    const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
    const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
    const cells = [...nb.querySelectorAll('.jp-Cell')];
    const found = [...nb.querySelectorAll(staticSel + ', ' + explorerSel)];
    const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const rows = [];
    for (const img of found) {
        const box = img.closest('.widget-vbox');
        const explorer = img.matches(explorerSel);
        img.scrollIntoView({block: 'start'});
        await frames();
        if (!img.complete) await img.decode().catch(() => null);
        const rect = img.getBoundingClientRect();
        let hash = null;
        if (img.naturalWidth > 0) {
            const canvas = document.createElement('canvas');
            canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
            const ctx = canvas.getContext('2d', {willReadFrequently: true});
            ctx.drawImage(img, 0, 0);
            const rgba = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
            const rgb = new Uint8Array(rgba.length / 4 * 3);
            for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
                rgb[j] = rgba[i]; rgb[j + 1] = rgba[i + 1]; rgb[j + 2] = rgba[i + 2];
            }
            const digest = await crypto.subtle.digest('SHA-256', rgb);
            hash = [...new Uint8Array(digest)].map(b => b.toString(16).padStart(2, '0')).join('');
        }
        // An explorer's box, from its controls to the bottom of its picture (the shape table below it
        // may scroll); the notebook's visible height is what a learner has for it.
        let boxHeight = null;
        if (explorer && box) boxHeight = rect.bottom - box.getBoundingClientRect().top;
        const cell = img.closest('.jp-Cell');
        rows.push({explorer, cell: cells.indexOf(cell), naturalWidth: img.naturalWidth,
                   naturalHeight: img.naturalHeight, shownWidth: rect.width, shownHeight: rect.height,
                   hash, boxHeight, visibleHeight: outer.clientHeight});
    }
    return rows;
}"""


@dataclass
class Figure:
    """One picture of a notebook, measured on the page and in the kernel's record."""

    notebook: str
    label: str  # "figure 2 (cell 22)" or "explorer 0 HeadsExplorer (cell 63)"
    explorer: bool
    natural: tuple[int, int]
    shown_width: float
    box_height: float | None  # explorers: controls + status line + picture, CSS px
    visible_height: float  # the notebook's visible height, CSS px
    record: dict[str, Any] | None  # the kernel's record of these pixels, None if there is none

    @property
    def scale(self) -> float:
        return self.shown_width / self.natural[0] if self.natural[0] else 0.0

    @property
    def smallest_px(self) -> float | None:
        """The smallest text's font size in the picture's own pixels (None: not measured)."""
        return None if self.record is None or self.record.get("smallest_px") is None else self.record["smallest_px"]

    @property
    def smallest_shown(self) -> float | None:
        px = self.smallest_px
        return None if px is None else px * self.scale

    @property
    def smallest_text(self) -> str:
        return self.record["smallest"][0][1] if self.record and self.record.get("smallest") else ""

    def problem(self) -> str | None:
        """Why this picture fails the text-size bar, or None."""
        if self.record is None:
            return f"{self.notebook} {self.label}: no kernel record of its pixels: its text cannot be measured"
        if self.record.get("n_texts", 0) == 0:
            return None  # a picture without text (nothing to read)
        if self.smallest_shown < SMALLEST_TEXT_PX:
            return (f"{self.notebook} {self.label}: smallest text {self.smallest_shown:.1f} px as displayed "
                    f"({self.smallest_px:.1f} px in the {self.natural[0]}-px picture shown {self.shown_width:.0f} px "
                    f"wide, {self.scale:.0%}): {self.smallest_text!r}")
        return None

    def fits(self) -> bool:
        return self.box_height is None or self.box_height <= self.visible_height

    def row(self) -> list[str]:
        shown = "-" if self.smallest_shown is None else f"{self.smallest_shown:.1f}"
        return [self.notebook, self.label, f"{self.natural[0]}x{self.natural[1]}", f"{self.shown_width:.0f}",
                f"{self.scale:.0%}", "-" if self.smallest_px is None else f"{self.smallest_px:.1f}", shown,
                self.smallest_text[:28],
                "" if self.box_height is None else f"{self.box_height:.0f}/{self.visible_height:.0f}"]


HEADER = ["notebook", "figure", "natural px", "shown px", "scale", "smallest text px", "as displayed", "that text",
          "explorer box / visible height"]


def measure(lesson: Any, static_selector: str, explorer_selector: str) -> list[Figure]:
    """Every picture of the notebook open on ``lesson`` (a ``LessonPage``), measured on the page and matched
    with its kernel's record."""
    rows = lesson.page.evaluate(MEASURE_JS, [static_selector, explorer_selector])
    records = read_records(records_folder(lesson.server.base))
    explorers = list(lesson.committed.explorers)
    figures, n_static, n_explorer = [], 0, 0
    for row in rows:
        if row["explorer"]:
            name = explorers[n_explorer] if n_explorer < len(explorers) else "?"
            label = f"explorer {n_explorer} {name} (cell {row['cell']})"
            n_explorer += 1
        else:
            label = f"figure {n_static} (cell {row['cell']})"
            n_static += 1
        figures.append(Figure(lesson.name, label, row["explorer"], (row["naturalWidth"], row["naturalHeight"]),
                              row["shownWidth"], row["boxHeight"], row["visibleHeight"], records.get(row["hash"])))
    return figures


def table(figures: list[Figure]) -> str:
    """The figures as a plain-text table, columns padded."""
    lines = [HEADER] + [f.row() for f in figures]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


# What this test session measured, by notebook (the browser run's threads write, the tests read).
MEASURED: dict[str, list[Figure]] = {}
_lock = threading.Lock()


def keep(name: str, figures: list[Figure]) -> None:
    with _lock:
        MEASURED[name] = figures


def write_table(path: Path, order: list[str]) -> str:
    """Every notebook measured in this session, in ``order``, as one table written to ``path``; returns it."""
    with _lock:
        figures = [f for name in order for f in MEASURED.get(name, [])]
    text = table(figures) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def screenshot_first_picture(lesson: Any, path: Path, selector: str, margin: int = 40,
                             shoot: Callable[[Any, Path], Any] | None = None) -> Path:
    """The screen a learner sees at the lesson's first figure or explorer (the top if it has none); ``shoot(page,
    path)`` takes the picture (default: Playwright's screenshot)."""
    lesson.page.evaluate("""([selector, margin]) => {
        const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
        const first = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook')
                              .querySelector(selector);
        if (!first) { outer.scrollTop = 0; return; }
        const target = first.closest('.widget-vbox:has(> .widget-html code.explorer-status)') || first;
        target.scrollIntoView({block: 'start'});
        outer.scrollTop = Math.max(0, outer.scrollTop - margin);
    }""", [selector, margin])
    lesson.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 100))))")
    path.parent.mkdir(parents=True, exist_ok=True)
    if shoot is not None:
        shoot(lesson.page, path)
    else:
        lesson.page.screenshot(path=str(path))
    return path
