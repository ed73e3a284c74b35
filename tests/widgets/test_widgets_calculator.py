"""LayerCalculator (07 · The complete layer), driven without a browser."""

from __future__ import annotations

import pytest

from attn_helpers.lab.measure import attention_flops, attention_parameters
from attn_helpers.core.arguments import check_heads
from attn_helpers.widgets import LayerCalculator


def test_moving_a_slider_redraws_the_picture_and_the_status_line():
    e = LayerCalculator()
    assert e.valid and "chan=64 num_heads=4 N=100" in e.last_status
    before = e.image.value
    e.set(N=400)
    assert e.image.value != before
    assert "N=400" in e.last_status
    assert f"params={sum(attention_parameters(49, 64).values()):,}" in e.last_status


def test_status_and_table_agree_with_the_counting_functions():
    e = LayerCalculator(dim=49, chan=128, num_heads=8, N=300)
    flops = attention_flops(1, 300, 49, 128, 8)
    assert "head_dim=16" in e.last_status
    assert f"{sum(flops.values()):,}" in e.table_html.value
    assert f"{sum(attention_parameters(49, 128).values()):,}" in e.table_html.value


def test_the_number_of_heads_leaves_the_parameters_unchanged():
    e = LayerCalculator()
    params = []
    for heads in (1, 2, 4, 8, 16):
        e.set(num_heads=heads)
        params.append(e.last_status.split("params=")[1].split(" ")[0])
    assert len(set(params)) == 1


def test_a_head_count_that_does_not_divide_chan_is_explained_without_a_traceback():
    e = LayerCalculator()
    e.set(num_heads=3)
    assert not e.valid
    with pytest.raises(ValueError) as problem:  # the library's one message for it, suggesting what the slider reaches
        check_heads(64, 3, most=16)
    assert f"not possible: {problem.value}" in e.last_status and "chan / num_heads = 21.3333" in e.last_status
    assert e.last_status.endswith("(try num_heads in [1, 2, 4, 8, 16])")  # not 32 or 64: the slider stops at 16
    assert "Traceback" not in e.status.value
    e.set(num_heads=2)
    assert e.valid and "head_dim=32" in e.last_status


def test_the_repr_is_one_stable_line_with_the_current_values():
    e = LayerCalculator()
    assert repr(e) == repr(LayerCalculator())
    assert "\n" not in repr(e) and repr(e).startswith("LayerCalculator(chan=64 num_heads=4 N=100")


def test_moving_away_and_back_gives_the_same_picture():
    """Only the bars, their labels and the title are redrawn on a move (blitting): nothing is left behind."""
    e = LayerCalculator()
    first = e.image.value
    e.set(num_heads=8, N=1500, chan=256)
    assert e.image.value != first
    e.set(num_heads=4, N=100, chan=64)
    assert e.image.value == first
