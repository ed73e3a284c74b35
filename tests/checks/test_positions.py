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
    assert not verdict.ok and "mask keeps keys by slot" in verdict.hint


def test_shuffle_prediction_rejects_other_words_and_points_at_the_cell_above():
    perm = torch.arange(6)
    out, shuffled = _outputs(Attention(8, 8, 2), perm)
    verdict = checks.check_shuffle_prediction.judge("the same", out, shuffled, perm)
    assert not verdict.ok and "one of 'reordered', 'changed'" in verdict.message
    printed = io.StringIO()
    with redirect_stdout(printed):
        checks.check_shuffle_prediction(None, out, shuffled, perm)
    assert "cell above" in printed.getvalue()


def _rope_by_hand(x, positions, *, interleaved=False, sign=1.0, exponent=2.0, second_axis=False,
                  written_interleaved=False, base=10000.0, sign_a=-1.0, sign_b=1.0):
    """RoPE as a learner writes it, optionally with one mistake: the pairing, the direction, the exponent or base,
    slicing x[:, :half] (right only for a 2-D x), half pairs written back interleaved, or one sine's sign flipped
    (``sign_a``, ``sign_b``: the signs of b sin in a' and of a sin in b')."""
    head_dim = x.shape[-1]
    theta = base ** (-exponent * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    angle = sign * positions[:, None].double() * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
    elif second_axis:
        a, b = x[:, : head_dim // 2], x[:, head_dim // 2:]
    else:
        a, b = x[..., : head_dim // 2], x[..., head_dim // 2:]
    if interleaved or written_interleaved:
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    return torch.cat([a * cos + sign_a * b * sin, sign_b * a * sin + b * cos], dim=-1)


def test_rope_accepts_the_learners_own_rotation_and_names_each_typical_mistake():
    def message(fn):
        verdict = checks.check_rope.judge(fn)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert checks.check_rope.judge(_rope_by_hand).ok
    assert "interleaved" in message(lambda x, p: _rope_by_hand(x, p, interleaved=True))
    assert "clockwise" in message(lambda x, p: _rope_by_hand(x, p, sign=-1.0))
    assert "without the 2" in message(lambda x, p: _rope_by_hand(x, p, exponent=1.0))
    assert "row index" in message(lambda x, p: _rope_by_hand(x, torch.arange(x.shape[-2])))
    assert "raised" in message(lambda x, p: _rope_by_hand(x.reshape(5, 6), p))  # sizes of one example
    assert "should be a function" in message(torch.zeros(3))


def test_rope_refuses_the_library_and_a_copy_of_the_lessons_cells():
    from attn_helpers.core import apply_rope

    assert "apply_rope" in checks.check_rope.judge(apply_rope).message
    wrapped = checks.check_rope.judge(lambda x, p: apply_rope(x, p))
    assert not wrapped.ok and "calls attn_helpers' apply_rope" in wrapped.message
    hidden = {"f": apply_rope}  # called through a name the checker cannot read in the code
    assert "calls attn_helpers' apply_rope" in checks.check_rope.judge(lambda x, p: hidden["f"](x, p)).message
    q_rot = torch.randn(13, 4, 100, 16)  # a tensor of the lesson's sizes, returned whatever the input
    assert not checks.check_rope.judge(lambda x, p: q_rot).ok


def test_rope_names_the_unchanged_stub_and_the_pair_count_in_the_exponent():
    def message(fn):
        verdict = checks.check_rope.judge(fn)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert "returned x unchanged" in message(lambda x, p: x)
    assert "head_dim/2 (the number of pairs)" in message(lambda x, p: _rope_by_hand(x, p, exponent=4.0))
    assert "the minus sign is missing" in message(lambda x, p: _rope_by_hand(x, p, exponent=-2.0))  # reader r10a


def test_rope_names_the_second_axis_sliced_and_the_halves_written_back_interleaved():
    def message(fn):
        verdict = checks.check_rope.judge(fn)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert _rope_by_hand(torch.ones(5, 6), torch.arange(5), second_axis=True).shape == (5, 6)  # right when 2-D
    assert "x[..., :half] and not x[:, :half]" in message(lambda x, p: _rope_by_hand(x, p, second_axis=True))
    assert "written back interleaved" in message(lambda x, p: _rope_by_hand(x, p, written_interleaved=True))


def test_rotated_v_shift_accepts_heads_only_and_names_each_typical_mistake():
    def message(answer):
        verdict = checks.check_rotated_v_shift.judge(answer)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert checks.check_rotated_v_shift.judge({"heads"}).ok
    assert checks.check_rotated_v_shift.judge(["Heads "]).ok
    assert "turned by its own position" in message(set())  # "RoPE is relative, so nothing changes"
    assert "turned by its own position" in message("none")
    assert "made from q and k alone" in message({"scores", "weights", "heads"})
    assert "made from q and k alone" in message({"weights", "heads"})
    assert "not among" in message({"out"})
    assert "should be a set" in message(3)


def test_rotated_v_shift_keeps_its_measurement_until_the_answer_is_right():
    """The old wrong verdicts printed every gap ("heads by 1.3e+00"): the answer, to copy from any wrong try."""
    import itertools
    import re

    for size in range(4):
        for answer in itertools.combinations(("scores", "weights", "heads"), size):
            verdict = checks.check_rotated_v_shift.judge(set(answer))
            if set(answer) == {"heads"}:
                assert verdict.ok and re.search(r"\d\.\de", verdict.message)  # the right answer sees the gaps
                continue
            text = verdict.message + " " + verdict.hint
            assert not verdict.ok and not re.search(r"\d\.\d", text) and "changed" not in text


def test_rope_refuses_the_transformers_rotation():
    """Wrapping transformers' rotate_half / apply_rotary_pos_emb gives RoPE with the half pairing: refused."""
    import pytest

    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from attn_helpers.core import apply_rope

    def through_apply(x, positions):
        head_dim = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=x.dtype) / head_dim)
        angle = positions[:, None].to(x.dtype) * theta  # (N, head_dim/2)
        cos, sin = torch.cat([angle, angle], dim=-1).cos(), torch.cat([angle, angle], dim=-1).sin()
        return llama.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0]

    def through_rotate_half(x, positions):
        head_dim = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=x.dtype) / head_dim)
        angle = torch.cat([positions[:, None].to(x.dtype) * theta] * 2, dim=-1)  # (N, head_dim)
        return x * angle.cos() + llama.rotate_half(x) * angle.sin()

    x, positions = torch.randn(2, 5, 6, dtype=torch.float64), torch.tensor([3, 0, 7, 1, 12])
    for shortcut in (through_apply, through_rotate_half):
        assert torch.allclose(shortcut(x, positions), apply_rope(x, positions))  # right values: the old checker passed
        verdict = checks.check_rope.judge(shortcut)
        assert not verdict.ok and "transformers' " in verdict.message, verdict.message
    assert "transformers' " in checks.check_rope.judge(llama.rotate_half).message


def test_rope_refuses_pytorchs_own_rotary_operator():  # reader g6: torch.onnx.ops.rotary_embedding passed
    def through_onnx(x, positions):
        head_dim = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=x.dtype) / head_dim)
        angle = positions[:, None].to(x.dtype) * theta  # (N, head_dim/2)
        flat = x.reshape(1, -1, x.shape[-2], head_dim)  # (1, heads, N, head_dim)
        cache = torch.zeros(int(positions.max()) + 1, head_dim // 2, dtype=x.dtype)
        cos, sin = cache.clone(), cache.clone()
        cos[positions], sin[positions] = angle.cos(), angle.sin()  # (max position + 1, head_dim/2)
        rotated = torch.onnx.ops.rotary_embedding(flat, cos, sin, positions[None, :].long(), interleaved=False)
        return rotated.reshape(x.shape)

    verdict = checks.check_rope.judge(through_onnx)
    assert not verdict.ok and "rotary_embedding" in verdict.message, verdict


def test_rope_names_one_flipped_sign_a_wrong_base_and_positions_off_by_one():  # reader r10c
    def verdict_of(fn):
        verdict = checks.check_rope.judge(fn)
        assert not verdict.ok
        return verdict.message + " " + verdict.hint

    assert "b' = b cos φ - a sin φ (a' is right)" in verdict_of(lambda x, p: _rope_by_hand(x, p, sign_b=-1.0))
    assert "a' = a cos φ + b sin φ (b' is right)" in verdict_of(lambda x, p: _rope_by_hand(x, p, sign_a=1.0))
    assert "the base 100)" in verdict_of(lambda x, p: _rope_by_hand(x, p, base=100.0))  # 100^(-2i/d) = 10000^(-i/d)
    for base in (1000.0, 10.0, 100000.0):
        assert f"the base {base:g} instead of 10000" in verdict_of(lambda x, p: _rope_by_hand(x, p, base=base))
    assert "positions +1" in verdict_of(lambda x, p: _rope_by_hand(x, p + 1))
    assert "positions -1" in verdict_of(lambda x, p: _rope_by_hand(x, p - 1))


def test_rope_without_a_named_mistake_points_at_a_test_the_learner_can_run():
    from attn_helpers.core import apply_rope

    verdict = checks.check_rope.judge(lambda x, p: _rope_by_hand(x, p) * 1.5)  # no named mistake gives this
    assert not verdict.ok and "different values" in verdict.message
    assert "torch.eye(6)[[0]]" in verdict.hint and "0.540" in verdict.hint and "0.841" in verdict.hint
    one_hot = torch.eye(6)
    assert torch.equal(apply_rope(one_hot[[0]], torch.tensor([0])), one_hot[[0]])  # what the hint promises
    assert torch.allclose(apply_rope(one_hot[[0]], torch.tensor([1])),
                          torch.tensor([[0.540, 0, 0, 0.841, 0, 0]]), atol=5e-4)
    assert torch.allclose(apply_rope(one_hot[[3]], torch.tensor([1])),
                          torch.tensor([[-0.841, 0, 0, 0.540, 0, 0]]), atol=5e-4)
