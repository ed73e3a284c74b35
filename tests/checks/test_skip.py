"""The checkers of checks/skip.py (lesson 06, output projection and skip connection): right answers pass, typical
mistakes are named with a hint, the measuring helpers are refused, and odd inputs get words, never a traceback."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import Attention, depth_sweep, merge_heads, signal_through_stack
from attn_helpers import checks
import attn_helpers

torch.manual_seed(0)


X = torch.randn(2, 4, 6)  # (B, N, chan), 3 heads of 2


def merged(v):  # (B, H, N, head_dim) -> (B, N, H * head_dim), the merge written out as exercise 6.2 asks
    return v.transpose(1, 2).reshape(v.shape[0], v.shape[2], -1)


def verdict(check, answer, *args, **kwargs):
    return check.judge(answer, *args, **kwargs)


@pytest.fixture(scope="module")
def seed_layer_parts():
    torch.manual_seed(2)
    layer = Attention(dim=6, chan=8, num_heads=2)
    x = torch.randn(2, 5, 6)
    _, inter = layer(x, return_intermediates=True)
    return x, {k: t.detach() for k, t in inter.items()}


def test_skip_through_v_accepts_a_function_and_refuses_a_tensor_rebuilt_from_the_lessons_seed(seed_layer_parts):
    """The old exercise took a tensor: replaying the cell's seed lines and running the layer passed it."""
    _, inter = seed_layer_parts
    assert verdict(checks.check_skip_through_v, lambda v, projected: projected + merged(v)).ok
    replayed = verdict(checks.check_skip_through_v, inter["out"])
    assert not replayed.ok and "should be a function" in replayed.message


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda v, p: p + v.reshape(p.shape), "without moving its heads axis"),
        (lambda v, p: merged(v), "left out the attention output"),
        (lambda v, p: p, "left out the skip"),
        (lambda v, p: p + v.permute(0, 2, 3, 1).reshape(p.shape), "interleaved"),
        (lambda v, p: p + merged(v) + 1.0, "different values"),
        (lambda v, p: p + v.transpose(1, 2).reshape(2, 5, 8), "raised"),  # the sizes of one example
    ],
)
def test_skip_through_v_names_the_mistake(build, expected):
    v = verdict(checks.check_skip_through_v, build)
    assert not v.ok and expected in v.message


def test_skip_through_v_refuses_the_librarys_merge_under_any_name():
    """With merge_heads the exercise is one "+" (reader b3: it passed); the merge is the part to write."""
    join = merge_heads
    for build in (lambda v, p: p + merge_heads(v), lambda v, p: p + join(v), lambda v, p: p + attn_helpers.merge_heads(v)):
        v = verdict(checks.check_skip_through_v, build)
        assert not v.ok and "hands the merge to attn_helpers' merge_heads" in v.message and "transpose(1, 2)" in v.hint


@pytest.mark.parametrize(
    ("prediction", "ok", "expected"),
    [
        ("grows", True, "grows in 3, stays in 0, shrinks in 0"),
        (" Grows ", True, "at L = 1 to"),
        ("stays", False, "the tables below show it depth by depth"),
        ("shrinks", False, "grows in 3, stays in 0, shrinks in 0"),
        ("bigger", False, "one of 'shrinks', 'stays', 'grows'"),
    ],
)
def test_gradient_trend_prediction(prediction, ok, expected):
    first, last = torch.tensor([2.5, 3.0, 3.5]), torch.tensor([70.0, 90.0, 110.0])
    v = verdict(checks.check_gradient_trend_prediction, prediction, first, last, (1, 32))
    assert v.ok is ok and expected in v.message + v.hint


def test_gradient_trend_prediction_needs_every_seed_to_agree():
    v = verdict(checks.check_gradient_trend_prediction, "grows", torch.tensor([1.0, 1.0]), torch.tensor([5.0, 1.2]), (1, 8))
    assert not v.ok and "grows in 1, stays in 1" in v.message


def measure_depths(stack, x, skip, depths):  # stands in for the loop lesson 06 writes out in the notebook
    return depth_sweep(stack, x, depths)


_alias = depth_sweep  # ds = depth_sweep; ds(...): a text search for "depth_sweep(" would miss it


def test_residual_line_accepts_only_the_line_that_adds_the_input_with_the_right_shape(seed_layer_parts):
    x, inter = seed_layer_parts
    options = {"a": "x + projected", "b": "projected + v", "c": "projected + to_chan(x)",
               "d": "projected + x.transpose(1, 2)", "e": "projected[:, None] + v.mean(-1, keepdim=True)",
               "f": "projected + to_chan(x).mean(dim=1, keepdim=True)", "g": "projected + to_chan(x).flip(1)",
               "h": "projected + 2 * to_chan(x)"}
    namespace = dict(x=x, projected=inter["projected"], v=inter["v"], to_chan=torch.nn.Linear(6, 8))
    assert verdict(checks.check_residual_line, "c", options, namespace, (2, 5, 8)).ok
    a = verdict(checks.check_residual_line, "a", options, namespace, (2, 5, 8))
    assert not a.ok and "The size of tensor a (6) must match the size of tensor b (8)" in a.message
    assert "same shape" in a.hint
    e = verdict(checks.check_residual_line, "e", options, namespace, (2, 5, 8))
    assert not e.ok and "runs but gives [2, 2, 5, 8]" in e.message
    f = verdict(checks.check_residual_line, "f", options, namespace, (2, 5, 8))  # the right shape, not the input
    assert not f.ok and "does not add each token's own input" in f.message and "average" in f.message
    g = verdict(checks.check_residual_line, "g", options, namespace, (2, 5, 8))  # each token gets another's input
    assert not g.ok and "token 0 gets token 4's input" in g.message and "reorder the tokens" in g.hint
    h = verdict(checks.check_residual_line, "h", options, namespace, (2, 5, 8))  # no named mistake
    assert not h.ok and h.message.endswith("to its output.") and "token by token" in h.hint
    assert not verdict(checks.check_residual_line, 3, options, namespace, (2, 5, 8)).ok


def test_unanswered_checkers_say_not_attempted(capsys):
    checks.check_residual_line(None, {"a": "x"}, {"x": X}, (2, 4, 6))
    assert capsys.readouterr().out.count("Not attempted yet") == 1


def _grad_at_layer(stack, x, L, layer):
    x_L = stack(x, depth=L)  # (B, N, chan)
    grads = torch.autograd.grad(x_L.norm(), list(stack.layers[layer - 1].parameters()))
    return torch.sqrt(sum(g.pow(2).sum() for g in grads)).item()


def test_layer_grad_accepts_any_layer_and_names_layer_one_and_off_by_one():
    assert checks.check_layer_grad.judge(_grad_at_layer).ok
    first = checks.check_layer_grad.judge(lambda s, x, L, layer: _grad_at_layer(s, x, L, 1))
    assert not first.ok and "layer 1 whatever" in first.message
    measure_depths_copy = checks.check_layer_grad.judge(lambda s, x, L, layer: depth_sweep(s, x, [L])["grad_norm"][0])
    assert not measure_depths_copy.ok


@pytest.mark.parametrize("fn, expected", [
    (lambda s, x, L, layer: signal_through_stack(s, x, depth=L)["grad_norm"][layer - 1].item(),
     "hands the measurement to signal_through_stack"),
    (lambda s, x, L, layer: depth_sweep(s, x, [L])["grad_norm"][0], "hands the measurement to depth_sweep"),
    (lambda s, x, L, layer: _alias(s, x, [L])["grad_norm"][0], "hands the measurement to depth_sweep"),
    (lambda s, x, L, layer: (attn_helpers.softmax_grad_norm(torch.zeros(3), torch.ones(3)),
                             _grad_at_layer(s, x, L, layer))[1],
     "hands the measurement to attn_helpers' softmax_grad_norm"),  # any other export is watched too
])
def test_layer_grad_refuses_every_attn_helpers_measurement_at_run_time(fn, expected):
    v = checks.check_layer_grad.judge(fn)
    assert not v.ok and expected in v.message, v


def test_layer_grad_refuses_the_notebooks_own_loop_at_run_time(monkeypatch):
    import __main__

    monkeypatch.setattr(__main__, "measure_depths", measure_depths, raising=False)
    v = checks.check_layer_grad.judge(lambda s, x, L, layer: measure_depths(s, x, s.wiring, [L])["grad_norm"][0])
    assert not v.ok and "hands the measurement to measure_depths" in v.message, v


def test_layer_grad_names_gradients_accumulated_by_backward():
    def with_backward(stack, x, L, layer):
        stack(x, depth=L).norm().backward()
        return torch.sqrt(sum(p.grad.pow(2).sum() for p in stack.layers[layer - 1].parameters())).item()

    v = checks.check_layer_grad.judge(with_backward)
    assert not v.ok and "adds into p.grad on every call" in v.message and "times the expected" in v.message, v


def test_layer_grad_names_an_answer_that_ignores_L():
    """The whole stack run whatever L is: the right layer, through the wrong depth (it got the indexing hint)."""
    def whole_stack(stack, x, L, layer):
        grads = torch.autograd.grad(stack(x).norm(), list(stack.layers[layer - 1].parameters()))
        return torch.sqrt(sum(g.pow(2).sum() for g in grads)).item()
    v = checks.check_layer_grad.judge(whole_stack)
    assert not v.ok and "ran 3 layers, not L = 2" in v.message and "pass L to the stack" in v.hint, v


@pytest.mark.parametrize("fn, words", [  # reader b4: each got the generic hint
    (lambda s, x, L, layer: torch.sqrt(sum(g.pow(2).sum() for g in torch.autograd.grad(
        s(x, depth=L).sum(), list(s.layers[layer - 1].parameters())))).item(), "x_L.sum()"),
    (lambda s, x, L, layer: sum(g.norm().item() for g in torch.autograd.grad(
        s(x, depth=L).norm(), list(s.layers[layer - 1].parameters()))), "per-tensor norms added up"),
    (lambda s, x, L, layer: torch.autograd.grad(s(x, depth=L).norm(), [s.layers[layer - 1].qkv.weight])[0]
     .norm().item(), "qkv.weight alone"),
])
def test_layer_grad_names_three_more_mistakes(fn, words):
    verdict = checks.check_layer_grad.judge(fn)
    assert not verdict.ok and words in verdict.message, verdict
