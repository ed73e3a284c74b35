"""The browser tests' judges of a learner's screen, without a browser: a picture too coarse for device scale 2 or
without a description, a transparent picture or a text under 4.5:1 in a theme, and the keys an explorer's caption
names (``tools/browser_support.py``, ``tools/notebook7.py``)."""

from __future__ import annotations

import pytest

from attn_helpers.widgets._base import KEYS_CAPTION
from tools.browser_support import contrast_ratio, picture_problems, theme_problems
from tools.notebook7 import HANDLE_KEYS, keys_named


def row(kind="figure", natural=1800, shown=900.0, description="Heatmap of ...", hidden=False):
    return {"kind": kind, "naturalWidth": natural, "shownWidth": shown, "hidden": hidden, "description": description}


def test_a_picture_needs_two_pixels_per_css_pixel_and_a_description():
    assert picture_problems([row(), row("explorer", 1860, 930.0)]) == []
    soft, bare, default = row(natural=900), row(description=" "), row(description="A figure without a description")
    problems = picture_problems([soft, bare, default, row("explorer", 930, 930.0, hidden=True)])
    assert len(problems) == 3 and "900 px shown 900 CSS px" in problems[0], problems
    assert "figure 1: no description" in problems[1] and "figure 2: no description" in problems[2]


def test_contrast_is_wcags():
    assert contrast_ratio((0, 0, 0, 1), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast_ratio((255, 255, 255, 1), (17, 17, 17)) == pytest.approx(18.9, abs=0.05)  # JupyterLab Dark
    assert contrast_ratio((0, 0, 0, 0.87), (255, 255, 255)) == pytest.approx(16.1, abs=0.05)  # JupyterLab Light


def test_a_transparent_picture_or_dim_text_in_a_theme_is_a_problem():
    dark = (17, 17, 17, 1)
    text = {"explorer": 0, "tag": "code", "cls": "explorer-status", "text": "a=1", "colour": (255, 255, 255, 1),
            "background": dark, "bar": (245, 124, 0, 1)}
    fine = {"pictures": [{"kind": "figure", "width": 900, "least": 255, "transparent": 0}], "texts": [text]}
    assert theme_problems(fine) == []
    glass = {"pictures": [{"kind": "explorer", "width": 900, "least": 0, "transparent": 5}],
             "texts": [dict(text, colour=(0, 0, 0, 0.87), bar=(60, 30, 0, 1))]}
    problems = theme_problems(glass)
    assert len(problems) == 3 and "not opaque" in problems[0] and ":1" in problems[1] and "bar" in problems[2]


def test_the_explorers_caption_names_the_keys_that_reach_a_handle_in_notebook7():
    assert keys_named(KEYS_CAPTION) == HANDLE_KEYS
    assert keys_named("drag the handle") == ()
