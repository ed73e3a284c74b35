"""``TokenLabels``: an explorer's token labels pasted as kept pictures of text must look like the text artists
they replace (the same words, the same size, standing in the same place) and follow the rc style."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

from attn_helpers.views.labels import TokenLabels, _text_column, _text_row
from attn_helpers.views.stamps import text_stamp

WORDS = "the cat sat on the mat because it was warm and the".split()


def panel(n: int) -> tuple[FigureCanvasAgg, object]:
    figure = Figure(figsize=(4, 4), dpi=80)
    ax = figure.add_axes((0.3, 0.3, 0.6, 0.6))
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    return FigureCanvasAgg(figure), ax


def ink_runs(darkness: np.ndarray, axis: int) -> list[tuple[float, int, int]]:
    """Each separate run of ink along ``axis``: (centroid, first, last pixel)."""
    profile = darkness.sum(axis=axis)
    runs, start = [], None
    for i, value in enumerate(np.append(profile, 0)):
        if value > 0 and start is None:
            start = i
        elif value == 0 and start is not None:
            where = np.arange(start, i)
            runs.append((float((where * profile[start:i]).sum() / profile[start:i].sum()), start, i - 1))
            start = None
    return runs


@pytest.mark.parametrize("vertical", [False, True])
@pytest.mark.parametrize("fontsize", [6.0, 8.5, 10.0])
def test_pasted_labels_stand_where_the_text_artists_stand(vertical, fontsize):
    pictures = []
    for pasted in (False, True):
        canvas, ax = panel(len(WORDS))
        if pasted:
            TokenLabels(ax, "x").set_labels(WORDS, fontsize, vertical)
            TokenLabels(ax, "y").set_labels(WORDS, fontsize)
        else:
            _text_row(ax, WORDS, fontsize, vertical)
            _text_column(ax, WORDS, fontsize)
        canvas.draw()
        pictures.append(255 - np.asarray(canvas.buffer_rgba())[..., :3].min(axis=2).astype(float))
    text, pasted = pictures
    below, left = np.s_[226:, :], np.s_[:226, :94]  # the panel spans x 96-288 and rows 32-224 (top first)
    # every label: the same run of ink, its centre within a pixel (a paste lands on whole pixels)
    for region, axis in ((below, 0), (left, 1)):
        runs_text, runs_pasted = ink_runs(text[region], axis), ink_runs(pasted[region], axis)
        assert len(runs_text) == len(runs_pasted) >= 3
        for (c_text, a0, a1), (c_pasted, b0, b1) in zip(runs_text, runs_pasted):
            assert abs(c_text - c_pasted) <= 1.0 and abs(a0 - b0) <= 1 and abs(a1 - b1) <= 1
    assert abs(text.sum() - pasted.sum()) / text.sum() < 0.03  # as much ink: the same glyphs at the same size


def test_a_label_is_drawn_anew_in_another_style():
    canvas, ax = panel(3)
    labels = TokenLabels(ax, "y")
    labels.set_labels(["the", "cat", "sat"], 9.0)
    canvas.draw()
    black = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    with plt.rc_context({"text.color": "red"}):
        canvas.draw()
        red = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    inked = black.min(axis=2) < 100
    inked[:, 90:] = False  # the labels only, left of the panel (its frame stays black)
    assert inked.sum() > 50
    assert (red[inked][:, 0] > 200).all() and (red[inked][:, 1] < 100).all()  # no black stamp kept for red text


def test_token_labels_name_their_side_and_handle_blank_words():
    canvas, ax = panel(2)
    with pytest.raises(ValueError, match="side must be 'x' or 'y', got 'z'"):
        TokenLabels(ax, "z")
    assert text_stamp(" ", FontProperties(size=9.0), 80.0, ha="right")[0].size == 0  # no ink, nothing pasted
    TokenLabels(ax, "x").set_labels([" ", " "], 9.0)
    canvas.draw()
    below = np.asarray(canvas.buffer_rgba())[230:, :, :3]  # under the panel, whose frame ends at row 224
    assert (below == 255).all()  # blank words leave the ground untouched
