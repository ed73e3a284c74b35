"""Every static figure of the committed notebooks is sharp, described and fits the output column.

A figure (an output whose ``text/plain`` is matplotlib's ``<Figure size ...>``) must be what
``attn_helpers/views/display.py`` makes of it: one ``text/html`` ``<img>`` holding a PNG with twice the pixels of its
``width``/``height`` (sharp at device scale 2), an ``alt`` that describes it (not the placeholder of a figure nothing
described), and a width at most the 914 px that JupyterLab gives an HTML output at 1366x768 with the file browser
open (measured by the browser test; a wider figure is shrunk, and its text with it). No ``image/png`` copy is kept.
The explorers' pictures are the widgets' own business (tests/notebooks/test_static_html.py).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest

from tools.browser_support import lesson_notebooks

# JupyterLab's output column at 1366x768, file browser open, is 934 px; an HTML output has 20 px of right padding
# (.jp-RenderedHTMLCommon), so a figure shown as HTML gets 914 (measured: a 929-px figure was shown 914 px wide).
OUTPUT_COLUMN_PX = 914
UNDESCRIBED = "A figure without a description"  # attn_helpers.views.display.UNDESCRIBED (no matplotlib import here)
IMG = re.compile(r'^<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" width="(\d+)" height="(\d+)" alt="([^"]*)"/>$')


def text(data: dict, mime: str) -> str:
    value = data.get(mime, "")
    return "".join(value) if isinstance(value, list) else value


def figure_problems(nb: nbformat.NotebookNode) -> tuple[list[str], list[str]]:
    """What is wrong with each figure output of ``nb``, and each figure's description."""
    problems, descriptions = [], []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if not text(data, "text/plain").startswith("<Figure size"):
                continue
            where = f"cell {index} ({cell.get('id')})"
            if "image/png" in data:
                problems.append(f"{where}: an image/png figure (the inline backend's, 1x, without a description)")
            match = IMG.match(text(data, "text/html").strip())
            if not match:
                problems.append(f"{where}: no <img> of views.display in text/html: {text(data, 'text/html')[:80]!r}")
                continue
            png = base64.b64decode(match.group(1))
            width, height = int(match.group(2)), int(match.group(3))
            pixels = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
            alt = match.group(4)
            descriptions.append(alt)
            if pixels[0] - 2 * width not in (0, 1) or pixels[1] - 2 * height not in (0, 1):
                problems.append(f"{where}: a {pixels[0]}x{pixels[1]} PNG shown at {width}x{height}: not 2x")
            if width > OUTPUT_COLUMN_PX:
                problems.append(f"{where}: {width} px wide, the output column is {OUTPUT_COLUMN_PX} px "
                                f"(shown at {OUTPUT_COLUMN_PX / width:.0%})")
            if not alt.strip() or alt.startswith(UNDESCRIBED):
                problems.append(f"{where}: no description (alt {alt[:80]!r}): describe it where it is drawn, "
                                f"views.describe_figure(fig, ...)")
    return problems, descriptions


@pytest.mark.parametrize("path", lesson_notebooks(), ids=lambda p: p.name)
def test_every_figure_is_sharp_described_and_fits(path: Path):
    problems, _ = figure_problems(nbformat.read(path, as_version=4))
    assert not problems, (f"{path.name}: figures that are not sharp, described and narrow enough (regenerate with "
                          f"`make notebooks NB=notebooks/{path.name}`):\n" + "\n".join(problems))


def test_the_check_refuses_an_undescribed_a_wide_and_a_1x_figure():
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (2000).to_bytes(4, "big")
                           + (600).to_bytes(4, "big")).decode()
    def figure(html: str, **extra) -> dict:
        return nbformat.v4.new_output("display_data", data={"text/plain": "<Figure size 1000x300 with 1 Axes>",
                                                             "text/html": html, **extra})
    good = f'<img src="data:image/png;base64,{png}" width="1000" height="300" alt="Bars: 3 of 4 above 0.5."/>'
    outputs = [figure(good.replace("1000", "900").replace('alt="Bars', 'alt="' + UNDESCRIBED)),
               figure(good), figure(good.replace('width="1000"', 'width="2000"').replace("1000", "900"),
                                    **{"image/png": png})]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plt.show()", outputs=outputs)])
    problems, descriptions = figure_problems(nb)
    assert len(descriptions) == 3
    assert any("no description" in p for p in problems)
    assert any("1000 px wide" in p for p in problems)
    assert any("image/png figure" in p for p in problems) and any("not 2x" in p for p in problems)
