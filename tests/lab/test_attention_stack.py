"""AttentionStack, signal_through_stack and depth_sweep: what lesson 06 measures about skip connections."""

from __future__ import annotations

import math

import pytest
import torch

from attn_helpers import Attention, AttentionStack, depth_sweep, merge_heads, signal_through_stack
from attn_helpers.lab import SKIP_KINDS


@pytest.fixture(scope="module")
def stack() -> AttentionStack:
    torch.manual_seed(0)
    return AttentionStack(6, 16, 16, num_heads=2).double()


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    return torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def _by_hand(stack: AttentionStack, x: torch.Tensor, skip: str, depth: int) -> list[torch.Tensor]:
    hidden = [x]
    for layer in stack.layers[:depth]:
        out, inter = layer(hidden[-1], return_intermediates=True)
        projected, v = inter["projected"], merge_heads(inter["v"])  # each (B, N, chan)
        hidden.append({"identity": hidden[-1] + projected, "values": projected + v, "none": projected}[skip])
    return hidden


@pytest.mark.parametrize("skip", SKIP_KINDS)
def test_each_wiring_is_the_formula(stack, x, skip):
    stack.wiring = skip
    out, hidden = stack(x, depth=4, return_hidden=True)
    expected = _by_hand(stack, x, skip, 4)
    assert len(hidden) == 5 and hidden[0] is x
    for got, want in zip(hidden, expected):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(out, expected[-1])


def test_values_wiring_is_seed_000s_layer(stack, x):
    stack.wiring = "values"
    torch.testing.assert_close(stack(x, depth=1), stack.layers[0](x))


def test_a_width_changing_first_layer():
    torch.manual_seed(0)
    stack = AttentionStack(3, 49, 64, num_heads=4, wiring="values")
    assert isinstance(stack.layers[0], Attention) and stack.layers[0].dim == 49 and stack.layers[1].dim == 64
    assert stack(torch.randn(2, 7, 49)).shape == (2, 7, 64)
    stack.wiring = "identity"
    with pytest.raises(ValueError, match=r"wiring='identity'.*dim=49.*chan=64"):
        stack(torch.randn(2, 7, 49))


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: AttentionStack(0, 8, 8), "depth"),
        (lambda: AttentionStack(2, 8, 8, wiring="sideways"), "wiring must be one of"),
        (lambda: AttentionStack(2, 8, 6, num_heads=4), "divisible"),
    ],
)
def test_bad_construction_names_the_argument(make, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        make()


def test_bad_calls_name_the_argument_and_the_shapes(stack, x):
    stack.wiring = "none"
    with pytest.raises(ValueError, match="depth=7 is more than the stack's 6 layers"):
        stack(x, depth=7)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, dim=16\), got \[2, 5, 8\]"):
        stack(torch.randn(2, 5, 8, dtype=torch.float64))
    stack.wiring = "diagonal"
    with pytest.raises(ValueError, match="wiring must be one of"):
        stack(x)
    stack.wiring = "none"


def test_signal_through_stack_measures_rms_token_std_and_every_layers_gradient(stack, x):
    stack.wiring = "identity"
    result = signal_through_stack(stack, x, depth=3)
    assert set(result) == {"rms", "token_std", "grad_norm"}
    assert result["rms"].shape == (4,) and result["token_std"].shape == (4,) and result["grad_norm"].shape == (3,)
    hidden = _by_hand(stack, x, "identity", 3)
    torch.testing.assert_close(result["rms"], torch.stack([h.pow(2).mean().sqrt() for h in hidden]).detach())
    torch.testing.assert_close(result["token_std"], torch.stack([h.std(dim=1).mean() for h in hidden]).detach())
    hidden[-1].norm().backward()
    for layer, norm in zip(stack.layers[:3], result["grad_norm"]):
        by_backward = math.sqrt(sum(p.grad.pow(2).sum().item() for p in layer.parameters()))
        assert norm.item() == pytest.approx(by_backward, rel=1e-9)
    stack.zero_grad(set_to_none=True)


def test_signal_through_stack_leaves_no_gradients_behind(stack, x):
    stack.zero_grad(set_to_none=True)
    signal_through_stack(stack, x)
    assert all(p.grad is None for p in stack.parameters())


def test_token_std_below_rounding_noise_is_reported_as_zero(stack, x):
    stack.wiring = "none"
    result = signal_through_stack(stack, x)
    assert result["token_std"][-1] == 0.0  # without a skip the tokens become one vector
    stack.wiring = "identity"
    assert signal_through_stack(stack, x)["token_std"][-1] > 0.1


def test_depth_sweep_agrees_with_signal_through_stack_at_every_depth(stack, x):
    for skip in SKIP_KINDS:
        stack.wiring = skip
        sweep = depth_sweep(stack, x, [1, 3, 6])
        for i, depth in enumerate((1, 3, 6)):
            single = signal_through_stack(stack, x, depth=depth)
            for key in ("rms", "token_std"):
                assert sweep[key][i].item() == pytest.approx(single[key][-1].item(), rel=1e-9, abs=1e-300)
            assert sweep["grad_norm"][i].item() == pytest.approx(single["grad_norm"][0].item(), rel=1e-9)


def test_the_skip_keeps_the_gradient_at_the_first_layer_and_no_skip_loses_it(stack, x):
    stack.wiring = "identity"
    kept = depth_sweep(stack, x, [1, 6])["grad_norm"]
    stack.wiring = "none"
    lost = depth_sweep(stack, x, [1, 6])["grad_norm"]
    assert kept[1] > 0.5 * kept[0]
    assert lost[1] < 0.01 * lost[0]


def test_depth_sweep_rejects_bad_depths(stack, x):
    with pytest.raises(ValueError, match="go beyond the stack's 6 layers"):
        depth_sweep(stack, x, [1, 7])
    with pytest.raises(ValueError, match="at least one depth"):
        depth_sweep(stack, x, [])
    with pytest.raises(TypeError, match="AttentionStack"):
        depth_sweep(torch.nn.Linear(2, 2), x, [1])
    with pytest.raises(TypeError, match="AttentionStack"):
        signal_through_stack(torch.nn.Linear(2, 2), x)


def test_measurements_restore_the_thread_count(stack, x):
    before = torch.get_num_threads()
    signal_through_stack(stack, x, depth=2)
    depth_sweep(stack, x, [1, 2])
    assert torch.get_num_threads() == before


def test_the_wiring_is_a_parameter_and_an_attribute_named_wiring():
    stack = AttentionStack(2, 8, 8, 2, wiring="values")
    assert stack.wiring == "values" and "wiring='values'" in repr(stack)
    stack.wiring = "none"
    assert "wiring='none'" in repr(stack)
    with pytest.raises(TypeError):
        AttentionStack(2, 8, 8, 2, skip="values")  # skip names the tensor added, never the wiring
