"""SkipExplorer (lesson 06) driven without a browser: each control changes the picture and the status
line, the impossible combination is explained in words, and the numbers match the helpers'."""

from __future__ import annotations

import math

import pytest
import torch

from attn_helpers import signal_through_stack
from attn_helpers.lab import AttentionStack
from attn_helpers.widgets.skip import seeded_stack
from attn_helpers.widgets import SkipExplorer


@pytest.fixture(scope="module")
def explorer() -> SkipExplorer:
    return SkipExplorer(depth=4)


def test_starts_valid_with_a_stable_one_line_repr(explorer):
    explorer.set(wiring="identity", depth=4, dim=64)
    assert explorer.valid
    text = repr(explorer)
    assert text.startswith("SkipExplorer(wiring=identity depth=4 dim=64 seed=0 v_scale=1 | output RMS ")
    assert "\n" not in text and "0x" not in text
    assert explorer._repr_mimebundle_()[0]["text/plain"] == text


@pytest.mark.parametrize("change", [dict(wiring="none"), dict(wiring="values"), dict(depth=9), dict(depth=1),
                                    dict(seed=3), dict(v_scale=math.sqrt(3.0))])
def test_each_control_changes_the_picture_and_the_status(explorer, change):
    explorer.set(wiring="identity", depth=4, dim=64, seed=0, v_scale=1.0)
    before_png, before_status = explorer.image.value, explorer.last_status
    explorer.set(**change)
    assert explorer.valid
    assert explorer.image.value != before_png
    assert explorer.last_status != before_status
    for name, value in change.items():
        assert f"{name}={value:g}" in explorer.last_status if isinstance(value, float) else f"{name}={value}" in explorer.last_status


def test_lines_are_updated_in_place_not_redrawn(explorer):
    explorer.set(wiring="identity", depth=4, dim=64)
    line = explorer.rms_line
    explorer.set(depth=12)
    assert explorer.rms_line is line
    assert len(line.get_xdata()) == 13  # the input and 12 layers
    assert len(explorer.grad_line.get_xdata()) == 12


def test_identity_skip_with_a_different_width_is_explained_in_words(explorer):
    explorer.set(wiring="identity", depth=4, dim=49)
    assert not explorer.valid
    assert "not possible" in explorer.last_status
    assert "widths must match" in explorer.last_status
    assert "Traceback" not in explorer.last_status
    explorer.set(wiring="values")  # the skip through V changes the width in layer 1: fine
    assert explorer.valid and "dim=49" in explorer.last_status
    explorer.set(dim=64, wiring="identity")
    assert explorer.valid


def test_numbers_are_the_helpers_numbers(explorer):
    explorer.set(wiring="none", depth=6, dim=64, seed=2, v_scale=1.0)
    stack = explorer._stack(64, 2)
    stack.wiring = "none"
    expected = signal_through_stack(stack, explorer.inputs[2, 64], depth=6)
    shown = explorer.measure("none", 6, 64, 2)
    for name, values in expected.items():
        assert torch.allclose(torch.as_tensor(shown[name]), values)
    assert f"gradient at layer 1 {expected['grad_norm'][0].item():.2g}" in explorer.last_status


def test_without_skip_the_tokens_collapse_and_with_it_they_do_not(explorer):
    for seed in range(3):
        collapsed = explorer.measure("none", 16, 64, seed)
        kept = explorer.measure("identity", 16, 64, seed)
        assert collapsed["token_std"][-1] == 0.0
        assert kept["token_std"][-1] > 0.5
        assert kept["grad_norm"][0] > 1e6 * collapsed["grad_norm"][0]


def test_scaling_w_v_scales_only_the_value_rows_and_keeps_the_tokens_apart_through_v(explorer):
    default, scaled = explorer._stack(64, 0, 1.0), explorer._stack(64, 0, math.sqrt(3.0))
    chan = explorer.chan
    for a, b in zip(default.layers, scaled.layers):
        torch.testing.assert_close(b.qkv.weight[:2 * chan], a.qkv.weight[:2 * chan])  # W_q, W_k untouched
        torch.testing.assert_close(b.qkv.weight[2 * chan:], a.qkv.weight[2 * chan:] * math.sqrt(3.0))
    shrunk = explorer.measure("values", 32, 64, 0, 1.0)
    kept = explorer.measure("values", 32, 64, 0, math.sqrt(3.0))
    assert shrunk["token_std"][-1] < 1e-6 < 0.5 < kept["token_std"][-1]


@pytest.mark.parametrize("kwargs", [dict(wiring="sideways"), dict(depth=0), dict(depth=33), dict(dim=50), dict(seed=8),
                                    dict(seed=-1), dict(v_scale=2.0)])
def test_bad_constructor_arguments_are_refused_with_their_name(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SkipExplorer(**kwargs)


def test_layers_after_the_first_are_shared_between_widths_and_the_global_rng_is_untouched():
    state = torch.random.get_rng_state()
    e = SkipExplorer(wiring="values", depth=3, dim=49)
    assert torch.equal(torch.random.get_rng_state(), state)
    wide, narrow = e._stack(64), e._stack(49)
    assert set(e.stacks) == {(0, 64, 1.0), (0, 49, 1.0)}
    assert narrow.layers[0].dim == 49 and wide.layers[0].dim == 64
    for a, b in zip(wide.layers[1:], narrow.layers[1:]):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_a_narrow_input_changes_only_the_first_layer_of_a_full_seeded_build():
    e = SkipExplorer(wiring="values", depth=2, dim=49, seed=3, v_scale=math.sqrt(3.0))
    full, _ = seeded_stack(32, 49, 64, 4, seed=3)  # what one seeded build of the narrow stack draws
    narrow, wide = e._stack(49, 3, math.sqrt(3.0)), e._stack(64, 3, math.sqrt(3.0))
    torch.testing.assert_close(narrow.layers[0].qkv.weight[:128], full.layers[0].qkv.weight[:128], rtol=0, atol=0)
    torch.testing.assert_close(narrow.layers[0].qkv.weight[128:], full.layers[0].qkv.weight[128:] * math.sqrt(3.0))
    torch.testing.assert_close(narrow.layers[0].proj.weight, full.layers[0].proj.weight, rtol=0, atol=0)
    assert all(a is b for a, b in zip(narrow.layers[1:], wide.layers[1:]))  # the same modules, W_v scaled once
    assert len(narrow.layers) == 32


@pytest.mark.parametrize("depth", [1, 2, 8, 32])
def test_layer_ticks_are_whole_numbers_and_follow_the_depth(explorer, depth):
    explorer.set(wiring="identity", depth=depth, dim=64)
    low, high = explorer.ax.get_xlim()
    marks = [t for t in explorer.ax.get_xticks() if low <= t <= high]
    assert len(marks) >= 2 and marks[0] == 0 and max(marks) <= depth and max(marks) > depth / 2
    assert all(float(t).is_integer() for t in marks)
    assert explorer.title.get_text().startswith("1 layer joined" if depth == 1 else f"{depth} layers joined")


def test_random_seed_k_shows_lesson_06s_seed_k():
    """The explorer's numbers for seed k are lesson 06's depth_sweep of seed k (its cells' draws)."""
    from attn_helpers.lab import depth_sweep

    e = SkipExplorer(wiring="identity", depth=32, seed=2)
    with torch.random.fork_rng():
        torch.manual_seed(2)
        stack = AttentionStack(32, 64, 64, 4).double()
        x = torch.randn(2, 8, 64, dtype=torch.float64)  # (B=2, N=8, chan), as lesson 06 draws it
    stack.wiring = "identity"
    lesson = depth_sweep(stack, x, [32])
    shown = e.measure("identity", 32, 64, 2)
    assert math.isclose(shown["rms"][-1], lesson["rms"][-1].item(), rel_tol=1e-9)
    assert math.isclose(shown["grad_norm"][0], lesson["grad_norm"][-1].item(), rel_tol=1e-9)


def test_the_longest_title_fits_in_the_figure():
    e = SkipExplorer(wiring="values", depth=32, seed=7, v_scale=math.sqrt(3.0))
    e.render_png()
    box = e.title.get_window_extent(e.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= e.figure.bbox.x1, (box, e.title.get_text())


def test_seeded_stack_layer_0_is_the_same_for_every_depth_and_w_v_is_scaled():
    state = torch.get_rng_state()
    full, x_full = seeded_stack(4, 49, 16, 2, seed=3)
    short, x_short = seeded_stack(1, 49, 16, 2, seed=3, v_scale=2.0, tail=seeded_stack(4, 16, 16, 2, seed=3)[0])
    assert torch.equal(torch.get_rng_state(), state)
    assert full.layers[0].qkv.weight.dtype == torch.float64 and len(short.layers) == 4
    assert x_full.shape == x_short.shape == (2, 8, 49) and x_full.dtype == torch.float64
    torch.testing.assert_close(short.layers[0].qkv.weight[:32], full.layers[0].qkv.weight[:32], rtol=0, atol=0)
    torch.testing.assert_close(short.layers[0].qkv.weight[32:], 2.0 * full.layers[0].qkv.weight[32:])
    torch.testing.assert_close(short.layers[0].proj.weight, full.layers[0].proj.weight, rtol=0, atol=0)


def test_seeded_stack_draws_what_lesson_06_draws_for_the_same_seed():
    """The explorer's "random seed k" is lesson 06's seed k: the cells' manual_seed, stack, .double(), input."""
    with torch.random.fork_rng():
        torch.manual_seed(5)
        lesson = AttentionStack(32, 64, 64, 4).double()
        x_lesson = torch.randn(2, 8, 64, dtype=torch.float64)
    ours, x_ours = seeded_stack(32, 64, 64, 4, seed=5)
    torch.testing.assert_close(x_ours, x_lesson, rtol=0, atol=0)
    for a, b in zip(ours.parameters(), lesson.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_title_fits_the_figure_at_every_depth(explorer):
    """At depth 32 the title was cut at the left edge; it must lie inside the figure for every setting."""
    width = explorer.canvas.get_width_height()[0]
    for wiring in ("identity", "values", "none"):
        for depth in (1, 9, 10, 32):
            explorer.set(wiring=wiring, depth=depth, dim=64, seed=7, v_scale=math.sqrt(3.0))
            box = explorer.title.get_window_extent(explorer.canvas.get_renderer())
            assert 0 <= box.x0 and box.x1 <= width, (wiring, depth, box)
