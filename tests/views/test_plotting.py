"""attn_helpers.views heatmaps and grids: heatmaps with token labels, grids of heads."""

from __future__ import annotations

import warnings


import matplotlib.pyplot as plt
import numpy as np
import matplotlib
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attn_helpers import views
from attn_helpers.views.heatmaps import ANNOTATE_MAX
from tools.browser_support import luminance
from attn_helpers.views.labels import MIN_FONTSIZE, _name_axes
from attn_helpers.views.heatmaps import Cells


TOKENS = ["the", "cat", "sat", "on", "the", "mat"]
SENTENCE = ("the cat sat on the mat because it was warm and the dog slept by the door while rain fell "
            "on the old roof of the quiet house near the river bank").split()


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def weights(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(*shape, generator=generator)).softmax(dim=-1)


def tick_texts(ax, axis: str) -> list[str]:
    return [t.get_text() for t in getattr(ax, f"get_{axis}ticklabels")()]


def label_boxes(ax, axis: str) -> list:
    renderer = ax.figure.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in getattr(ax, f"get_{axis}ticklabels")() if t.get_text()]


def neighbours_overlap(boxes: list) -> bool:
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


# -- heatmap ------------------------------------------------------------------------------------

def test_heatmap_labels_keys_and_queries_with_the_tokens_and_adds_a_colour_bar():
    image = views.heatmap(weights(6, 6), TOKENS)
    ax = image.axes
    assert tick_texts(ax, "x") == TOKENS
    assert tick_texts(ax, "y") == TOKENS
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("key", "query")
    assert image.colorbar is not None
    assert len(ax.figure.axes) == 2  # the heatmap and its colour bar


def test_heatmap_weights_use_viridis_from_0_to_1_and_signed_values_a_symmetric_map_centred_on_zero():
    assert (views.WEIGHTS_CMAP, views.SIGNED_CMAP) == ("viridis", "RdBu_r")  # colour-blind-safe maps
    weights_image = views.heatmap(weights(6, 6), TOKENS)
    assert weights_image.get_cmap().name == "viridis"
    assert weights_image.get_clim() == (0.0, 1.0)
    scores = torch.tensor([[1.5, -3.0], [0.5, 2.0]])
    scores_image = views.heatmap(scores, ["a", "b"])
    assert scores_image.get_cmap().name == "RdBu_r"
    assert scores_image.get_clim() == (-3.0, 3.0)


def relative_luminance(rgba) -> float:
    """WCAG 2's relative luminance of a matplotlib colour (components 0..1): 0 black, 1 white."""
    return luminance([255 * c for c in rgba[:3]])


def test_the_signed_map_shows_equal_and_opposite_values_equally_dark():
    """-v and +v get colours of about the same lightness (within 0.05 relative luminance; PuOr, the map before, is 0.13
    apart at its quarters and 0.066 at its ends) at the ends, the quarters and the
    middle's neighbours, so a negative score does not look weaker than a positive one, in grey as in colour."""
    cmap = matplotlib.colormaps[views.SIGNED_CMAP]
    for t in (0.0, 0.1, 0.25, 0.4):
        assert relative_luminance(cmap(t)) == pytest.approx(relative_luminance(cmap(1.0 - t)), abs=0.05), t
    assert relative_luminance(cmap(0.5)) > 0.85  # zero is near white: the eye reads it as "nothing"
    puor = matplotlib.colormaps["PuOr"]
    assert abs(relative_luminance(puor(0.25)) - relative_luminance(puor(0.75))) > 0.05  # the test can fail


def test_small_matrices_get_their_values_written_in_and_big_ones_do_not():
    w = weights(6, 6)
    image = views.heatmap(w, TOKENS)
    texts = [t.get_text() for t in image.axes.texts]
    assert texts == [f"{v:.2f}" for v in w.flatten().tolist()]
    big = views.heatmap(weights(ANNOTATE_MAX + 1, ANNOTATE_MAX + 1))
    assert len(big.axes.texts) == 0


def test_annotations_are_dark_on_light_cells_and_light_on_dark_cells():
    image = views.heatmap(torch.tensor([[0.0, 1.0]]), ["a", "b"], ["q"])
    colours = [t.get_color() for t in image.axes.texts]
    assert colours == ["white", "black"]  # viridis: dark purple at 0, light yellow at 1


def test_heatmap_draws_into_the_given_axes_without_a_new_figure():
    fig, (left, right) = plt.subplots(1, 2)
    figures_before = plt.get_fignums()
    image = views.heatmap(weights(6, 6), TOKENS, ax=right, colorbar=False, title="right")
    assert image.axes is right
    assert plt.get_fignums() == figures_before
    assert right.get_title() == "right" and len(left.findobj(Cells)) == 0


def test_heatmap_accepts_tensors_with_grad_and_float64_without_warnings():
    x = torch.rand(4, 4, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        image = views.heatmap(x * 1.0, list("abcd"))
    np.testing.assert_allclose(image.get_array(), x.detach().numpy())
    assert views.to_numpy(x).dtype == np.float64


@pytest.mark.parametrize("bad", [torch.rand(2, 3, 4), torch.rand(5)])
def test_heatmap_rejects_a_non_matrix_naming_the_argument_and_its_shape(bad):
    with pytest.raises(ValueError, match=r"values must be a 2-D matrix .* got shape " + str(list(bad.shape)).replace("[", r"\[")):
        views.heatmap(bad)


def test_heatmap_rejects_a_wrong_number_of_labels_naming_the_argument_and_the_shape():
    with pytest.raises(ValueError, match=r"x_labels has 5 labels but the matrix of shape \[6, 6\] needs 6"):
        views.heatmap(weights(6, 6), TOKENS[:5])
    with pytest.raises(ValueError, match=r"y_labels has 2 labels but the matrix of shape \[3, 4\] needs 3"):
        views.heatmap(weights(3, 4), list("abcd"), ["q1", "q2"])


def test_short_column_labels_stay_horizontal_and_long_ones_stand_upright():
    short = views.heatmap(weights(6, 6), TOKENS)
    assert {t.get_rotation() for t in short.axes.get_xticklabels()} == {0.0}
    long_words = [f"token_number_{i}" for i in range(6)]
    long = views.heatmap(weights(6, 6), long_words)
    assert {t.get_rotation() for t in long.axes.get_xticklabels()} == {90.0}


def test_many_tokens_get_smaller_labels_that_do_not_overlap():
    image = views.heatmap(weights(32, 32), SENTENCE)
    image.axes.figure.canvas.draw()
    assert not neighbours_overlap(label_boxes(image.axes, "y"))
    assert not neighbours_overlap(sorted(label_boxes(image.axes, "x"), key=lambda b: b.x0))


def test_plotting_prints_nothing(capsys):
    views.heatmap(weights(6, 6), TOKENS)
    views.heatmap(torch.randn(6, 6), TOKENS)
    views.head_grid(weights(4, 6, 6), TOKENS)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")


# -- head_grid ----------------------------------------------------------------------------------

def test_head_grid_returns_one_image_per_head_on_one_shared_scale_with_one_colour_bar():
    w = weights(8, 6, 6)
    images = views.head_grid(w, TOKENS)
    assert len(images) == 8
    for h, image in enumerate(images):
        np.testing.assert_allclose(image.get_array(), w[h].numpy())
        assert image.get_clim() == (0.0, 1.0) and image.get_cmap().name == "viridis"
        assert image.axes.get_title() == f"head {h}"
    assert images[0].colorbar is not None
    assert images[0].colorbar.ax.get_ylabel() == "attention weight"
    assert sum(image.colorbar is not None for image in images) == 1


def test_head_grid_labels_the_outer_panels_only():
    images = views.head_grid(weights(8, 6, 6), TOKENS)  # 2 x 4
    for h, image in enumerate(images):
        bottom_row, first_column = h >= 4, h % 4 == 0
        assert tick_texts(image.axes, "x") == (TOKENS if bottom_row else [])
        assert tick_texts(image.axes, "y") == (TOKENS if first_column else [])
        assert image.axes.get_xlabel() == ("key" if bottom_row else "")
        assert image.axes.get_ylabel() == ("query" if first_column else "")


def test_head_grid_8_heads_32_tokens_labels_are_smaller_but_readable_and_inside_the_figure():
    images = views.head_grid(weights(8, 32, 32), SENTENCE)
    figure = images[0].axes.figure
    figure.canvas.draw()
    first, bottom_left = images[0].axes, images[4].axes
    size = first.get_yticklabels()[0].get_fontsize()
    assert MIN_FONTSIZE <= size < plt.rcParams["font.size"]
    assert size >= 6.0  # 32 tokens still get 6-point labels: panels grow for them
    for ax, axis in ((first, "y"), (bottom_left, "y"), (bottom_left, "x")):
        boxes = sorted(label_boxes(ax, axis), key=lambda b: (b.x0, -b.y0))
        assert len(boxes) == 32
        assert not neighbours_overlap(boxes)
        assert all(figure.bbox.contains(b.x0, b.y0) and figure.bbox.contains(b.x1, b.y1) for b in boxes)
    # the top row's titles do not collide with anything of the bottom row
    assert not images[4].axes.title.get_window_extent().overlaps(images[0].axes.get_window_extent())


def test_head_grid_hides_unused_panels_and_puts_key_labels_under_the_lowest_panel_of_each_column():
    images = views.head_grid(weights(6, 5, 5), list("abcde"))  # 2 rows of 4, two slots empty
    figure = images[0].axes.figure
    visible = [ax for ax in figure.axes if ax.get_visible() and ax.findobj(Cells)]
    assert len(visible) == 6
    assert tick_texts(images[2].axes, "x") == list("abcde")  # nothing below heads 2 and 3
    assert tick_texts(images[1].axes, "x") == []


def label_centres(ax, texts: list) -> list[tuple[float, float]]:
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2) for b in boxes]


def test_heatmap_text_labels_stand_where_the_tick_labels_stand():
    def panel(**options):
        return views.heatmap(weights(12, 12), SENTENCE[:12], SENTENCE[:12], ax=plt.figure().add_subplot(),
                             colorbar=False, annotate=False, **options).axes

    a, b = panel(), panel(text_labels=True)
    a.figure.canvas.draw()
    b.figure.canvas.draw()
    assert b.get_xticks().size == 0 and b.get_yticks().size == 0  # no ticks at all
    rows = [t for t in b.texts if t.get_ha() == "right"]
    assert [t.get_text() for t in rows] == SENTENCE[:12]
    np.testing.assert_allclose(label_centres(b, rows), label_centres(a, a.get_yticklabels()), atol=3.0)
    assert b.get_ylabel() == "query" and b.yaxis.label.get_window_extent().x1 < min(
        t.get_window_extent().x0 for t in rows)  # the axis label clears the token labels
    columns = [t for t in b.texts if t.get_va() == "top"]
    assert [t.get_text() for t in columns] == SENTENCE[:12]
    np.testing.assert_allclose([x for x, _ in label_centres(b, columns)],
                               [x for x, _ in label_centres(a, a.get_xticklabels())], atol=3.0)
    assert len(panel(text_labels=True, x_ticks=False, y_ticks=False).texts) == 0  # no ticks: no labels
    plt.close("all")


def texts(labels: list) -> list[str]:
    return [t.get_text() for t in labels]


LONG = (SENTENCE * 4)[:32]


@pytest.mark.parametrize("heads", [8, 5, 2, 1])
def test_live_head_grid_keeps_its_frame_for_every_token_count_with_room_for_the_labels(heads):
    figure = Figure(dpi=80)
    grid = views.LiveHeadGrid(figure, heads, LONG, max_width=11.0, min_fontsize=7.5)
    canvas = FigureCanvasAgg(figure)
    frame = [ax.get_position().bounds for ax in figure.axes], tuple(figure.get_size_inches())
    assert [ax.get_title() for ax in grid.axes] == [f"head {h}" for h in range(heads)]
    assert figure.axes == [*grid.axes, grid.cax]
    for n in range(1, 33):
        grid.show(weights(heads, n, n))
        assert ([ax.get_position().bounds for ax in figure.axes], tuple(figure.get_size_inches())) == frame
        for ax, image in zip(grid.axes, grid.images):
            assert ax.get_xlim() == (-0.5, n - 0.5) and ax.get_ylim() == (n - 0.5, -0.5)  # the first n cells
        shown = [texts(labels) for side in (grid.key_labels, grid.query_labels) for labels in side if labels]
        assert len(shown) == 1 + -(-heads // 4)  # keys under the first column, queries left of each row
        assert all(labels == LONG[:n:grid.every] for labels in shown)
        assert grid.every == -(-n // grid.MAX_LABELS)  # every token labelled up to 16, then every second
        if n not in (1, 4, 9, 16, 17, 32):
            continue
        canvas.draw()  # the labels of every n fit the room kept for them: inside the figure, clear of the axis labels
        for h, ax in enumerate(grid.axes):
            boxes = {"x": [t.get_window_extent() for t in grid.key_labels[h]],
                     "y": [t.get_window_extent() for t in grid.query_labels[h]]}
            key, query = grid.axis_names[h]
            assert (key is not None, query is not None) == (bool(boxes["x"]), bool(boxes["y"]))
            if boxes["x"]:
                # within a pixel: an upright label's box also holds its glyphs' overhang, which its width does not
                assert 0 < key.get_window_extent().y1 < min(b.y0 for b in boxes["x"]) + 1.0
            if boxes["y"]:
                assert 0 < query.get_window_extent().x1 < min(b.x0 for b in boxes["y"])


@pytest.mark.parametrize("heads, n", [(8, 8), (4, 32), (1, 4), (5, 13)])
def test_live_head_grid_draws_what_auto_placed_titles_and_visible_axes_would(heads, n):
    """The grid fixes each title at y=1.0, writes "key" and "query" as texts of its own and hides the axes, only to
    skip work and to move them with the labels: the picture must be the one matplotlib draws with its own title
    placement, every axis shown, and axis labels padded beyond the token labels (as _name_axes pads them)."""
    grid = views.LiveHeadGrid(Figure(dpi=80), heads, LONG, max_width=11.0, min_fontsize=7.5)
    grid.show(weights(heads, n, n))
    canvas = FigureCanvasAgg(grid.figure)
    canvas.draw()
    fast = np.asarray(canvas.buffer_rgba()).copy()
    for h, ax in enumerate(grid.axes):
        ax.set_title(ax.get_title())  # no y: matplotlib places it
        ax.xaxis.set_visible(True)
        ax.yaxis.set_visible(True)
        key, query = grid.axis_names[h]
        keys, queries = grid.key_labels[h], grid.query_labels[h]
        for text in (key, query):
            if text is not None:
                text.set_visible(False)
        labels = (keys or queries)[:1]
        _name_axes(ax, texts(keys), texts(queries), labels[0].get_fontsize() if labels else 10.0,
                   bool(keys) and keys[0].get_rotation() == 90.0, "key" if key else "", "query" if query else "")
    canvas.draw()
    np.testing.assert_array_equal(fast, np.asarray(canvas.buffer_rgba()))


@pytest.mark.parametrize("heads", [1, 4, 8])
def test_live_head_grid_keeps_within_its_width_and_labels_every_other_token_rather_than_shrink(heads):
    grid = views.LiveHeadGrid(Figure(dpi=80), heads, LONG, max_width=11.0, min_fontsize=7.5)
    width = grid.figure.get_size_inches()[0]
    assert width <= 11.0 + 1e-9
    unlimited = views.LiveHeadGrid(Figure(dpi=80), heads, LONG)
    natural = unlimited.figure.get_size_inches()[0]
    if natural <= 11.0:  # fits as it is: the same grid
        assert width == pytest.approx(natural)
    else:  # narrowed to the width (within the margins its smaller labels give back)
        assert width > 11.0 - 0.25
    for n in (4, 8, 16, 24, 32):
        grid.show(weights(heads, n, n))
        shown = [labels for side in (grid.key_labels, grid.query_labels) for labels in side if labels]
        for labels in shown:
            assert all(t.get_fontsize() >= 7.5 for t in labels)
            assert texts(labels) == LONG[:n:grid.every]
    assert grid.every == 2  # 32 tokens: at most 16 labels a side


def test_live_head_grid_refuses_what_it_cannot_draw_naming_the_argument():
    grid = views.LiveHeadGrid(Figure(), 4, TOKENS)
    with pytest.raises(ValueError, match=r"weights must have shape \(4, n, n\) with n in \[1, 6\], got \[8, 6, 6\]"):
        grid.show(weights(8, 6, 6))
    with pytest.raises(ValueError, match=r"got \[4, 7, 7\]"):
        grid.show(weights(4, 7, 7))
    with pytest.raises(ValueError, match=r"got \[4, 3, 5\]"):
        grid.show(weights(4, 3, 5))
    with pytest.raises(ValueError, match="num_heads must be at least 1, got 0"):
        views.LiveHeadGrid(Figure(), 0, TOKENS)
    with pytest.raises(ValueError, match="words must hold at least one word, got none"):
        views.LiveHeadGrid(Figure(), 4, [])
    with pytest.raises(ValueError, match=r"max_width must be positive \(inches\), got -2"):
        views.LiveHeadGrid(Figure(), 4, TOKENS, max_width=-2)


def test_head_grid_cross_attention_labels_the_keys_only():
    images = views.head_grid(weights(2, 3, 5), list("abcde"))
    assert tick_texts(images[0].axes, "x") == list("abcde")
    assert tick_texts(images[0].axes, "y") == ["0", "1", "2"]


@pytest.mark.parametrize(("bad", "pattern"), [
    (torch.rand(6, 6), r"weights must have shape \(heads, N_q, N_k\), got \[6, 6\]"),
    (torch.rand(1, 2, 6, 6), r"got \[1, 2, 6, 6\]; select one batch element first"),
    (torch.rand(0, 6, 6), r"at least one head, got shape \[0, 6, 6\]"),
])
def test_head_grid_rejects_wrong_shapes_naming_the_argument(bad, pattern):
    with pytest.raises(ValueError, match=pattern):
        views.head_grid(bad)


def test_head_grid_rejects_wrong_label_and_title_counts():
    with pytest.raises(ValueError, match=r"labels has 5 labels but the matrix of shape \[6, 6\] needs 6"):
        views.head_grid(weights(2, 6, 6), TOKENS[:5])
    with pytest.raises(ValueError, match="titles has 1 entries for 2 heads"):
        views.head_grid(weights(2, 6, 6), TOKENS, titles=["only one"])


def test_head_grid_keeps_long_titles_of_neighbouring_panels_apart():
    titles = ["softmax(dim=-1): each row sums to 1", "softmax(dim=-2): each column sums to 1", "a third title"]
    images = views.head_grid(weights(3, 4, 4), list("abcd"), titles=titles, panel_size=2.0)
    figure = images[0].axes.figure
    figure.canvas.draw()
    boxes = [image.axes.title.get_window_extent() for image in images]
    assert [image.axes.get_title() for image in images] == titles
    assert not neighbours_overlap(boxes)
