"""ValuesExplorer (lesson 04) driven without a browser, and the plotting helpers it draws with:
picking a query, the temperature and the mask change the picture and the status line, the selected
output is the weighted average of the values, temperature 0 is explained in words."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attn_helpers.views import convex_hull, values_plot
from attn_helpers.widgets import ValuesExplorer



@pytest.fixture
def explorer():
    return ValuesExplorer()


def test_starts_valid_on_query_two(explorer):
    assert explorer.valid
    assert explorer.last_status.startswith("query=2 temperature=1 mask=none | weights ")
    assert repr(explorer) == f"ValuesExplorer({explorer.last_status})"


@pytest.mark.parametrize("change, expected", [
    ({"query": 4}, "query=4 "),
    ({"temperature": 0.2}, "temperature=0.2 "),
    ({"mask": "causal"}, "mask=causal "),
])
def test_every_control_changes_picture_and_status(explorer, change, expected):
    before, before_status = explorer.image.value, explorer.last_status
    explorer.set(**change)
    assert explorer.valid
    assert explorer.image.value != before
    assert expected in explorer.last_status and explorer.last_status != before_status


def test_status_shows_the_weights_and_their_weighted_average():
    v = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    scores = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    explorer = ValuesExplorer(v, scores, ["a", "b", "c"])
    explorer.set(query=1)
    assert explorer.last_status.endswith("weights 0.33 0.33 0.33 | context (0.33, 0.33)")
    explorer.set(mask="causal", query=0)
    assert explorer.last_status.endswith("weights 1.00 0.00 0.00 | context (0.00, 0.00)")


def test_temperature_zero_is_explained_in_words(explorer):
    explorer.set(temperature=0.0)
    assert not explorer.valid
    assert "not possible" in explorer.last_status and "divide the scores by zero" in explorer.last_status
    assert explorer.image.layout.visibility == "hidden"
    explorer.set(temperature=1.0)
    assert explorer.valid


def test_checks_the_shapes_it_is_given():
    with pytest.raises(ValueError, match=r"v must have shape \(N, 2\) = \(3, 2\)"):
        ValuesExplorer(torch.zeros(3, 4), torch.zeros(3, 3), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"scores must have shape \(N, N\) = \(3, 3\)"):
        ValuesExplorer(torch.zeros(3, 2), torch.zeros(3, 4), ["a", "b", "c"])


def test_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    ValuesExplorer().set(query=0)
    assert torch.equal(torch.get_rng_state(), state)


# -- plotting helpers -------------------------------------------------------------------------------

def test_convex_hull_of_a_square_with_inner_and_edge_points():
    points = np.array([[0, 0], [2, 0], [2, 2], [0, 2], [1, 1], [1, 0]], dtype=float)
    hull = convex_hull(points)
    assert {tuple(p) for p in hull} == {(0, 0), (2, 0), (2, 2), (0, 2)}
    x, y = hull[:, 0], hull[:, 1]
    assert 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y) > 0  # counter-clockwise: positive area


def test_convex_hull_contains_every_convex_combination():
    from matplotlib.path import Path

    g = torch.Generator().manual_seed(5)
    values = torch.randn(7, 2, generator=g)
    weights = torch.softmax(torch.randn(50, 7, generator=g) * 3, dim=-1)
    outputs = (weights @ values).numpy()
    assert Path(convex_hull(values)).contains_points(outputs, radius=1e-9).all()


def test_convex_hull_small_and_bad_inputs():
    assert convex_hull(torch.tensor([[1.0, 2.0], [1.0, 2.0]])).shape == (1, 2)
    assert convex_hull(np.zeros((0, 2))).shape == (0, 2)
    with pytest.raises(ValueError, match=r"points must have shape \(n, 2\), got \[4, 3\]"):
        convex_hull(np.zeros((4, 3)))


def test_values_plot_returns_its_artists_and_checks_shapes():
    fig, ax = plt.subplots()
    art = values_plot(torch.randn(5, 2), torch.randn(3, 2), list("abcde"), ax=ax, title="t")
    assert art["values"].get_offsets().shape == (5, 2) and art["outputs"].get_offsets().shape == (3, 2)
    assert [t.get_text() for t in art["labels"]] == list("abcde") and ax.get_title() == "t"
    assert values_plot(torch.randn(4, 2), ax=plt.subplots()[1])["outputs"] is None
    with pytest.raises(ValueError, match=r"values must have shape \(N_k, 2\)"):
        values_plot(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"outputs must have shape \(N_q, 2\)"):
        values_plot(torch.randn(5, 2), torch.randn(3))
    with pytest.raises(ValueError, match="labels has 2 labels"):
        values_plot(torch.randn(5, 2), labels=["a", "b"])
    plt.close("all")


def test_the_causal_mask_blocks_later_keys_and_the_output_is_the_weighted_values():
    explorer = ValuesExplorer()
    explorer.set(query=1, temperature=2.0, mask="causal")
    weights, context = explorer._computed  # (N, N), (N, 2)
    assert (weights.triu(1) == 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(len(explorer.tokens)))
    torch.testing.assert_close(context, weights @ explorer.v)
