"""The checkers of 10 · Positions: verdicts beyond the exercise tests' solution, None and typical wrong answer."""

import io
from contextlib import redirect_stdout

import torch

from attn_helpers import Attention, RotaryAttention, causal_mask, permute_tokens
from attn_helpers import checks


def _outputs(layer, perm):
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        return layer(x), layer(permute_tokens(x, perm))


def test_shuffle_prediction_says_changed_is_right_for_a_layer_with_positions():
    torch.manual_seed(1)
    perm = torch.tensor([2, 0, 1, 5, 3, 4])
    out, shuffled = _outputs(RotaryAttention(8, 8, 2), perm)
    assert checks.check_shuffle_prediction.judge("changed", out, shuffled, perm).ok
    verdict = checks.check_shuffle_prediction.judge("reordered", out, shuffled, perm)
    assert not verdict.ok and "depends on where the" in verdict.message
    out, shuffled = _outputs(Attention(8, 8, 2), perm)
    assert checks.check_shuffle_prediction.judge(" Reordered ", out, shuffled, perm).ok
    verdict = checks.check_shuffle_prediction.judge("changed", out, shuffled, perm)
    assert not verdict.ok and "never enters the formula" in verdict.hint


def test_shuffle_prediction_says_changed_is_right_for_a_causal_layer():
    torch.manual_seed(1)
    perm = torch.tensor([2, 0, 1, 5, 3, 4])
    layer = Attention(8, 8, 2)
    causal = lambda t: layer(t, causal_mask(6))  # noqa: E731
    out, shuffled = _outputs(causal, perm)
    assert checks.check_shuffle_prediction.judge("changed", out, shuffled, perm).ok
    verdict = checks.check_shuffle_prediction.judge("reordered", out, shuffled, perm)
    assert not verdict.ok and "allowed to see" in verdict.hint


def test_shuffle_prediction_rejects_other_words_and_points_at_the_cell_above():
    perm = torch.arange(6)
    out, shuffled = _outputs(Attention(8, 8, 2), perm)
    verdict = checks.check_shuffle_prediction.judge("the same", out, shuffled, perm)
    assert not verdict.ok and "one of 'reordered', 'changed'" in verdict.message
    printed = io.StringIO()
    with redirect_stdout(printed):
        checks.check_shuffle_prediction(None, out, shuffled, perm)
    assert "cell above" in printed.getvalue()


def test_pair_rotation_names_each_typical_mistake():
    def judge(fn):
        return checks.check_pair_rotation.judge(fn)

    assert judge(lambda a, b, t: (a * torch.cos(t) - b * torch.sin(t), a * torch.sin(t) + b * torch.cos(t))).ok
    assert "cos and sin swapped" in judge(
        lambda a, b, t: (a * torch.sin(t) - b * torch.cos(t), a * torch.cos(t) + b * torch.sin(t))).message
    assert "wrong order" in judge(
        lambda a, b, t: (a * torch.sin(t) + b * torch.cos(t), a * torch.cos(t) - b * torch.sin(t))).message
    assert "without mixing" in judge(lambda a, b, t: (a * torch.cos(t), b * torch.sin(t))).message
    assert "degrees" in judge(
        lambda a, b, t: (a * torch.cos(torch.deg2rad(t)) - b * torch.sin(torch.deg2rad(t)),
                         a * torch.sin(torch.deg2rad(t)) + b * torch.cos(torch.deg2rad(t)))).message
    unknown = judge(lambda a, b, t: (a + t, b))
    assert not unknown.ok and "moves, but a turn by 0" not in unknown.message  # at angle 0 it stays put
    assert "should return a pair" in judge(lambda a, b, t: a).message
    assert "should be a function" in judge(3).message


def test_rotated_tensors_names_each_typical_mistake():
    def message(answer):
        verdict = checks.check_rotated_tensors.judge(answer)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert checks.check_rotated_tensors.judge(["Q", "k "]).ok
    assert "x itself is not touched" in message({"x"})
    assert "not rotated themselves" in message({"scores"})
    assert "['k'] is rotated too" in message("q")
    assert "not among the layer's tensors" in message({"query"})
    assert "set of names" in message(42)
