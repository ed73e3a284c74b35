"""ScalingExplorer (lesson 02) driven without a browser: every control changes the picture and the
status line, a zero temperature is explained in words, and the numbers follow the lesson's claims."""

import math
import re

import pytest
import torch

from attn_helpers.widgets import ScalingExplorer
from widget_support import assert_move_redraws


def _status_number(explorer, name):
    return float(re.search(rf"{name} ([0-9.]+)", explorer.last_status).group(1))


@pytest.fixture
def explorer():
    return ScalingExplorer()


def test_starts_scaled_at_d_k_64(explorer):
    assert explorer.valid
    assert explorer.last_status.startswith("d_k=64 scaled=True temperature=1 query=2 | raw_scores × 0.125")
    assert repr(explorer) == f"ScalingExplorer({explorer.last_status})"


@pytest.mark.parametrize("change, expected", [
    ({"d_k": 1024}, "d_k=1024"),
    ({"scaled": False}, "raw_scores × 1 |"),
    ({"temperature": 0.5}, "raw_scores × 0.25 |"),
    ({"query": 4}, "query=4"),
])
def test_every_control_changes_picture_and_status(explorer, change, expected):
    assert_move_redraws(explorer, change, expected)


def test_unscaled_large_d_k_saturates_and_scaling_undoes_it(explorer):
    explorer.set(d_k=1024, scaled=False)
    assert _status_number(explorer, "variance") > 100
    assert _status_number(explorer, "max weight") > 0.9
    assert _status_number(explorer, "entropy") < 0.3
    explorer.set(scaled=True)
    assert _status_number(explorer, "variance") < 3
    assert _status_number(explorer, "entropy") > 1.0


def test_higher_temperature_flattens(explorer):
    explorer.set(temperature=0.25)
    sharp = _status_number(explorer, "entropy")
    explorer.set(temperature=4.0)
    assert _status_number(explorer, "entropy") > sharp


def test_zero_temperature_is_explained_in_words(explorer):
    explorer.set(temperature=0.0)
    assert not explorer.valid
    assert "not possible: temperature 0 would divide the scores by zero" in explorer.last_status
    assert "Traceback" not in explorer.last_status
    assert explorer.image.layout.visibility == "hidden"
    explorer.set(temperature=1.0)
    assert explorer.valid and explorer.image.layout.visibility == "visible"


def test_bars_show_the_selected_row(explorer):
    explorer.set(query=3)
    heights = [bar.get_height() for bar in explorer.bars]
    assert math.isclose(sum(heights), 1.0, rel_tol=1e-5)
    assert heights == pytest.approx(explorer.map_image.get_array()[3].tolist())


def test_same_values_draw_the_same_picture_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = ScalingExplorer(), ScalingExplorer()
    assert a.image.value == b.image.value
    assert torch.equal(state, torch.random.get_rng_state())


def test_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="d_k must be one of"):
        ScalingExplorer(d_k=100)
    with pytest.raises(ValueError, match="query must be a token index"):
        ScalingExplorer(["a", "b"], query=2)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        ScalingExplorer(["a"])
