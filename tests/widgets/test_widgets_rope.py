"""RopeExplorer (10 · Positions) driven without a browser: both sliders change the picture and the status
line in the form the browser tests parse, the numbers are apply_rope's, and bad arguments are refused."""

from __future__ import annotations

import math
import re

import pytest
import torch

from attn_helpers import apply_rope, rope_frequencies
from attn_helpers.widgets import Explorer, RopeExplorer
from attn_helpers.widgets.rope import KEY_POSITION
from tools.browser_support import parse_status


@pytest.fixture(scope="module")
def explorer() -> RopeExplorer:
    return RopeExplorer()


def _score(explorer: RopeExplorer) -> float:
    return float(re.search(r"score q·k = (-?[0-9.]+)", explorer.last_status).group(1))


def test_starts_valid_with_a_stable_status_line_the_browser_tests_can_parse(explorer):
    explorer.set(offset=3, pair=2)
    assert explorer.valid and isinstance(explorer, Explorer)
    values, rest = parse_status(explorer.last_status)
    assert values == {"offset": "3", "pair": "2"}
    assert rest.startswith("pair 2 turns 0.1 rad per position, arrows 17° apart")
    assert repr(explorer) == f"RopeExplorer({explorer.last_status})" == repr(RopeExplorer())
    assert "\n" not in repr(explorer) and "0x" not in repr(explorer)
    assert explorer._repr_mimebundle_()[0]["text/plain"] == repr(explorer)


@pytest.mark.parametrize("change", [dict(offset=4), dict(offset=-32), dict(offset=32), dict(pair=0), dict(pair=7)])
def test_each_slider_changes_the_picture_and_the_status(explorer, change):
    explorer.set(offset=3, pair=2)
    before_png, before_status = explorer.image.value, explorer.last_status
    explorer.set(**change)
    assert explorer.valid
    assert explorer.image.value != before_png and explorer.last_status != before_status
    for name, value in change.items():
        assert parse_status(explorer.last_status)[0][name] == str(value)


def test_every_slider_position_draws_without_a_traceback(explorer):
    for offset in range(-32, 33, 7):
        for pair in range(8):
            explorer.set(offset=offset, pair=pair)
            assert explorer.valid, explorer.last_status
    explorer.set(offset=3, pair=2)


def test_the_score_is_the_rotated_dot_product_at_the_shown_positions(explorer):
    for offset in (-20, 0, 5, 31):
        explorer.set(offset=offset, pair=1)
        q = apply_rope(explorer.q[None], [KEY_POSITION + offset])[0]
        k = apply_rope(explorer.k[None], [KEY_POSITION])[0]
        assert _score(explorer) == pytest.approx(float(q @ k), abs=0.006)  # printed with 2 decimals
        assert f"m = {KEY_POSITION + offset}, key at n = {KEY_POSITION}" in explorer.title.get_text()


def test_the_score_is_largest_at_offset_zero_and_the_arrows_turn_by_the_offset(explorer):
    assert explorer.raw_scores.argmax() == explorer.max_offset  # q = k: the largest score is q·q, at offset 0
    explorer.set(offset=1, pair=0)
    assert "arrows 57° apart" in explorer.last_status  # the fastest pair turns 1 radian per position
    explorer.set(offset=10, pair=7)
    assert "arrows 0° apart" in explorer.last_status  # the slowest pair has not moved visibly
    q_pairs, k_pairs = explorer.arrows(10)
    angle = math.atan2(q_pairs[0, 1], q_pairs[0, 0]) - math.atan2(k_pairs[0, 1], k_pairs[0, 0])
    assert math.isclose(math.remainder(angle - 10 * rope_frequencies(16)[0].item(), 2 * math.pi), 0.0, abs_tol=1e-9)
    explorer.set(offset=3, pair=2)


def test_table_lists_every_pair_with_its_speed(explorer):
    explorer.set(offset=3, pair=2)
    html = explorer.table_html.value
    assert html.count("<tr") == 9  # header + 8 pairs
    assert "font-weight:bold'><td>2</td>" in html
    assert "63" in html  # the 2π/0.1 ≈ 63 positions per full turn of pair 2


def test_same_arguments_draw_the_same_picture_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    assert RopeExplorer(offset=5).image.value == RopeExplorer(offset=5).image.value
    assert torch.equal(state, torch.random.get_rng_state())


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="offset must lie in"):
        RopeExplorer(offset=40)
    with pytest.raises(ValueError, match=r"pair must be a pair index in \[0, 7\]"):
        RopeExplorer(pair=8)
    with pytest.raises(ValueError, match="head_dim must be an even number"):
        RopeExplorer(head_dim=7)
    with pytest.raises(ValueError, match="max_offset must be an int"):
        RopeExplorer(max_offset=100)


def test_each_panel_title_names_its_pair_and_what_the_offset_does_to_it(explorer):
    explorer.set(offset=1, pair=2)
    titles = [title.get_text() for title in explorer.titles]
    assert titles[0].startswith("fastest: pair 0, θ = 1\napart 57°, term ")
    assert titles[1].startswith("chosen: pair 2, θ = 0.1\n") and titles[2].startswith("slowest: pair 7, θ = ")
    explorer.set(offset=2)  # the pair lines stay, the second lines follow the offset
    assert explorer.titles[0].get_text().startswith("fastest: pair 0, θ = 1\napart 115°, term ")


def test_the_query_arrow_shows_on_top_of_the_key_where_they_overlap(explorer):
    """At offset 0 query and key point the same way in every panel: the picture a learner gets (the kept picture plus
    the redrawn arrows) shows the blue query on the wider orange key, as a full draw stacks them (a reader found only
    orange when the keys were redrawn last)."""
    import io

    import numpy as np
    from matplotlib.colors import to_rgb
    from PIL import Image

    from attn_helpers.widgets.rope import K_COLOUR, Q_COLOUR

    explorer.set(offset=0)
    pixels = np.asarray(Image.open(io.BytesIO(explorer.render_png())).convert("RGB")).astype(int)

    def count(colour: str) -> int:
        return int((np.abs(pixels - np.array(to_rgb(colour)) * 255).sum(axis=-1) < 30).sum())

    assert count(K_COLOUR) > 0
    assert count(Q_COLOUR) > 100, f"{count(Q_COLOUR)} query-blue pixels at offset 0"
