"""``views.stamps`` and ``LiveTicks``: text pasted from kept pictures of itself must look like matplotlib's own text
(the same glyphs, the same size, within a pixel of the same place), follow every property it is given, and fall
back to plain text where pixels would be wrong (a vector file)."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from attn_helpers.views.labels import LiveTicks
from attn_helpers.views.stamps import StampedText, stamped_title

TEXTS = [  # (words, Text properties): a title, an explorer's note, upright and right-aligned labels
    ("8 layers joined by: x + attention(x); seed 0", dict(fontsize=12, ha="center", va="baseline")),
    ("at the output:\n RMS\n token std\n\ngradient", dict(fontsize=8, family="monospace", va="bottom",
                                                       linespacing=1.25)),
    ("layer (0 = the input)", dict(fontsize=10, rotation=90, ha="center", va="center")),
    ("1.2e-05\n0.99", dict(fontsize=9, ha="right", va="top", color="#e66101")),
]


def darkness(canvas: FigureCanvasAgg) -> np.ndarray:
    return 255 - np.asarray(canvas.buffer_rgba())[..., :3].min(axis=2).astype(float)


def picture(kind: type, text: str, props: dict) -> np.ndarray:
    figure = Figure(figsize=(5, 4), dpi=80)
    canvas = FigureCanvasAgg(figure)
    figure.add_artist(kind(0.5, 0.5, text, transform=figure.transFigure, **props))
    canvas.draw()
    return darkness(canvas)


def ink_extent(ink: np.ndarray, axis: int) -> tuple[float, int, int]:
    """Centroid, first and last inked pixel of ``ink`` along ``axis`` (0: columns, 1: rows)."""
    profile = ink.sum(axis=axis)
    where = np.nonzero(profile)[0]
    return float((np.arange(len(profile)) * profile).sum() / profile.sum()), int(where[0]), int(where[-1])


@pytest.mark.parametrize("text, props", TEXTS, ids=["title", "note", "upright", "right"])
def test_a_stamped_text_looks_like_the_text_artist(text, props):
    plain, pasted = picture(Text, text, props), picture(StampedText, text, props)
    for axis in (0, 1):
        (c_plain, a0, a1), (c_pasted, b0, b1) = ink_extent(plain, axis), ink_extent(pasted, axis)
        assert abs(c_plain - c_pasted) <= 1.0 and abs(a0 - b0) <= 1 and abs(a1 - b1) <= 1, (axis, a0, a1, b0, b1)
    assert abs(plain.sum() - pasted.sum()) / plain.sum() < 0.03  # the same glyphs at the same size


def test_a_stamped_text_follows_every_change_of_its_properties():
    figure = Figure(figsize=(4, 2), dpi=80)
    canvas = FigureCanvasAgg(figure)
    text = StampedText(0.1, 0.5, "gradient", transform=figure.transFigure, fontsize=10)
    figure.add_artist(text)
    canvas.draw()
    small = darkness(canvas).sum()
    text.set_fontsize(20)  # the font it was pasted in changes in place: no stale picture may be reused
    canvas.draw()
    assert darkness(canvas).sum() > 3 * small
    text.set_color("red")
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    inked = pixels.min(axis=2) < 128
    assert inked.sum() > 50 and (pixels[inked][:, 0] > 200).all()
    text.set_text("")
    canvas.draw()
    assert darkness(canvas).sum() == 0


def test_a_stamped_text_is_plain_text_in_a_vector_file():
    figure = Figure(figsize=(3, 2))
    figure.add_artist(StampedText(0.5, 0.5, "token std", transform=figure.transFigure))
    out = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):
        figure.savefig(out, format="svg")
    assert ">token std<" in out.getvalue() and "<image" not in out.getvalue()


def test_a_stamped_title_stands_where_matplotlib_puts_the_title():
    pictures = []
    for stamped in (False, True):
        figure = Figure(figsize=(5, 3), dpi=80)
        canvas = FigureCanvasAgg(figure)
        ax = figure.add_axes((0.1, 0.1, 0.8, 0.7))
        ax.set_axis_off()
        if stamped:
            stamped_title(ax).set_text("4 layers joined by: nothing added")
        else:
            ax.set_title("4 layers joined by: nothing added")
        canvas.draw()
        pictures.append(darkness(canvas))
    for axis in (0, 1):
        (c0, a0, a1), (c1, b0, b1) = ink_extent(pictures[0], axis), ink_extent(pictures[1], axis)
        assert abs(c0 - c1) <= 1.0 and abs(a0 - b0) <= 1 and abs(a1 - b1) <= 1


@pytest.mark.parametrize("depth", [1, 7, 32])
def test_live_ticks_stand_where_matplotlibs_ticks_stand(depth):
    pictures = []
    for live in (False, True):
        figure = Figure(figsize=(5, 3), dpi=80)
        canvas = FigureCanvasAgg(figure)
        ax = figure.add_axes((0.15, 0.3, 0.8, 0.6))
        ax.set_yticks([])
        ax.set_xlim(-0.5, depth + 0.5)
        if live:
            LiveTicks(ax, MaxNLocator(integer=True)).set_range(-0.5, depth + 0.5)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlabel("layer (0 = the input)")
        canvas.draw()
        pictures.append(darkness(canvas))
    plain, live = pictures
    frame_bottom = 240 - int(0.3 * 240)  # rows top first: the axes end at row 168
    below, inside = np.s_[frame_bottom + 2:, :], np.s_[20:frame_bottom - 2, 64:375]
    assert abs(plain[below].sum() - live[below].sum()) / plain[below].sum() < 0.03  # marks, labels, axis label
    for axis in (0, 1):
        (c0, a0, a1), (c1, b0, b1) = ink_extent(plain[below], axis), ink_extent(live[below], axis)
        assert abs(c0 - c1) <= 1.0 and abs(a0 - b0) <= 1 and abs(a1 - b1) <= 1
    # the grid lines: the same columns, as dark
    columns_plain, columns_live = plain[inside].sum(axis=0), live[inside].sum(axis=0)
    assert np.array_equal(np.nonzero(columns_plain > 100)[0], np.nonzero(columns_live > 100)[0])
    assert np.allclose(columns_plain, columns_live, rtol=0.1, atol=30)


def test_two_stamped_halves_of_a_two_line_title_stand_as_the_whole_title():
    """An explorer keeps the line that did not change: "first\\n" and "\\nsecond" pasted at one anchor lay out as
    "first\\nsecond" does (each half keeps the other's line, empty, in its layout)."""
    pictures = []
    for halves in (["pair 2, θ = 0.1\napart 17°, term +1.18"], ["pair 2, θ = 0.1\n", "\napart 17°, term +1.18"]):
        figure = Figure(figsize=(4, 2), dpi=80)
        canvas = FigureCanvasAgg(figure)
        for half in halves:
            figure.add_artist(StampedText(0.5, 0.3, half, fontsize=9, ha="center", va="baseline",
                                          transform=figure.transFigure))
        canvas.draw()
        pictures.append(darkness(canvas))
    whole, halves = pictures
    for axis in (0, 1):
        (c0, a0, a1), (c1, b0, b1) = ink_extent(whole, axis), ink_extent(halves, axis)
        assert abs(c0 - c1) <= 1.0 and abs(a0 - b0) <= 1 and abs(a1 - b1) <= 1
    assert abs(whole.sum() - halves.sum()) / whole.sum() < 0.03


def test_live_ticks_take_the_ticks_they_are_given_and_draw_no_grid_when_asked():
    figure = Figure(figsize=(4, 2), dpi=80)
    ax = figure.add_axes((0.1, 0.3, 0.8, 0.6))
    ax.set_xlim(-0.5, 19.5)
    ticks = LiveTicks(ax, grid=False, fontsize=7.0)
    assert list(ticks.set_ticks([0, 19])) == [0, 19]
    assert [i for i, t in enumerate(ticks.labels.texts) if t] == [0, 19] and ticks.labels.texts[19] == "19"
    assert list(ticks.marks.get_xdata()) == [0, 19] and ticks.labels.fontsize == 7.0
    assert not ticks.grid.get_visible()
