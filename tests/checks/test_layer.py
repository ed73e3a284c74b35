"""Lesson 07's checkers (attn_helpers/checks/layer.py): the qkv entry, the parameter count, the suspect listing,
the dropout prediction and the whole multi-head class (the counting functions: tests/lab/test_measure.py)."""

from __future__ import annotations

import math

import pytest
import attn_helpers
import torch
from torch import nn

from attn_helpers import checks
from attn_helpers.core import Attention, MultiHeadAttention
from attn_helpers.lab import attention_parameters
from attn_helpers.checks.layer import _REVIEW, SUSPECT_LAYER, numbered_listing

# ----------------------------------------------------------------------- check_mha_parameter_count


@pytest.mark.parametrize("d_model, heads", [(200, 5), (64, 8), (6, 3)])
def test_parameter_count_accepts_a_formula_of_d_model(d_model, heads):
    module = MultiHeadAttention(d_model, heads)
    verdict = checks.check_mha_parameter_count.judge(lambda d, h: 4 * d * d + 4 * d, module)
    assert verdict.ok and f"{4 * d_model * d_model + 4 * d_model:,}" in verdict.message, verdict
    assert checks.check_mha_parameter_count.judge(lambda d, h: torch.tensor(4 * d * (d + 1)), module).ok


@pytest.mark.parametrize("answer, words", [
    (lambda d, h: 4 * d * d, "bias"),
    (lambda d, h: 3 * d * d + 3 * d, "out_proj"),
    (lambda d, h: h * (4 * d * d + 4 * d), "share the projections"),
    (lambda d, h: 4 * d * (d // h) + 4 * (d // h), "single head"),
    (lambda d, h: 12345, "each Linear"),
    (lambda d, h: 160800, "must follow d_model"),  # this lesson's number written in: right at 200 only
    (lambda d, h: d / 3, "whole number"),
    (lambda d: d, "takes two numbers"),
    (160800, "a function of d_model and num_heads"),
    (2.5, "whole number"),
    ("160800", "whole number"),
])
def test_parameter_count_names_the_typical_mistakes(answer, words):
    verdict = checks.check_mha_parameter_count.judge(answer, MultiHeadAttention(200, 5))
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


def test_parameter_count_refuses_a_function_that_counts_a_layer_instead_of_a_formula():
    module = MultiHeadAttention(200, 5)
    for answer in (lambda d, h: sum(p.numel() for p in MultiHeadAttention(d, h).parameters()),
                   lambda d, h: sum(p.numel() for p in module.parameters()),
                   lambda d, h: sum(t.numel() for t in module.state_dict().values()),
                   lambda d, h: 4 * (d * d + d) + 0 * torch.zeros(d).numel()):
        verdict = checks.check_mha_parameter_count.judge(answer, module)
        assert not verdict.ok and "instead of computing them" in verdict.message, verdict
    import sys
    assert sys.getprofile() is None  # the watch is removed again


# ---------------------------------------------------------------------------- check_suspect_lines


BUGGY = {2, 5, 13}


def test_the_suspect_listing_is_numbered_from_one_and_does_not_carry_the_answer():
    assert all(isinstance(line, str) for line in SUSPECT_LAYER)  # code only: the review is apart
    lines = numbered_listing().splitlines()
    assert len(lines) == len(SUSPECT_LAYER) and lines[0].startswith(" 1  class SuspectAttention")


def test_suspect_lines_accepts_the_right_set_and_explains_every_bug():
    verdict = checks.check_suspect_lines.judge({2, 5, 13})
    assert verdict.ok
    assert all(f"line {i}:" in verdict.message for i in BUGGY)
    assert checks.check_suspect_lines.judge([13, 5, 2]).ok


def test_suspect_lines_explains_the_fine_lines_flagged_and_hints_at_the_bugs_missed():
    """A wrong set is told how many fine lines it flags and why the first is right (one a try: the whole listing
    flagged does not come back as the list of fine lines), and gets the hint of each bug it misses; the hints of the
    bugs it found are left out, and no wrong verdict names the line of a bug."""
    lines = range(1, len(SUSPECT_LAYER) + 1)
    tries = [{n} for n in lines] + [set(lines) - {n} for n in lines] + [set(), set(lines), {2, 5}, {2, 5, 13, 15}]
    for answer in tries:
        verdict = checks.check_suspect_lines.judge(answer)
        assert not verdict.ok
        text = verdict.message + verdict.hint
        assert all(f"line {n}:" not in text and f"line {n} " not in text for n in BUGGY), (answer, text)
        fine = sorted(set(answer) - BUGGY)
        assert all((f"line {n} holds no bug" in text) == (fine[:1] == [n]) for n in range(1, 16)), (answer, text)
        if len(fine) > 1:
            assert f"{len(fine) - 1} more line" in text, (answer, text)
        for n in BUGGY:
            assert (_REVIEW[n][2] in verdict.hint) == (n not in answer), (answer, n, verdict.hint)
    missing_one = checks.check_suspect_lines.judge({5, 13})
    assert "misses 1 buggy line" in missing_one.message and "every argument of __init__" in missing_one.hint


@pytest.mark.parametrize("answer, words", [({0, 2}, "outside"), ({2, 99}, "outside"), ("two", "set of line numbers"),
                                           ("2, 5, 13", "set of line numbers"), ({2.5, 5, 13}, "set of line numbers"),
                                           (True, "set of line numbers")])
def test_suspect_lines_rejects_unusable_answers(answer, words):
    verdict = checks.check_suspect_lines.judge(answer)
    assert not verdict.ok and words in verdict.message


def _suspect_class(replacements: dict[int, str] | None = None):
    lines = list(SUSPECT_LAYER)
    for number, code in (replacements or {}).items():
        lines[number - 1] = code
    namespace = {"nn": nn, "torch": torch}
    exec("\n".join(lines), namespace)
    return namespace["SuspectAttention"]


def test_the_suspect_layer_runs_and_its_bugs_are_real():
    """The listing runs and has the right output shape, yet differs from Attention; fixing exactly the
    lines the review marks buggy makes it equal to Attention with the same weights."""
    assert {number for number, (is_bug, _, _) in _REVIEW.items() if is_bug} == BUGGY
    torch.manual_seed(0)
    reference, x = Attention(49, 64, 4), torch.randn(2, 10, 49)
    suspect = _suspect_class()(49, 64, 4)
    suspect.load_state_dict(reference.state_dict())
    assert suspect(x).shape == reference(x).shape
    assert not torch.allclose(suspect(x), reference(x), atol=1e-4)
    assert _suspect_class()(49, 64, 4, qk_scale=0.0).scale == 64 ** -0.5  # `or` ignores 0.0, chan not head_dim
    fixed = _suspect_class({
        2: "    def __init__(self, dim, chan, num_heads=1, qk_scale=None):",
        5: "        self.scale = self.head_dim ** -0.5 if qk_scale is None else qk_scale",
        13: "        weights = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1)",
    })(49, 64, 4)
    fixed.load_state_dict(reference.state_dict())
    torch.testing.assert_close(fixed(x), reference(x))


# ------------------------------------------------------------------- the whole multi-head class

MHA_BY_HAND = '''
class ByHand(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x):
        B, N, d_model = x.shape
        H, hd = self.num_heads, self.head_dim
        q, k, v = (p(x).reshape(B, N, H, hd).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) * SCALE
        heads = scores.softmax(dim=SOFTMAX_DIM) @ v
        merged = MERGE
        return OUT
'''
RIGHT = {"SCALE": "hd ** -0.5", "SOFTMAX_DIM": "-1", "MERGE": "heads.transpose(1, 2).reshape(B, N, d_model)",
         "OUT": "self.out_proj(merged)"}


def _by_hand(**changes: str) -> type:
    source = MHA_BY_HAND
    for key, value in {**RIGHT, **changes}.items():
        source = source.replace(key, value)
    namespace = {"nn": nn, "torch": torch}
    exec(source, namespace)
    return namespace["ByHand"]


def test_mha_class_accepts_a_right_class():
    verdict = checks.check_mha_class.judge(_by_hand())
    assert verdict.ok, verdict
    assert "nn.MultiheadAttention's agree with yours within 1e-5 too" in verdict.message


@pytest.mark.parametrize("changes, words", [
    (dict(SCALE="d_model ** -0.5"), "instead of 1/sqrt(head_dim)"),
    (dict(SCALE="1.0"), "not scaled at all"),
    (dict(SCALE="hd ** 0.5"), "multiplied by sqrt(head_dim)"),
    (dict(MERGE="heads.reshape(B, N, d_model)"), "without transposing them back"),
    (dict(SOFTMAX_DIM="-2"), "dim=-2"),
    (dict(OUT="merged"), "out_proj was left out"),
    (dict(OUT="self.out_proj(merged) + x"), "input x was added to the output"),  # reader j5: the generic hint before
])
def test_mha_class_names_typical_mistakes(changes, words):
    verdict = checks.check_mha_class.judge(_by_hand(**changes))
    assert not verdict.ok and words in verdict.message, verdict


def test_mha_class_names_a_split_without_transpose():
    source = MHA_BY_HAND.replace("reshape(B, N, H, hd).transpose(1, 2)", "reshape(B, H, N, hd)")
    for key, value in RIGHT.items():
        source = source.replace(key, value)
    namespace = {"nn": nn, "torch": torch}
    exec(source, namespace)
    verdict = checks.check_mha_class.judge(namespace["ByHand"])
    assert not verdict.ok and "without the transpose" in verdict.message, verdict


def test_mha_class_names_a_split_and_a_merge_both_without_transpose():
    """Exercise 5.5's option (a) for the split and a reshape alone for the merge: the 5.6 checker's double mistake."""
    source = MHA_BY_HAND.replace("reshape(B, N, H, hd).transpose(1, 2)", "view(B, H, N, hd)")
    for key, value in {**RIGHT, "MERGE": "heads.reshape(B, N, d_model)"}.items():
        source = source.replace(key, value)
    namespace = {"nn": nn, "torch": torch}
    exec(source, namespace)
    verdict = checks.check_mha_class.judge(namespace["ByHand"])
    assert not verdict.ok and "both without a transpose" in verdict.message, verdict


@pytest.mark.parametrize("answer, words", [
    (3, "nn.Module subclass"), (nn.Linear(4, 4), "nn.Module subclass"), (nn.Linear, "no nn.Linear named q_proj"),
])
def test_mha_class_rejects_answers_that_are_not_such_a_class(answer, words):
    verdict = checks.check_mha_class.judge(answer)
    assert not verdict.ok and words in verdict.message, verdict


def test_mha_class_refuses_a_library_layer_or_a_library_call():
    verdict = checks.check_mha_class.judge(MultiHeadAttention)
    assert not verdict.ok and "library's multi-head attention layer" in verdict.message

    class Holds(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.inner = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

        def forward(self, x):
            return self.inner(x, x, x)[0]

    assert "holds a MultiheadAttention" in checks.check_mha_class.judge(Holds).message
    source = MHA_BY_HAND.replace("        heads = scores.softmax(dim=SOFTMAX_DIM) @ v\n",
                                 "        heads = scores.softmax(dim=SOFTMAX_DIM) @ v\n        attn_helpers.causal_mask(N)\n")
    for key, value in RIGHT.items():
        source = source.replace(key, value)
    namespace = {"nn": nn, "torch": torch, "attn_helpers": __import__("attn_helpers")}
    exec(source, namespace)
    assert checks.check_mha_class.judge(namespace["ByHand"]).ok  # building a mask is not a library doing the work
    calls = {"F.scaled_dot_product_attention": "heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)",
             "attn_helpers' scaled_dot_product_attention": "heads = attn_helpers.scaled_dot_product_attention(q, k, v)",
             "attn_helpers' merge_heads": "heads = scores.softmax(dim=-1) @ v; merged = attn_helpers.merge_heads(heads)"}
    for name, line in calls.items():
        source = MHA_BY_HAND.replace("        heads = scores.softmax(dim=SOFTMAX_DIM) @ v\n", f"        {line}\n")
        for key, value in RIGHT.items():
            source = source.replace(key, value)
        namespace = {"nn": nn, "torch": torch, "attn_helpers": __import__("attn_helpers")}
        exec(source, namespace)
        verdict = checks.check_mha_class.judge(namespace["ByHand"])
        assert not verdict.ok and f"your forward calls {name}" in verdict.message, (name, verdict)


def test_mha_class_reports_a_wrong_shape_and_a_crash():
    verdict = checks.check_mha_class.judge(_by_hand(OUT="merged[:, :1]"))
    assert not verdict.ok and "returned shape" in verdict.message
    verdict = checks.check_mha_class.judge(_by_hand(MERGE="heads.transpose(1, 2).view(B, N, d_model)"))
    assert not verdict.ok and "failed" in verdict.message


def test_mha_class_prints_a_verdict_not_a_traceback(capsys):
    checks.check_mha_class(_by_hand(SCALE="undefined_name"))
    assert "❌ Not yet" in capsys.readouterr().out


# ------------------------------------------------------------------------- dropout prediction

def _dropout_weights(p: float = 0.1):
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4, dropout=p)
    x = torch.randn(2, 6, 16)
    weights_train = layer.train()(x, return_intermediates=True)[1]["weights"]
    weights_eval = layer.eval()(x, return_intermediates=True)[1]["weights"]
    return weights_train, weights_eval


def test_dropout_prediction_right_and_wrong():
    weights_train, weights_eval = _dropout_weights(0.1)
    assert checks.check_dropout_prediction.judge("scaled up", weights_train, weights_eval, 0.1).ok
    verdict = checks.check_dropout_prediction.judge(" Unchanged ", weights_train, weights_eval, 0.1)
    assert not verdict.ok and "1 - p" in verdict.hint and "1.1111" in verdict.message
    assert not checks.check_dropout_prediction.judge("bigger", weights_train, weights_eval, 0.1).ok


def test_dropout_prediction_without_dropout_is_unchanged():
    weights_train, weights_eval = _dropout_weights(0.0)
    assert checks.check_dropout_prediction.judge("unchanged", weights_train, weights_eval, 0.0).ok


def test_dropout_prediction_none_points_at_the_prediction_cell(capsys):
    checks.check_dropout_prediction(None, *_dropout_weights(), 0.1)
    assert "write your prediction in the cell above" in capsys.readouterr().out


# ------------------------------------------------------------- run-time refusals found by a reader (round 2)


def _class_with_step(step):
    class Mine(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.h = num_heads
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, x):
            B, N, d = x.shape

            def split(t):  # (B, N, d) -> (B, H, N, d // H)
                return t.reshape(B, N, self.h, d // self.h).transpose(1, 2)

            heads = step(split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x)))  # (B, H, N, hd)
            return self.out_proj(heads.transpose(1, 2).reshape(B, N, d))
    return Mine


@pytest.mark.parametrize("step, name", [
    (lambda q, k, v: attn_helpers.tiled_attention(q, k, v), "tiled_attention"),
    (lambda q, k, v: attn_helpers.scaled_dot_product_attention(q, k, v), "scaled_dot_product_attention"),
    (lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v), "scaled_dot_product_attention"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0], "attention_math"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v)[0], "attention_math"),
])
def test_mha_class_refuses_every_library_attention_step(step, name):
    verdict = checks.check_mha_class.judge(_class_with_step(step))
    assert not verdict.ok and name in verdict.message


def test_mha_class_accepts_its_own_attention_step():
    own = _class_with_step(lambda q, k, v: torch.softmax(q @ k.mT * q.shape[-1] ** -0.5, dim=-1) @ v)
    assert checks.check_mha_class.judge(own).ok


def test_parameter_count_refuses_the_counting_helpers():
    from attn_helpers.lab import attention_parameters

    layer = attn_helpers.MultiHeadAttention(200, 5)
    verdict = checks.check_mha_parameter_count.judge(lambda d, h: sum(attention_parameters(d, d, qkv_bias=True).values()),
                                                     layer)
    assert not verdict.ok and "attention_parameters" in verdict.message
    assert checks.check_mha_parameter_count.judge(lambda d, h: 4 * d * d + 4 * d, layer).ok


def test_qkv_entry_accepts_the_layout_and_names_the_typical_mistakes():
    assert checks.check_qkv_entry.judge(lambda p, b, h, n, e, c, H: (b, n, p * c + h * (c // H) + e)).ok
    per_head = checks.check_qkv_entry.judge(lambda p, b, h, n, e, c, H: (b, n, h * 3 * (c // H) + p * (c // H) + e))
    assert not per_head.ok and "(3, H, head_dim)" in per_head.hint
    swapped = checks.check_qkv_entry.judge(lambda p, b, h, n, e, c, H: (n, b, p * c + h * (c // H) + e))
    assert not swapped.ok and "batch index comes first" in swapped.hint


def test_qkv_entry_refuses_running_a_layer():
    def run_it(p, b, h, n, e, c, H):
        attn_helpers.Attention(c, c, H)
        return (b, n, p * c + h * (c // H) + e)
    verdict = checks.check_qkv_entry.judge(run_it)
    assert not verdict.ok and "Attention" in verdict.message


def _entry_looked_up_in_torch(p, b, h, n, e, c, H):
    """The shortcut: an arange laid out like qkv (one batch row and token suffice), reshaped and permuted."""
    flat = torch.arange(3 * c).reshape(1, 1, 3 * c).reshape(1, 1, 3, H, c // H).permute(2, 0, 3, 1, 4)
    return (b, n, int(flat[p, 0, h, 0, e]))


def _entry_looked_up_in_numpy(p, b, h, n, e, c, H):
    import numpy as np
    return (b, n, int(np.ravel_multi_index((p, h, e), (3, H, c // H))))


@pytest.mark.parametrize("shortcut, words", [(_entry_looked_up_in_torch, "PyTorch's arange"),
                                             (_entry_looked_up_in_numpy, "NumPy's ravel_multi_index")])
def test_qkv_entry_refuses_looking_the_entry_up_in_a_permuted_tensor(shortcut, words):
    """Both shortcuts give the right entries (the old checker passed them); the arithmetic answer still passes."""
    for B, N, chan, H in ((2, 3, 12, 3), (1, 5, 8, 4)):
        assert shortcut(2, 1, H - 1, N - 1, 0, chan, H) == (1, N - 1, 2 * chan + (H - 1) * (chan // H))
    verdict = checks.check_qkv_entry.judge(shortcut)
    assert not verdict.ok and words in verdict.message and "whole numbers" in verdict.message
    assert checks.check_qkv_entry.judge(lambda p, b, h, n, e, c, H: (b, n, p * c + h * (c // H) + e)).ok
