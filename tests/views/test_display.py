"""How a figure is shown (attn_helpers/views/display.py): one <img>, PNG at 2x its shown size, alt = its description."""

from __future__ import annotations

import base64
import html
import re
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attn_helpers import views  # noqa: E402
from attn_helpers.views import display  # noqa: E402

IMG = re.compile(r'^<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" width="(\d+)" height="(\d+)" alt="([^"]*)"/>$')


def parts(fig: Figure) -> tuple[tuple[int, int], tuple[int, int], str]:
    match = IMG.match(display.figure_html(fig))
    assert match, display.figure_html(fig)[:100]
    png = base64.b64decode(match.group(1))
    pixels = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    return pixels, (int(match.group(2)), int(match.group(3))), html.unescape(match.group(4))


def test_a_figure_is_one_img_with_twice_its_pixels_and_its_description():
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.plot([0, 1, 2], [0, 1, 4])
    views.describe_figure(fig, "A curve from 0 to 4, with \"quotes\" & an ampersand.")
    pixels, shown, alt = parts(fig)
    assert pixels[0] - 2 * shown[0] in (0, 1) and pixels[1] - 2 * shown[1] in (0, 1), (pixels, shown)
    assert 200 < shown[0] <= 300  # the tight box of a 3-inch figure at 100 dpi: its 1x size
    assert alt == 'A curve from 0 to 4, with "quotes" & an ampersand.'
    plt.close(fig)


def test_views_panels_describe_themselves_from_their_data_after_the_lessons_sentence():
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    weights = np.array([[1.0, 0.0, 0.0], [0.7, 0.3, 0.0], [0.2, 0.1, 0.7]])
    image = views.heatmap(weights, ["a", "b", "c"], ax=axes[0], title="w", colorbar=False)
    views.heatmap(-weights, ["a", "b", "c"], ax=axes[1], title="minus w", colorbar=False)
    views.describe_figure(fig, "Two panels.")
    alt = display.figure_description(fig)
    assert alt.startswith("Two panels. Heatmap 'w': 3 query rows by 3 key columns, values 0.00 to 1.00; "
                          "largest in each row: 'a' to 'a' (1.00), 'b' to 'a' (0.70), 'c' to 'c' (0.70)."), alt
    assert "Heatmap 'minus w'" in alt and "values -1.00 to 0.00" in alt
    image.set_data(weights[::-1].copy())  # the description is written when shown: after set_data too
    assert "'a' to 'c' (0.70)" in display.figure_description(fig)
    plt.close(fig)


def test_a_figure_nothing_described_says_so_with_its_titles():
    fig, ax = plt.subplots()
    ax.set_title("a title")
    assert parts(fig)[2] == f"{display.UNDESCRIBED} (its titles: a title)"
    plt.close(fig)


def test_large_square_matrices_are_described_by_their_pattern_and_blank_cells_counted():
    causal = np.tril(np.ones((10, 10)))
    weights = np.where(causal > 0, causal / causal.sum(-1, keepdims=True), np.nan)
    weights[np.arange(10), np.arange(10)] += 0.5
    text = display.matrix_sentence(weights, title="t")
    assert "10 query rows by 10 key columns" in text and "45 cells blank" in text
    assert "of the 10 rows, the largest value is on the diagonal in 10." in text, text


def test_bad_arguments_are_named():
    fig = plt.figure()
    with pytest.raises(ValueError, match="text must be a non-empty sentence"):
        views.describe_figure(fig, "  ")
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure or Axes, got str"):
        views.describe_figure("fig", "A sentence.")
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes, got Figure"):
        views.describe_axes(fig, "A sentence.")
    plt.close(fig)


def test_the_formatter_replaces_the_inline_backends_png():
    shell = SimpleNamespace(display_formatter=DisplayFormatter())
    shell.display_formatter.formatters["image/png"].for_type(Figure, lambda fig: b"a 1x png")  # as the inline backend
    assert views.show_figures_sharp(shell) is True
    fig, ax = plt.subplots(figsize=(2, 2))
    views.heatmap(np.eye(2), ["x", "y"], ax=ax, colorbar=False)
    data, _ = shell.display_formatter.format(fig)
    assert set(data) == {"text/plain", "text/html"}, set(data)
    assert IMG.match(data["text/html"]) and "Heatmap: 2 query rows" in data["text/html"]
    assert views.show_figures_sharp(SimpleNamespace()) is False  # not an IPython shell
    plt.close(fig)


def test_a_mask_is_described_by_the_cells_each_row_keeps():
    text = display.matrix_sentence(np.tril(np.ones((4, 4))), title="keep")
    assert text.endswith("values 0.00 to 1.00; cells at 1.00 in each row: 1, 2, 3, 4."), text


def test_curves_give_their_ends_and_reference_lines_their_place():
    fig, ax = plt.subplots()
    ax.plot([0, 10, 20], [3.0, 1.5, 0.5], label="loss")
    ax.axhline(1.0, label="1 nat")
    ax.axvline(10, label="drop")
    ax.set(title="held-out loss", xlabel="training step", ylabel="loss")
    text = display.lines_sentence(ax, "Curves")
    assert text == ("Curves 'held-out loss' of loss against training step: loss: 3.00 at 0 to 0.50 at 20 (lowest 0.50, "
                    "highest 3.00); 1 nat: a horizontal line at 1.00; drop: a vertical line at 10."), text
    plt.close(fig)
