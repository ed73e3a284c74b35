"""ProjectionExplorer (lesson 01) driven without a browser: every control changes the picture and
the status line, an impossible head count is explained in words, and the global RNG is left alone."""

import pytest
import torch

from attn_helpers.core.arguments import check_heads
from attn_helpers import SENTENCE, Attention, embed
from attn_helpers.widgets import ProjectionExplorer
from attn_helpers.widgets.projection import projected_qkv, sentence_embeddings
from widget_support import assert_move_redraws


@pytest.fixture
def explorer():
    return ProjectionExplorer()


def test_starts_at_seed_000_sizes(explorer):
    assert explorer.valid
    assert explorer.last_status.startswith("dim=49 chan=64 num_heads=1 qkv_bias=False")
    assert "qkv [1, 6, 192] (3 × 64)" in explorer.last_status
    assert "9408 parameters" in explorer.last_status
    assert repr(explorer) == f"ProjectionExplorer({explorer.last_status})"


@pytest.mark.parametrize("change, expected", [
    ({"dim": 8}, "x [1, 6, 8]"),
    ({"chan": 12}, "q, k, v [1, 6, 12] each"),
    ({"num_heads": 4}, "head_dim=16"),
    ({"qkv_bias": True}, "9600 parameters"),
])
def test_every_control_changes_picture_and_status(explorer, change, expected):
    assert_move_redraws(explorer, change, expected)


def test_table_lists_sentence_and_seed_shapes(explorer):
    explorer.set(chan=32, num_heads=2)
    table = explorer.table_html.value
    assert "[1, 6, 96]" in table and "[13, 100, 96]" in table  # qkv
    assert "[13, 2, 100, 16]" in table  # q, k, v with heads


def test_heads_that_do_not_divide_chan_are_explained(explorer):
    explorer.set(num_heads=5)
    assert not explorer.valid
    with pytest.raises(ValueError) as problem:  # the library's one message for it, suggesting what the slider reaches
        check_heads(64, 5, most=8)
    assert f"not possible: {problem.value}" in explorer.last_status
    assert explorer.last_status.endswith("(try num_heads in [1, 2, 4, 8])")  # the slider stops at 8
    assert "chan / num_heads = 12.8" in explorer.last_status and "Traceback" not in explorer.last_status
    assert explorer.image.layout.visibility == "hidden"
    explorer.set(num_heads=4)
    assert explorer.valid and explorer.image.layout.visibility == "visible"


def test_same_values_draw_the_same_picture():
    a, b = ProjectionExplorer(), ProjectionExplorer()
    assert a.image.value == b.image.value


def test_the_global_random_state_is_left_alone(explorer):
    state = torch.random.get_rng_state()
    explorer.set(dim=20, chan=24, qkv_bias=True)
    assert torch.equal(state, torch.random.get_rng_state())


def test_custom_tokens_and_empty_tokens():
    e = ProjectionExplorer(["a", "b", "c"], dim=5, chan=6)
    assert "x [1, 3, 5]" in e.last_status
    with pytest.raises(ValueError, match="at least one token"):
        ProjectionExplorer([])


def test_one_colour_scale_for_every_setting_of_the_sentence():
    """The colour bars are drawn once: the sentence's values stay inside the fixed scale for every setting."""
    from attn_helpers.widgets.projection import QKV_RANGE, X_RANGE

    e = ProjectionExplorer()
    for dim, chan, bias in ((2, 2, False), (96, 96, True), (86, 12, True), (49, 64, False)):
        e.set(dim=dim, chan=chan, qkv_bias=bias)
        assert e.ranges == (X_RANGE, QKV_RANGE)
        assert e.images[0].get_clim() == (-X_RANGE, X_RANGE) and e.images[1].get_clim() == (-QKV_RANGE, QKV_RANGE)
    assert all(bar.ax not in e._dynamic for bar in e.colorbars)


def test_values_beyond_the_scale_widen_it_and_redraw():
    """Values beyond the scale (other tokens can have them) widen it, and the figure is laid out again."""
    e = ProjectionExplorer()
    e.ranges = (1.0, 1.0)  # narrower than the sentence's values, as a longer token list's could be wider
    e.set(dim=50, chan=20)
    t = e._compute(50, 20, 1, False)
    widened = (float(t["x"].abs().max()), float(t["qkv"].abs().max()))
    assert widened[0] > 1.0 and widened[1] > 1.0 and e.ranges == widened
    assert e.images[0].get_clim() == (-widened[0], widened[0]) and e.images[1].get_clim() == (-widened[1], widened[1])
    assert e.valid


def test_the_sentence_uses_the_series_table_and_equal_words_get_equal_vectors():
    x = sentence_embeddings(SENTENCE, 7)
    assert torch.equal(x[0], embed(SENTENCE, 7)) and torch.equal(x[0, 0], x[0, 4])
    other = sentence_embeddings(["a", "zebra", "a"], 7)  # words outside the example's vocabulary: a table of their own
    assert torch.equal(other[0, 0], other[0, 2]) and not torch.equal(other[0, 0], other[0, 1])


def test_projected_qkv_is_lesson_01s_seeded_layer_cut_in_three_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    t = projected_qkv(SENTENCE, 10, 12, num_heads=3, qkv_bias=True, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        layer = Attention(10, 12, num_heads=3, qkv_bias=True)  # what a notebook builds after torch.manual_seed(1)
    torch.testing.assert_close(t["qkv"], layer.qkv(t["x"]).detach())
    assert [list(t[name].shape) for name in ("x", "qkv", "q", "k", "v")] == [[1, 6, 10], [1, 6, 36]] + [[1, 6, 12]] * 3
    torch.testing.assert_close(torch.cat([t["q"], t["k"], t["v"]], dim=-1), t["qkv"])
    assert int(t["params"]) == 36 * 10 + 36
