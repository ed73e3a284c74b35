"""block_heatmap and origin_grid: the pictures of which features belong to which head (lessons 05, 06)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgba
import numpy as np
import pytest
import torch

from attn_helpers import split_heads
from attn_helpers import views


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_block_heatmap_draws_the_matrix_with_one_named_strip_per_block():
    weight = torch.randn(8, 12, requires_grad=True)
    _, ax = plt.subplots()
    image = views.block_heatmap(weight, col_blocks=[("head 0", 4), ("head 1", 4), ("head 2", 4)], ax=ax, title="w")
    np.testing.assert_allclose(image.get_array(), weight.detach().numpy())
    assert [t.get_text() for t in ax.texts] == ["head 0", "head 1", "head 2"]
    assert len(ax.lines) == 2  # separators between the three blocks
    assert image.norm.vmin == -image.norm.vmax  # signed values centred on zero


def test_block_heatmap_rows_and_custom_colours():
    _, ax = plt.subplots()
    views.block_heatmap(np.ones((6, 3)), row_blocks=[("q", 2), ("k", 2), ("v", 2)], block_colours=["red", "green", "blue"],
                           ax=ax, colorbar=False)
    colours = [p.get_facecolor() for p in ax.patches]
    assert colours == [to_rgba(c) for c in ("red", "green", "blue")]


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (dict(col_blocks=[("a", 5), ("b", 5)]), r"col_blocks sizes \[5, 5\] must be positive and add up to 12"),
        (dict(row_blocks=[("a", 8), ("b", 0)]), "row_blocks sizes"),
        (dict(col_blocks=[("a", 6), ("b", 6)], block_colours=["red"]), "1 colours for 2 blocks"),
    ],
)
def test_block_heatmap_rejects_blocks_that_do_not_fit(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        views.block_heatmap(np.zeros((8, 12)), **kwargs)


def test_block_heatmap_needs_a_matrix():
    with pytest.raises(ValueError, match="2-D matrix"):
        views.block_heatmap(np.zeros((2, 3, 4)))


def test_origin_grid_colours_by_token_and_labels_by_feature():
    ids = torch.arange(4 * 8, dtype=torch.float32).reshape(1, 4, 8)
    figure = views.origin_grid({"right": split_heads(ids, 2)[0], "view": ids.view(1, 2, 4, 4)[0]}, chan=8,
                                  token_labels=list("abcd"))
    axes = [ax for ax in figure.axes if ax.images]
    assert len(axes) == 4  # 2 rows x 2 heads
    right_head1 = [t.get_text() for t in axes[1].texts]
    assert right_head1[:4] == ["f4", "f5", "f6", "f7"]
    colours = axes[2].images[0].get_array()  # "view", head 0: rows 0-1 from token a, rows 2-3 from token b
    assert np.allclose(colours[0], colours[1]) and not np.allclose(colours[1], colours[2])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == list("abcd")


@pytest.mark.parametrize(
    ("splits", "chan", "pattern"),
    [
        ({}, 8, "at least one"),
        ({"a": torch.zeros(2, 4)}, 8, r"shape \(H, N, head_dim\)"),
        ({"a": torch.zeros(2, 4, 4), "b": torch.zeros(2, 4, 2)}, 8, "same shape"),
        ({"a": torch.zeros(2, 4, 4)}, 6, "chan must be H \\* head_dim = 8"),
        ({"a": torch.full((2, 4, 4), 40.0)}, 8, "whole flat indices"),
    ],
)
def test_origin_grid_rejects_bad_splits(splits, chan, pattern):
    with pytest.raises(ValueError, match=pattern):
        views.origin_grid(splits, chan=chan)
