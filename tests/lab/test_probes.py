"""attn_helpers.lab.measure's softmax measurements of lesson 02, and lesson 06's depth_sweep (lab.wiring) against
the loop the lesson writes out and the claims the lesson makes from it (the stack itself is tested in test_attention_stack.py)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import AttentionStack, depth_sweep, softmax_grad_norm, softmax_statistics
from attn_helpers.lab import SKIP_KINDS


def test_softmax_grad_norm_equals_autograd():
    g = torch.Generator().manual_seed(0)
    scores = (torch.randn(3, 4, 6, generator=g) * 3).requires_grad_()
    upstream = torch.randn(3, 4, 6, generator=g)
    (torch.softmax(scores, dim=-1) * upstream).sum().backward()
    torch.testing.assert_close(softmax_grad_norm(scores.detach(), upstream), scores.grad.norm(dim=-1))


def test_softmax_grad_norm_vanishes_for_saturated_rows():
    scores = torch.tensor([[100.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    upstream = torch.tensor([[1.0, -2.0, 3.0], [1.0, -2.0, 3.0]])
    norms = softmax_grad_norm(scores, upstream)
    assert norms.shape == (2,)
    assert norms[0] < 1e-6 < norms[1]


def test_softmax_grad_norm_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"upstream must have the shape of scores.*\[2, 3\].*\[3, 2\]"):
        softmax_grad_norm(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="scores must be a floating-point tensor"):
        softmax_grad_norm(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3))


def test_softmax_statistics_uniform_and_one_hot_rows():
    uniform = softmax_statistics(torch.zeros(5, 8))
    assert uniform["variance"] == 0.0 and "grad_norm" not in uniform
    assert math.isclose(uniform["max_weight"], 1 / 8, rel_tol=1e-6)
    assert math.isclose(uniform["entropy"], math.log(8), rel_tol=1e-6)
    peaked = softmax_statistics(torch.tensor([[50.0, 0.0, 0.0]]), torch.tensor([[1.0, 2.0, 3.0]]))
    assert peaked["max_weight"] > 0.999 and peaked["entropy"] < 1e-6 and peaked["grad_norm"] < 1e-6


def test_softmax_statistics_variance_grows_with_d_k_and_scaling_undoes_it():
    g = torch.Generator().manual_seed(1)
    for d_k in (16, 256):
        q, k = torch.randn(8, 64, d_k, generator=g), torch.randn(8, 64, d_k, generator=g)
        raw = q @ k.mT
        assert abs(softmax_statistics(raw)["variance"] / d_k - 1) < 0.1
        assert abs(softmax_statistics(raw / math.sqrt(d_k))["variance"] - 1) < 0.1


# ------------------------------------------------------------------------------ lesson 06: depth_sweep


def _lesson_loop(stack, x, skip, depths):
    """The loop lesson 06 writes out (next_hidden + measure_depths), without depth_sweep's zero floor."""
    hidden = [x]
    for layer in stack.layers[:max(depths)]:
        out, inter = layer(hidden[-1], return_intermediates=True)
        hidden.append({"identity": hidden[-1] + inter["projected"], "values": out, "none": inter["projected"]}[skip])
    first = list(stack.layers[0].parameters())
    rows = []
    for L in depths:
        grads = torch.autograd.grad(hidden[L].norm(), first, retain_graph=True)
        rows.append([hidden[L].pow(2).mean().sqrt().item(), hidden[L].std(dim=1).mean().item(),
                     torch.sqrt(sum(g.pow(2).sum() for g in grads)).item()])
    return dict(zip(("rms", "token_std", "grad_norm"), torch.tensor(rows, dtype=torch.float64).T))


def _seeded_stack(seed, depth=32, chan=64, num_heads=4):
    torch.manual_seed(seed)
    stack = AttentionStack(depth, chan, chan, num_heads).double()
    return stack, torch.randn(2, 8, chan, dtype=torch.float64)


@pytest.mark.parametrize("skip", SKIP_KINDS)
@pytest.mark.parametrize("seed", [0, 4])
def test_depth_sweep_equals_the_loop_lesson_06_writes_out(skip, seed):
    stack, x = _seeded_stack(seed)
    stack.wiring = skip
    depths = [1, 2, 4, 8, 16, 32]
    ours, helper = _lesson_loop(stack, x, skip, depths), depth_sweep(stack, x, depths)
    for key in ours:
        torch.testing.assert_close(helper[key], ours[key], rtol=1e-6, atol=1e-12)


def test_depth_sweep_gives_the_same_digits_whatever_the_thread_count():
    stack, x = _seeded_stack(1, depth=8)
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(depth_sweep(stack, x, [1, 4, 8]))
    finally:
        torch.set_num_threads(before)
    for key in results[0]:
        assert torch.equal(results[0][key], results[1][key]), key  # depth_sweep runs on one thread: bit-equal


def test_lesson_06_directions_hold_in_every_seed_and_the_numbers_do_not():
    """What lesson 06 says holds in every seed (0 to 8), at both scales of W_v, and the seed-to-seed factor it prints."""
    depths = [1, 2, 4, 8, 16, 32]
    grad_32 = {"identity": [], "values": []}

    def rising(t):  # bigger at each depth than at the one before
        return bool((t[1:] > t[:-1]).all())

    for seed in range(9):
        stack, x = _seeded_stack(seed)
        result = {}
        for skip in SKIP_KINDS:
            stack.wiring = skip
            result[skip] = depth_sweep(stack, x, depths)
        identity, values, none = result["identity"], result["values"], result["none"]
        assert (identity["token_std"] >= 0.9).all()
        assert identity["grad_norm"][-1] > 2 * identity["grad_norm"][0] and rising(identity["grad_norm"])
        assert 2.0 < identity["rms"][-1] < 3.5  # the residual's output grows: it does not keep its size
        assert values["token_std"][-1] < 1e-6 and values["grad_norm"][-1] < 1e-3 < 1 < values["grad_norm"][0]
        assert (none["token_std"][2:] == 0).all() and none["grad_norm"][-1] < 1e-12  # from L = 4 on
        assert rising(-values["grad_norm"]) and rising(-none["grad_norm"])
        for skip in grad_32:
            grad_32[skip].append(result[skip]["grad_norm"][-1].item())
        with torch.no_grad():
            for layer in stack.layers:
                layer.qkv.weight[2 * 64:] *= math.sqrt(3)  # W_v only
        stack.wiring = "identity"
        scaled = depth_sweep(stack, x, depths)  # the residual grows faster, in the same directions
        assert (scaled["token_std"] >= 0.9).all() and scaled["grad_norm"][-1] > 2 * scaled["grad_norm"][0]
        assert scaled["rms"][-1] > 5 * identity["rms"][-1]
    assert max(grad_32["values"]) / min(grad_32["values"]) > 5  # the number is not robust across seeds
    assert max(grad_32["identity"]) / min(grad_32["identity"]) < 2


@settings(max_examples=15, deadline=None)
@given(B=st.integers(1, 3), N=st.integers(2, 6), num_heads=st.sampled_from([1, 2]), head_dim=st.integers(1, 4),
       depths=st.lists(st.integers(1, 3), min_size=1, max_size=3), wiring=st.sampled_from(SKIP_KINDS))
def test_depth_sweep_returns_one_finite_value_per_depth(B, N, num_heads, head_dim, depths, wiring):
    chan = num_heads * head_dim
    torch.manual_seed(0)
    stack = AttentionStack(3, chan, chan, num_heads, wiring=wiring).double()
    result = depth_sweep(stack, torch.randn(B, N, chan, dtype=torch.float64), depths)
    assert set(result) == {"rms", "token_std", "grad_norm"}
    for values in result.values():
        assert values.shape == (len(depths),) and torch.isfinite(values).all() and (values >= 0).all()
