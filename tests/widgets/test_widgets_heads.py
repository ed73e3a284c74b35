"""HeadsExplorer driven without a browser: sliders, pictures, shapes, impossible combinations."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest
import torch
from matplotlib.text import Text

from attn_helpers import widgets
from attn_helpers.widgets import HeadsExplorer
from attn_helpers.widgets._base import OUTPUT_WIDTH_PX
from attn_helpers.widgets.heads import HEAD_COUNTS, TOKENS_MAX, TOKENS_MIN
from widget_support import PNG_SIGNATURE, full_render_differs
from attn_helpers.views.heatmaps import Cells


@pytest.fixture
def explorer() -> HeadsExplorer:
    return HeadsExplorer()


def test_is_exported_by_the_widgets_package():
    assert "HeadsExplorer" in widgets.__all__
    assert widgets.HeadsExplorer is HeadsExplorer


def test_default_explorer_shows_a_picture_and_its_values(explorer):
    assert explorer.valid
    assert bytes(explorer.image.value).startswith(PNG_SIGNATURE)
    assert explorer.last_status == "num_heads=4 chan=64 tokens=8 | head_dim = 64 // 4 = 16; weights [1, 4, 8, 8]"
    assert len(explorer.images) == 4


def test_repr_is_one_stable_line_and_is_the_text_nbval_compares(explorer):
    expected = "HeadsExplorer(num_heads=4 chan=64 tokens=8 | head_dim = 64 // 4 = 16; weights [1, 4, 8, 8])"
    assert repr(explorer) == expected
    assert repr(HeadsExplorer()) == expected  # a second one prints the same
    assert explorer._repr_mimebundle_()[0]["text/plain"] == expected


@pytest.mark.parametrize(("name", "value"), [("num_heads", 2), ("chan", 32), ("tokens", 12)])
def test_moving_each_slider_changes_the_picture_and_the_status_line(explorer, name, value):
    before = explorer.image.value
    explorer.set(**{name: value})
    assert explorer.valid
    assert explorer.image.value != before
    assert f"{name}={value}" in explorer.last_status
    assert explorer.image.layout.visibility == "visible"


def test_moving_a_control_directly_as_the_browser_does_refreshes(explorer):
    before = explorer.image.value
    explorer.controls["chan"].value = 96
    assert explorer.last_status.startswith("num_heads=4 chan=96 tokens=8 | head_dim = 96 // 4 = 24")
    assert explorer.image.value != before


def test_the_status_names_the_new_values_after_several_moves(explorer):
    explorer.set(num_heads=8, chan=128, tokens=16)
    assert explorer.last_status == "num_heads=8 chan=128 tokens=16 | head_dim = 128 // 8 = 16; weights [1, 8, 16, 16]"
    assert len(explorer.images) == 8


def test_num_heads_offers_only_counts_that_divide_every_chan(explorer):
    control = explorer.controls["num_heads"]
    assert list(control.options) == [1, 2, 4, 8]
    chans = range(8, 129, 8)
    assert all(chan % heads == 0 for heads in control.options for chan in chans)


def test_every_head_count_draws_a_picture_at_the_narrowest_and_widest_chan(explorer):
    for chan in (8, 128):
        for num_heads in (1, 2, 4, 8):
            explorer.set(num_heads=num_heads, chan=chan, tokens=5)
            assert explorer.valid, explorer.last_status
            assert f"head_dim = {chan} // {num_heads} = {chan // num_heads};" in explorer.last_status
            assert explorer.image.layout.visibility == "visible"
            assert len(explorer.images) == num_heads


def test_moving_back_to_fewer_heads_hides_the_panels_no_longer_used(explorer):
    explorer.set(num_heads=8)
    explorer.set(num_heads=2)
    assert explorer.last_status.startswith("num_heads=2 chan=64 tokens=8 | head_dim = 64 // 2 = 32")
    shown = [ax for ax in explorer.figure.axes if ax.get_visible() and ax.findobj(Cells)]
    assert len(shown) == 2 and [ax.get_title() for ax in shown] == ["head 0", "head 1"]


def test_head_dim_of_one_is_a_valid_combination(explorer):
    explorer.set(chan=8, num_heads=8)
    assert explorer.valid
    assert "head_dim = 8 // 8 = 1;" in explorer.last_status


@pytest.mark.parametrize(("kwargs", "pattern"), [
    (dict(num_heads=3), r"num_heads must be one of \[1, 2, 4, 8\] \(each divides every chan on offer\), got 3"),
    (dict(num_heads=True), r"num_heads must be one of"),
    (dict(chan=136), r"chan must be an int in \[8, 128\], got 136"),
    (dict(chan=60), r"chan must be a multiple of 8"),
    (dict(tokens=3), r"tokens must be an int in \[4, 32\], got 3"),
    (dict(tokens=8.0), r"tokens must be an int"),
])
def test_constructor_rejects_values_outside_the_sliders(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        HeadsExplorer(**kwargs)


def test_the_same_values_always_give_the_same_picture(explorer):
    first = explorer.image.value
    explorer.set(chan=32)
    explorer.set(chan=64)
    assert explorer.image.value == first
    assert HeadsExplorer().image.value == first


def test_the_notebooks_random_state_and_thread_count_are_left_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    explorer = HeadsExplorer()
    explorer.set(chan=32, tokens=10)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_the_picture_shows_the_layers_weights_head_by_head(explorer):
    explorer.set(num_heads=2, chan=48, tokens=6)
    weights = explorer.intermediates(2, 48, 6)["weights"]  # (1, H, N, N)
    assert weights.shape == (1, 2, 6, 6)
    for h, image in enumerate(explorer.images):  # each panel's cells hold 32 x 32; the axes show the first 6 x 6
        cells = np.ma.filled(image.get_array(), np.nan)
        np.testing.assert_allclose(cells[:6, :6], weights[0, h].numpy(), rtol=0, atol=1e-7)
        assert np.isnan(cells[6:]).all() and np.isnan(cells[:, 6:]).all()
        assert image.axes.get_xlim() == (-0.5, 5.5) and image.axes.get_ylim() == (5.5, -0.5)


def test_moving_num_heads_recuts_the_same_projection(explorer):
    one, four = explorer.intermediates(1, 64, 8), explorer.intermediates(4, 64, 8)
    torch.testing.assert_close(one["qkv"], four["qkv"])
    assert not torch.allclose(one["weights"][0, 0], four["weights"][0, 0])


def test_equal_words_get_equal_rows(explorer):
    weights = explorer.intermediates(4, 64, 8)["weights"][0]  # (H, N, N); words 0 and 4 are both "the"
    assert HeadsExplorer.SENTENCE[0] == HeadsExplorer.SENTENCE[4] == "the"
    torch.testing.assert_close(weights[:, 0], weights[:, 4])


def test_the_sentence_has_32_words_and_the_panels_are_labelled_with_the_first_tokens(explorer):
    assert len(HeadsExplorer.SENTENCE) == 32
    explorer.set(tokens=11)
    grid, heads = explorer.grid, len(explorer.images)
    last = (-(-heads // 4) - 1) * 4  # the first column's lowest panel
    words = list(HeadsExplorer.SENTENCE[:11])
    # The labels stand where tick labels would (LiveHeadGrid's text labels): queries down the first panel's left
    # edge, keys under the first column's lowest panel.
    assert [t.get_text() for t in grid.query_labels[0]] == words == [t.get_text() for t in grid.key_labels[last]]
    assert grid.query_labels[0][0].get_fontsize() == grid.key_labels[last][0].get_fontsize() >= 8.0
    explorer.set(tokens=5)  # a new layout replaces the labels, it does not add to them
    assert [t.get_text() for t in grid.query_labels[0]] == words[:5]
    shown = [t for panel in (*grid.key_labels, *grid.query_labels) for t in panel]
    assert sum(t.get_text() == words[0] for t in explorer.figure.findobj(Text)) == sum(t.get_text() == words[0] for t in shown)


def test_every_layout_fits_a_laptops_output_column_with_text_of_8_px_or_more(explorer):
    """At 1366 x 768 with the file browser open JupyterLab's output column is 934 px: a wider picture is shrunk, and
    its text with it (8 heads over 32 tokens was 1234 px, its 6-pt labels 5 px as displayed)."""
    for num_heads in HEAD_COUNTS:
        for tokens in range(TOKENS_MIN, TOKENS_MAX + 1):
            explorer.set(num_heads=num_heads, tokens=tokens)
            width = explorer.canvas.get_width_height()[0] / explorer.pixel_density
            assert width <= OUTPUT_WIDTH_PX <= 934, (num_heads, tokens, width)
            px = explorer.figure.dpi / explorer.pixel_density / 72.0  # CSS px per point
            sizes = [(t.get_fontsize() * px, t.get_text()) for t in explorer.figure.findobj(Text)
                     if t.get_text().strip() and t.get_visible() and (t.axes is None or t.axes.get_visible())]
            assert min(sizes)[0] >= 8.0, (num_heads, tokens, min(sizes))
    assert explorer.grid.every == 2  # 8 heads over 32 tokens: every second token labelled


def test_no_move_lays_out_a_figure_each_head_count_has_its_own_drawn_ahead(monkeypatch):
    draws = []
    original = HeadsExplorer.draw
    monkeypatch.setattr(HeadsExplorer, "draw", lambda self, figure: (draws.append(self), original(self, figure))[1])
    explorer = HeadsExplorer()
    assert len(draws) == len(HEAD_COUNTS)  # one figure per head count, drawn when the explorer is made
    figures = {}
    for values in ({"num_heads": 8}, {"tokens": 9}, {"chan": 16}, {"num_heads": 1, "tokens": 32}, {"num_heads": 8}):
        explorer.set(**values)
        figures.setdefault(explorer.controls["num_heads"].value, explorer.figure)
        assert explorer.figure is figures[explorer.controls["num_heads"].value]  # swapped back in, not drawn again
        assert len(explorer.images) == explorer.grid.num_heads == explorer.controls["num_heads"].value
        assert full_render_differs(explorer) < 0.01  # as the explorer contract: the panels' edges, under the cells
        # the kept figure shows what a new explorer at these values shows, token labels and all
        assert explorer.image.value == HeadsExplorer(**explorer.values).image.value
    assert draws.count(explorer) == len(HEAD_COUNTS)


def test_shape_table_lists_every_step_with_named_shapes(explorer):
    table = explorer.table_html.value
    for step in ("x", "qkv", "q_heads, k_heads, v_heads", "scores", "weights", "heads", "merged", "out"):
        assert f"<b>{step}</b>" in table
    assert "<code>[1, 8, 49]</code>" in table
    assert "<code>[1, 4, 8, 16]</code>" in table and "head_dim=16" in table
    explorer.set(num_heads=8, chan=128, tokens=12)
    table = explorer.table_html.value
    assert "<code>[1, 8, 12, 16]</code>" in table and "<code>[1, 12, 384]</code>" in table


class _Cells(HTMLParser):
    """The table's body cells as ``[(style attribute, text), ...]`` per row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str]]] = []
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body:
            self.rows.append([])
        elif tag == "td" and self.in_body:
            self.rows[-1].append((dict(attrs).get("style") or "", ""))

    def handle_data(self, data):
        if self.in_body and self.rows and self.rows[-1]:
            style, text = self.rows[-1][-1]
            self.rows[-1][-1] = (style, text + data)


def test_shape_table_never_wraps_inside_a_step_name_or_a_shape(explorer):
    explorer.set(num_heads=8, chan=128, tokens=32)  # the widest shapes on offer, e.g. [3, 1, 8, 32, 16]
    parser = _Cells()
    parser.feed(explorer.table_html.value)
    assert len(parser.rows) == 8
    for (name_style, name), (shape_style, shape), (axes_style, axes), (what_style, _) in parser.rows:
        assert re.fullmatch(r"\[\d+(, \d+)*\]", shape), shape
        for style in (name_style, shape_style):
            assert re.search(r"white-space:\s*nowrap", style), (name, shape, style)
        # the named axes break only between axes (no axis has a space in it), the words anywhere between words
        assert " " not in axes.replace(", ", ",") and "nowrap" not in axes_style + what_style


def test_the_description_names_the_colour_of_more_weight_as_the_colormap_draws_it(explorer):
    # viridis runs from dark purple at 0 to yellow at 1: more weight is brighter, never darker
    from matplotlib import colormaps
    from attn_helpers.views.colours import WEIGHTS_CMAP
    low, high = (sum(colormaps[WEIGHTS_CMAP](v)[:3]) for v in (0.0, 1.0))
    assert high > low
    words = explorer.describe(4, 64, 8)
    assert "darker is more" not in words and "brighter (yellow) is more weight" in words
