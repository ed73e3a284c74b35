"""Kernel side of the figure-size test: what matplotlib drew into each picture, recorded as it is drawn.

Run inside a notebook's kernel (the browser run installs it as an IPython startup file, see
:func:`startup_code`), :func:`install` wraps four methods of matplotlib's Agg backend, only observing:

* ``RendererAgg.draw_text``: every piece of text drawn, with its font size in the picture's pixels
  (``points * dpi / 72``; for mathtext the smallest glyph, e.g. an exponent, from matplotlib's own parse);
* ``FigureCanvasAgg.draw``: a full draw starts the canvas's list of texts anew (and is kept as the
  background's texts); ``restore_region`` (an explorer's blit) puts that list back;
* ``FigureCanvasAgg.buffer_rgba``: the pixels are final (the inline backend encodes them as the
  figure's PNG, an explorer as its picture): one record of the picture, keyed by the SHA-256 of its
  RGB pixels, which the page computes again from the image it shows.

Every picture the kernel's matplotlib renders is thus recorded without a table typed by hand, and a
picture on the page whose pixels match no record cannot be measured (the test fails on it).
Records go to ``<folder>/<pid>.jsonl``, one JSON object a line. Nothing here imports at module level
but the standard library, so the test process can import it cheaply.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

ENABLED = "_attn_probe_installed"


def smallest_texts(texts: list[tuple[float, str]], count: int = 1) -> list[tuple[float, str]]:
    """The ``count`` smallest of ``(px, text)`` pairs, smallest first."""
    return sorted(texts, key=lambda t: t[0])[:count]


def text_px(renderer: Any, s: str, prop: Any, ismath: Any) -> float:
    """The font size of ``s`` as drawn by ``renderer``, in the picture's pixels (its smallest glyph for mathtext)."""
    points = prop.get_size_in_points()
    if ismath and ismath != "TeX":
        from matplotlib.mathtext import MathTextParser

        # the "path" parse lists every glyph as (font, size in points, ...) on matplotlib 3.10 and 3.11 alike
        parse = MathTextParser("path").parse(s, renderer.dpi, prop)
        sizes = [glyph[1] for glyph in parse.glyphs]
        points = min(sizes) if sizes else points
    return points * renderer.dpi / 72.0


def shows_text(renderer: Any, s: str, x: float, y: float) -> bool:
    """Whether text ``s`` anchored at display ``(x, y)`` is visible text on ``renderer``'s canvas."""
    return bool(s and s.strip()) and -1 <= x <= renderer.width + 1 and -1 <= y <= renderer.height + 1


def install(folder: str | os.PathLike[str]) -> None:
    """Wrap matplotlib's Agg backend in this process so that every rendered picture is recorded in ``folder``."""
    import numpy as np
    from matplotlib.backends import backend_agg

    renderer_cls, canvas_cls = backend_agg.RendererAgg, backend_agg.FigureCanvasAgg
    if getattr(canvas_cls, ENABLED, False):
        return
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    out = target / f"{os.getpid()}.jsonl"
    session = os.environ.get("JPY_SESSION_NAME", "")
    seen: set[str] = set()
    draw_text, draw, restore_region, buffer_rgba = (renderer_cls.draw_text, canvas_cls.draw,
                                                    canvas_cls.restore_region, canvas_cls.buffer_rgba)

    def texts_of(renderer: Any) -> list[tuple[float, str]]:
        return renderer.__dict__.setdefault("_attn_texts", [])

    def recording_draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if shows_text(self, s, x, y):
            texts_of(self).append((text_px(self, s, prop, ismath), s))
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def recording_draw(self):
        texts_of(self.get_renderer()).clear()
        result = draw(self)
        self._attn_background_texts = list(texts_of(self.renderer))
        return result

    def recording_restore_region(self, region, bbox=None, xy=None):
        result = restore_region(self, region, bbox, xy)
        renderer = self.get_renderer()
        renderer._attn_texts = list(getattr(self, "_attn_background_texts", []))
        return result

    def recording_buffer_rgba(self):
        buffer = buffer_rgba(self)
        try:
            pixels = np.asarray(buffer)
            digest = hashlib.sha256(np.ascontiguousarray(pixels[..., :3]).tobytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                texts = texts_of(self.renderer)
                smallest = smallest_texts(texts, 3)
                record = {"sha256": digest, "width": int(pixels.shape[1]), "height": int(pixels.shape[0]),
                          "dpi": float(self.figure.dpi), "n_texts": len(texts),
                          "smallest_px": smallest[0][0] if smallest else None,
                          "smallest": [[round(px, 2), s[:60]] for px, s in smallest], "session": session}
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
        except Exception:  # noqa: BLE001 - an observer must never break a learner's figure
            pass
        return buffer

    renderer_cls.draw_text = recording_draw_text
    canvas_cls.draw = recording_draw
    canvas_cls.restore_region = recording_restore_region
    canvas_cls.buffer_rgba = recording_buffer_rgba
    setattr(canvas_cls, ENABLED, True)


def read_records(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Every record written to ``folder`` so far, by pixel hash."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    record = json.loads(line)
                except ValueError:  # a line being written right now
                    continue
                found[record["sha256"]] = record
    return found


def startup_code(folder: str | os.PathLike[str]) -> str:
    """An IPython startup file that installs this probe, writing to ``folder``, without leaving a name behind."""
    return ("def _attn_figure_probe():\n"
            "    import runpy\n"
            f"    runpy.run_path({str(Path(__file__).resolve())!r})['install']({str(folder)!r})\n"
            "_attn_figure_probe()\n"
            "del _attn_figure_probe\n")


def records_folder(server_base: str | os.PathLike[str]) -> Path:
    """Where the kernels of a server whose temporary folder is ``server_base`` write their records."""
    return Path(server_base) / "figure-records"
