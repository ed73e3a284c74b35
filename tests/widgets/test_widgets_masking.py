"""MaskExplorer (lesson 03) driven without a browser, and the NaN-visible colormap it draws with: every control
changes the picture and the status line of row sums, each convention answers a fully masked row in
its own way, temperature 0 is explained in words, and the global RNG is left alone."""

import pytest
import torch

from attn_helpers.views import NAN_COLOUR, cmap_with_nan
from attn_helpers.core import attention_scores, causal_mask, scaled_dot_product_attention
from attn_helpers.widgets import MaskExplorer
from attn_helpers.widgets.masking import CONVENTIONS, keep_mask, masked_weights
from widget_support import assert_move_redraws


@pytest.fixture
def explorer():
    return MaskExplorer()


def test_starts_valid_with_every_row_summing_to_one(explorer):
    assert explorer.valid
    assert explorer.last_status == ("temperature=1 mask=causal+padding convention=keep | "
                                    "row sums: " + " ".join(["1.00"] * 8))
    assert repr(explorer) == f"MaskExplorer({explorer.last_status})"


@pytest.mark.parametrize("change, expected", [
    ({"temperature": 0.3}, "temperature=0.3 "),
    ({"mask": "none"}, "mask=none "),
    ({"mask": "padding (queries too)"}, "row sums: 1.00 1.00 1.00 1.00 1.00 1.00 0.00 0.00"),
])
def test_every_control_changes_picture_and_status(explorer, change, expected):
    assert_move_redraws(explorer, change, expected)


@pytest.mark.parametrize("convention, dead_row_sum", [("keep", "0.00"), ("blocked", "nan"), ("-1e9", "1.00")])
def test_each_convention_answers_a_fully_masked_row_its_own_way(explorer, convention, dead_row_sum):
    explorer.set(mask="padding (queries too)", convention=convention)
    assert explorer.valid
    assert explorer.last_status.endswith(f"1.00 {dead_row_sum} {dead_row_sum}")
    assert f"convention={convention} " in explorer.last_status


def test_conventions_change_the_picture_only_when_a_row_is_fully_masked(explorer):
    explorer.set(mask="causal+padding", convention="keep")
    keep_png = explorer.image.value
    explorer.set(convention="blocked")
    assert explorer.image.value == keep_png  # no dead row: identical weights, identical picture
    explorer.set(mask="padding (queries too)")
    nan_png = explorer.image.value
    explorer.set(convention="keep")
    assert explorer.image.value != nan_png


def test_temperature_zero_is_explained_in_words(explorer):
    explorer.set(temperature=0.0)
    assert not explorer.valid
    assert "not possible" in explorer.last_status and "divide the scores by zero" in explorer.last_status
    assert "Traceback" not in explorer.last_status
    assert explorer.image.layout.visibility == "hidden"
    explorer.set(temperature=0.05)
    assert explorer.valid and explorer.image.layout.visibility == "visible"


def test_takes_the_lessons_scores_and_checks_their_shape():
    scores = torch.randn(1, 5, 5)
    explorer = MaskExplorer(scores, ["a", "b", "c", "d", "<pad>"], length=4)
    assert explorer.valid and explorer.last_status.count("1.00") == 5
    with pytest.raises(ValueError, match=r"scores must have shape \(N, N\) = \(5, 5\)"):
        MaskExplorer(torch.randn(4, 4), ["a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="length must lie in"):
        MaskExplorer(torch.randn(3, 3), ["a", "b", "c"], length=0)


def test_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    MaskExplorer().set(temperature=2.0)
    assert torch.equal(torch.get_rng_state(), state)


def test_cmap_with_nan_paints_nan_grey():
    import matplotlib
    import matplotlib.colors as mcolors

    cmap = cmap_with_nan()
    assert mcolors.to_hex(cmap(float("nan"))) == mcolors.to_hex(NAN_COLOUR)
    assert mcolors.to_hex(cmap(0.0)) == mcolors.to_hex(matplotlib.colormaps["viridis"](0.0))


def test_cmap_with_nan_paints_infinities_grey_so_annotations_stay_readable():
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    from attn_helpers.views import heatmap

    fig, ax = plt.subplots()
    image = heatmap(torch.tensor([[0.0, float("-inf")], [float("nan"), 0.0]]), ax=ax, cmap=cmap_with_nan(),
                    vmin=-1, vmax=0, fmt="{:g}", colorbar=False)
    grey = mcolors.to_hex(NAN_COLOUR)
    assert mcolors.to_hex(image.get_cmap()(image.norm(float("-inf")))) == grey
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    assert texts["-inf"] == "black" and texts["nan"] == "black"  # dark text on the light grey
    plt.close(fig)


def test_keep_mask_of_every_type():
    n, length = 5, 3
    assert keep_mask("none", n, length).all()
    assert torch.equal(keep_mask("causal", n, length), causal_mask(n))
    padding = keep_mask("padding", n, length)
    assert padding[:, :length].all() and not padding[:, length:].any()
    assert torch.equal(keep_mask("causal+padding", n, length), causal_mask(n) & padding)
    both = keep_mask("padding (queries too)", n, length)
    assert not both[length:].any() and both[:length, :length].all()


def test_the_conventions_match_the_library_and_differ_only_on_dead_rows():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(6, 4, generator=g) for _ in range(3))
    keep = keep_mask("padding (queries too)", 6, 4)
    _, reference = scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    weights = {value: masked_weights(attention_scores(q, k), keep, value) for _, value in CONVENTIONS}
    torch.testing.assert_close(weights["keep"], reference)
    for w in weights.values():
        torch.testing.assert_close(w[:4], reference[:4])
    assert weights["blocked"][4:].isnan().all() and (weights["keep"][4:] == 0).all()
    torch.testing.assert_close(weights["-1e9"][4:], torch.full((2, 6), 1 / 6))
    scores = torch.tensor([[1.0, 2.0, 3.0]])  # the temperature divides the scores
    torch.testing.assert_close(masked_weights(scores, torch.ones(1, 3, dtype=torch.bool), "keep", 0.5),
                               torch.softmax(scores / 0.5, dim=-1))
