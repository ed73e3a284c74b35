"""ScoreStepsExplorer (12 · Attention in today's models) driven without a browser: every control changes the
picture and the status line; the window keeps only the last keys, a sink makes rows sum to less than one, the soft
cap changes scores of tens and barely changes scores of a few units; bad arguments are named."""

import pytest
import torch

from attn_helpers.core import sliding_window_mask
from attn_helpers.lab import weights_after_steps
from attn_helpers.widgets import ScoreStepsExplorer
from widget_support import assert_move_redraws


@pytest.fixture
def explorer():
    return ScoreStepsExplorer()


def test_starts_causal_with_every_row_summing_to_one(explorer):
    assert explorer.valid
    assert explorer.last_status == ("window=8 softcap=0 use_sink=False sink=0 spread=1 | row sums: "
                                    + " ".join(["1.00"] * 8))
    assert torch.equal(explorer.weights > 0, sliding_window_mask(8, window=8))


@pytest.mark.parametrize("change, expected", [
    ({"window": 3}, "window=3 "),
    ({"softcap": 1.0}, "softcap=1 "),
    ({"use_sink": True, "sink": 1.0}, "use_sink=True sink=1 "),
    ({"spread": 10.0}, "spread=10 "),
])
def test_every_control_changes_picture_and_status(explorer, change, expected):
    assert_move_redraws(explorer, change, expected)


def test_the_window_keeps_the_last_keys_only(explorer):
    explorer.set(window=3)
    assert torch.equal(explorer.weights > 0, sliding_window_mask(8, window=3))


def test_a_sink_takes_a_share_of_every_row(explorer):
    explorer.set(use_sink=True, sink=2.0)
    sums = explorer.weights.sum(-1)
    assert (sums < 1).all() and (sums > 0).all()


def test_the_cap_matters_for_scores_of_tens_not_of_units():
    units, tens = ScoreStepsExplorer(), ScoreStepsExplorer(spread=10.0)
    for explorer in (units, tens):
        before = explorer.weights.clone()
        explorer.set(softcap=10.0)
        explorer.change = (explorer.weights - before).abs().max().item()
    assert units.change < 0.05 < tens.change


def test_it_shows_the_library_weights():
    explorer = ScoreStepsExplorer(window=4, softcap=3.0, sink=1.5, spread=10.0)
    expected = weights_after_steps(explorer.base_scores * 10.0, window=4, softcap=3.0, sink=1.5)
    torch.testing.assert_close(explorer.weights, expected)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"window must be an int in \[1, 8\]"):
        ScoreStepsExplorer(window=0)
    with pytest.raises(ValueError, match="spread must be one of"):
        ScoreStepsExplorer(spread=3.0)


def test_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    ScoreStepsExplorer().set(window=2)
    assert torch.equal(torch.get_rng_state(), state)
