"""The checkers of checks/heads.py (lesson 05, multi-head reshaping): right answers pass, typical mistakes are named
with a hint, the library's and PyTorch's layers are refused, and odd inputs get words, never a traceback."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_helpers import Attention, merge_heads, scaled_dot_product_attention, split_heads
from attn_helpers import checks
import attn_helpers

torch.manual_seed(0)


X = torch.randn(2, 4, 6)  # (B, N, chan), 3 heads of 2


HEADS = torch.randn(2, 3, 4, 2)  # (B, H, N, head_dim)


SPLIT_OPTIONS = {
    "a": "q.view(B, num_heads, N, head_dim)",
    "b": "q.reshape(B, N, num_heads, head_dim).permute(0, 2, 1, 3)",
    "c": "q.transpose(1, 2).view(B, num_heads, N, head_dim)",
    "d": "q.transpose(1, 2).reshape(B, num_heads, N, head_dim)",
    "e": "q.view(B, N, num_heads, head_dim).permute(2, 0, 1, 3)",
}


def verdict(check, answer, *args, **kwargs):
    return check.judge(answer, *args, **kwargs)


def _split(t, h):
    B, N, chan = t.shape
    return t.reshape(B, N, h, chan // h).transpose(1, 2)  # (B, H, N, head_dim)


def _merge(t):
    B, H, N, d = t.shape
    return t.transpose(1, 2).reshape(B, N, H * d)  # (B, N, chan)


def _view_split(t, h):  # the learner's view of a fresh tensor: works, like reshape
    return t.view(t.shape[0], t.shape[1], h, -1).transpose(1, 2)


def test_split_heads_accepts_a_function_of_the_learners_own():
    for fn in (_split, _view_split, lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3)):
        result = verdict(checks.check_split_heads, fn)
        assert result.ok and "four inputs" in result.message, result


@pytest.mark.parametrize(("fn", "cause"), [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "straight to (B, H, N, head_dim)"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "did not move the heads axis"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2), "(head_dim, H)"),
    (lambda x, h: x.transpose(1, 2).reshape(x.shape[0], h, x.shape[1], -1), "transposed first, then reshaped"),
])
def test_split_heads_names_each_typical_mistake_on_its_own_inputs(fn, cause):
    result = verdict(checks.check_split_heads, fn)
    assert not result.ok and cause in result.message and "x [2, 5, 12] with num_heads=3" in result.message, result


@pytest.mark.parametrize(("answer", "message", "hint"), [  # the hint points at the section, not the code (reader j4)
    (split_heads, "is attn_helpers' split_heads", "section 5.1.2"),
    (lambda x, h: split_heads(x, h), "calls attn_helpers' split_heads", "section 5.1.2"),
    (lambda x, h: merge_heads(split_heads(x, h)).reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2),
     "calls attn_helpers' split_heads", "swap the heads and tokens axes"),
])
def test_split_heads_refuses_the_librarys_split(answer, message, hint):
    result = verdict(checks.check_split_heads, answer)
    assert not result.ok and message in result.message and hint in result.hint, result


@pytest.mark.parametrize(("answer", "message", "hint"), [
    (split_heads(X, 3), "should be a function, got a tensor of shape [2, 3, 4, 2]", "answer = my_split"),
    ("reshape", "should be a function", "def my_split(x, num_heads)"),
    (lambda x, h: x.reshape(2, 4, 3, 2).transpose(1, 2), "raised RuntimeError", "section 5.1.2"),
    (lambda x: x, "raised TypeError", "section 5.1.2"),
    (lambda x, h: x[..., :2], "has shape", "follow each operation's shape"),
])
def test_split_heads_explains_unusable_answers_in_words(answer, message, hint):
    result = verdict(checks.check_split_heads, answer)
    assert not result.ok and message in result.message and hint in result.hint, result


def test_merge_heads_accepts_a_function_of_the_learners_own():
    for fn in (_merge, lambda t: t.permute(0, 2, 1, 3).flatten(2), lambda t: t.transpose(1, 2).contiguous().view(
            t.shape[0], t.shape[2], -1)):
        result = verdict(checks.check_merge_heads, fn)
        assert result.ok and "four inputs" in result.message, result


@pytest.mark.parametrize(("fn", "cause", "hint"), [
    (lambda t: t.reshape(t.shape[0], t.shape[2], -1), "without moving the heads axis back", "transpose(1, 2)"),
    (lambda t: t.transpose(1, 2), "did not flatten", "reshape(B, N, chan)"),
    (lambda t: t.permute(0, 2, 3, 1).reshape(t.shape[0], t.shape[2], -1), "stride instead of a block", "transpose(1, 2)"),
    (lambda t: t.transpose(1, 2).view(t.shape[0], t.shape[2], -1), "raised RuntimeError: view size", "not contiguous"),
])
def test_merge_heads_names_each_typical_mistake(fn, cause, hint):
    result = verdict(checks.check_merge_heads, fn)
    assert not result.ok and cause in result.message and hint in result.hint, result


@pytest.mark.parametrize(("answer", "message"), [
    (merge_heads, "is attn_helpers' merge_heads"),
    (lambda t: merge_heads(t), "calls attn_helpers' merge_heads"),
    (merge_heads(HEADS), "should be a function, got a tensor"),
])
def test_merge_heads_refuses_the_library_and_a_computed_tensor(answer, message):
    result = verdict(checks.check_merge_heads, answer)
    assert not result.ok and message in result.message, result


def test_the_call_watch_is_removed_after_a_check_even_when_the_function_raises():
    import sys

    before = sys.getprofile()
    verdict(checks.check_split_heads, lambda x, h: 1 / 0)
    verdict(checks.check_multi_head_function, _split)
    assert sys.getprofile() is before


def _head_shapes(B, N, dim, chan, num_heads):
    head_dim = chan // num_heads
    return {"head_dim": head_dim, "qkv_heads": [3, B, num_heads, N, head_dim], "scores": (B, num_heads, N, N)}


def test_head_shapes_accepts_a_function_of_the_sizes():
    verdict_ = verdict(checks.check_head_shapes, _head_shapes)
    assert verdict_.ok and "never printed" in verdict_.message, verdict_


def _changed(**parts):
    return lambda B, N, dim, chan, H: {**_head_shapes(B, N, dim, chan, H), **{k: f(B, N, dim, chan, H) for k, f in parts.items()}}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_changed(head_dim=lambda B, N, dim, chan, H: dim // H), "not the input width dim"),
        (_changed(qkv_heads=lambda B, N, dim, chan, H: [B, N, 3, H, chan // H]), "permute(2, 0, 3, 1, 4)"),
        (_changed(scores=lambda B, N, dim, chan, H: [B, N, N]), "(B, H, N, N)"),
        (_changed(scores=lambda B, N, dim, chan, H: [B, H, N, chan // H]), "contracts head_dim away"),
        (_changed(head_dim=lambda B, N, dim, chan, H: chan), "heads of 24 features make 72"),
        (_changed(qkv_heads=lambda B, N, dim, chan, H: "3x2"), "one number per axis"),
        (_changed(head_dim=lambda B, N, dim, chan, H: 8.0), "chan // num_heads"),
        (lambda *sizes: {"head_dim": 12, "qkv_heads": [3, 13, 8, 100, 12], "scores": [13, 8, 100, 100]}, "not right"),
        (lambda *sizes: [4, [3, 2, 3, 5, 4]], "not a dict"),
        ({"head_dim": 12, "qkv_heads": [3, 13, 8, 100, 12], "scores": [13, 8, 100, 100]}, "should be a function"),
    ],
)
def test_head_shapes_explains_each_mistake(answer, expected):
    v = verdict(checks.check_head_shapes, answer)
    assert not v.ok and expected in f"{v.message} {v.hint}", v


def test_head_shapes_refuses_a_function_that_runs_a_layer():
    def run_it(B, N, dim, chan, H):
        inter = Attention(dim, chan, H)(torch.zeros(B, N, dim), return_intermediates=True)[1]
        return {"head_dim": chan // H, "qkv_heads": list(inter["qkv_heads"].shape), "scores": list(inter["scores"].shape)}

    v = verdict(checks.check_head_shapes, run_it)
    assert not v.ok and "Attention" in v.message, v


def test_split_line_runs_every_option_and_explains_the_wrong_ones():
    q = torch.randn(2, 5, 8)
    assert verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2, mixes_sequences="e").ok
    assert verdict(checks.check_split_line, " (B) ", SPLIT_OPTIONS, q, 2, mixes_sequences="(E)").ok
    a = verdict(checks.check_split_line, "a", SPLIT_OPTIONS, q, 2)
    assert not a.ok and "right shape" in a.message and "head 0, token 1" in a.message
    first_wrong = q[0, 0, 4:].tolist()  # (a)'s head 0, token 1: the second half of token 0
    assert ", ".join(f"{value:.2f}" for value in first_wrong) in a.message
    c = verdict(checks.check_split_line, "c", SPLIT_OPTIONS, q, 2)
    assert not c.ok and "does not even run: RuntimeError: view size is not compatible" in c.message
    assert "transposes before it splits" in c.hint and "reshape would run, and still be wrong" in c.message
    d = verdict(checks.check_split_line, "d", SPLIT_OPTIONS, q, 2)
    assert not d.ok and "head 0, token 0" in d.message and "transposes before it splits" in d.hint
    e = verdict(checks.check_split_line, "e", SPLIT_OPTIONS, q, 2)
    assert not e.ok and "head 1, token 0" in e.message and ", ".join(f"{v:.2f}" for v in q[1, 0, :4].tolist()) in e.message
    assert "(H, B, N, head_dim)" in e.hint and "only because B = num_heads = 2" in e.hint
    lesson_line = dict(SPLIT_OPTIONS, f="q.view(B, N, num_heads, head_dim).transpose(1, 2)")
    assert verdict(checks.check_split_line, "f", lesson_line, q, 2, mixes_sequences="e").ok
    g = verdict(checks.check_split_line, "g", SPLIT_OPTIONS, q, 2)
    assert not g.ok and "one of the letters" in g.message


def test_split_line_needs_the_option_whose_row_0_1_holds_sequence_1():
    q = torch.randn(2, 5, 8)
    missing = verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2)
    assert not missing.ok and "mixes_sequences is still None" in missing.message
    # what each wrong line does with the batch axis is found by running it, not by reading its text
    hints = {"a": "(a): it gives [2, 2, 5, 4], and each [b, ...]", "b": "(b): it is the split itself",
             "c": "(c): with reshape in place of view, it gives [2, 2, 5, 4]", "d": "(d): it gives [2, 2, 5, 4]"}
    for letter, words in hints.items():
        v = verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2, mixes_sequences=letter)
        assert not v.ok and words in v.hint and "still the batch axis B" in v.hint, (letter, v)
    assert "does not even run" in verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2, mixes_sequences="c").message
    assert "numbers of sequence 0 only" in verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2,
                                                   mixes_sequences="d").message
    reworded = dict(SPLIT_OPTIONS, a="q.view(B, num_heads, N, head_dim)  # cut in memory order")
    v = verdict(checks.check_split_line, "b", reworded, q, 2, mixes_sequences="a")
    assert not v.ok and "(a): it gives [2, 2, 5, 4]" in v.hint and "still the batch axis B" in v.hint, v
    bad = verdict(checks.check_split_line, "b", SPLIT_OPTIONS, q, 2, mixes_sequences="z")
    assert not bad.ok and "mixes_sequences = 'a'" in bad.hint
    # the second part is judged by running the line: a line of another kind that puts sequence 1 at [0, 1] passes
    other = dict(SPLIT_OPTIONS, f="q.flip(0).view(B, N, num_heads, head_dim).transpose(1, 2)")
    assert verdict(checks.check_split_line, "b", other, q, 2, mixes_sequences="f").ok


def test_split_line_names_a_batch_and_heads_swap_only_when_the_sizes_hide_it():
    q = torch.randn(3, 5, 8)  # B = 3, num_heads = 2: the swap changes the shape
    v = verdict(checks.check_split_line, "e", SPLIT_OPTIONS, q, 2)
    assert not v.ok and "gives [2, 3, 5, 4]" in v.message


def test_split_line_reports_a_wrong_shape():
    options = dict(SPLIT_OPTIONS, f="q.view(B, N, num_heads, head_dim)")
    v = verdict(checks.check_split_line, "f", options, torch.randn(2, 5, 8), 2)
    assert not v.ok and "gives [2, 5, 2, 4]" in v.message


@pytest.fixture(scope="module")
def one_and_four_heads():
    torch.manual_seed(3)
    four = Attention(dim=6, chan=8, num_heads=4)
    one = Attention(dim=6, chan=8, num_heads=1)
    one.load_state_dict(four.state_dict())
    x = torch.randn(2, 5, 6)
    with torch.no_grad():
        return one(x), four(x)


def test_heads_prediction_different_is_right_and_same_gets_the_softmax_hint(one_and_four_heads):
    out1, out4 = one_and_four_heads
    assert verdict(checks.check_heads_prediction, " Different ", out1, out4, 4).ok
    same = verdict(checks.check_heads_prediction, "same", out1, out4, 4)
    assert not same.ok and "far above float rounding" in same.message and "its own softmax" in same.hint


def test_heads_prediction_follows_the_measurement_and_rejects_other_words(one_and_four_heads):
    out1, _ = one_and_four_heads
    assert verdict(checks.check_heads_prediction, "same", out1, out1 + 1e-7, 4).ok
    assert not verdict(checks.check_heads_prediction, "different", out1, out1, 4).ok
    other = verdict(checks.check_heads_prediction, "maybe", out1, out1, 4)
    assert not other.ok and "'same', 'different'" in other.message
    mismatch = verdict(checks.check_heads_prediction, "same", out1, out1[:, :2], 4)
    assert not mismatch.ok and "same shape" in mismatch.message


def _multi_head(q, k, v, h, *, divisor=None, axis=-1, split=_split, merge=_merge, scale=True):
    qh, kh, vh = split(q, h), split(k, h), split(v, h)
    d = divisor(q.shape[-1], h) if divisor else math.sqrt(qh.shape[-1])
    weights = torch.softmax(qh @ kh.mT / (d if scale else 1.0), dim=axis)
    return merge(weights @ vh)


def test_multi_head_function_accepts_a_loop_and_functions_built_on_an_sdpa():
    def with_sdpa(q, k, v, num_heads):  # PyTorch's own attention inside the learner's split and merge
        return _merge(F.scaled_dot_product_attention(_split(q, num_heads), _split(k, num_heads), _split(v, num_heads)))

    def head_by_head(q, k, v, num_heads):  # walkthrough 002's way: one head at a time, concatenated
        d = q.shape[-1] // num_heads
        return torch.cat([torch.softmax(q[..., i * d:(i + 1) * d] @ k[..., i * d:(i + 1) * d].mT / math.sqrt(d), -1)
                          @ v[..., i * d:(i + 1) * d] for i in range(num_heads)], dim=-1)

    def with_library_sdpa(q, k, v, num_heads):  # the series' own attention step is allowed too
        return _merge(scaled_dot_product_attention(_split(q, num_heads), _split(k, num_heads), _split(v, num_heads)))

    for fn in (_multi_head, with_sdpa, head_by_head, with_library_sdpa):
        result = verdict(checks.check_multi_head_function, fn)
        assert result.ok, result


@pytest.mark.parametrize(("fn", "cause", "hint"), [
    (lambda q, k, v, h: _multi_head(q, k, v, h, divisor=lambda chan, h: math.sqrt(chan)), "sqrt(chan)", "walkthrough 004"),
    (lambda q, k, v, h: _multi_head(q, k, v, 1), "no split into heads", "split q, k and v"),
    (lambda q, k, v, h: _multi_head(q, k, v, 1, divisor=lambda chan, _: math.sqrt(chan // h)), "divided by sqrt(head_dim)",
     "split q, k and v"),
    (lambda q, k, v, h: _multi_head(q, k, v, h, scale=False), "not scaled", "sqrt(head_dim)"),
    (lambda q, k, v, h: _multi_head(q, k, v, h, axis=-2), "over the queries", "dim=-1"),
    (lambda q, k, v, h: _multi_head(q, k, v, h, split=lambda t, h: t.reshape(t.shape[0], h, t.shape[1], -1)),
     "without the transpose", "whole tokens"),
    (lambda q, k, v, h: _multi_head(q, k, v, h, merge=lambda t: t.reshape(t.shape[0], t.shape[2], -1)),
     "reshape alone", "transpose(1, 2) first"),
    (lambda q, k, v, h: _multi_head(q, k, v, h, split=lambda t, h: t.reshape(t.shape[0], h, t.shape[1], -1),
                                    merge=lambda t: t.reshape(t.shape[0], t.shape[2], -1)),
     "both without a transpose", "whole tokens"),
])
def test_multi_head_function_names_each_typical_mistake(fn, cause, hint):
    result = verdict(checks.check_multi_head_function, fn)
    assert not result.ok and cause in result.message and hint in result.hint, result


@pytest.mark.parametrize(("answer", "message"), [
    (3, "should be a function"),
    (torch.zeros(2, 5, 8), "should be a function, got a tensor of shape [2, 5, 8]"),
    (lambda q, k, v, h: "x", "returned str"),
    (lambda q, k, v, h: q.view(7, 7), "raised RuntimeError"),
    (lambda q, k, v, h: _split(q, h), "the heads before merging"),
    (lambda q, k, v, h: torch.zeros_like(q), "different values"),  # a constant cannot pass
])
def test_multi_head_function_explains_unusable_answers_in_words(answer, message):
    result = verdict(checks.check_multi_head_function, answer)
    assert not result.ok and message in result.message, result


def _with_torch_mha(q, k, v, num_heads):  # nn.MultiheadAttention whose projections change nothing
    chan = q.shape[-1]
    mha = torch.nn.MultiheadAttention(chan, num_heads, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(chan).repeat(3, 1))  # (3*chan, chan): q, k, v are the inputs
        mha.out_proj.weight.copy_(torch.eye(chan))
        return mha(q, k, v, need_weights=False)[0]  # (B, N, chan)


def _with_eval_torch_mha(q, k, v, num_heads):  # the same in eval mode without grad: PyTorch's fused fast path
    with torch.no_grad():
        return _with_torch_mha(q, k, v, num_heads)


@pytest.mark.parametrize(("fn", "message"), [
    (lambda q, k, v, h: merge_heads(F.scaled_dot_product_attention(split_heads(q, h), split_heads(k, h), split_heads(v, h))),
     "calls attn_helpers' split_heads"),
    (lambda q, k, v, h: merge_heads(F.scaled_dot_product_attention(_split(q, h), _split(k, h), _split(v, h))),
     "calls attn_helpers' merge_heads"),
    (_with_torch_mha, "calls torch.nn.MultiheadAttention"),
    (_with_eval_torch_mha, "calls torch.nn.MultiheadAttention"),
    (Attention(8, 8, 2), "is attn_helpers' Attention"),
])
def test_multi_head_function_refuses_the_librarys_split_merge_and_whole_layers(fn, message):
    result = verdict(checks.check_multi_head_function, fn)
    assert not result.ok and message in result.message and "your own reshape and transpose" in result.hint, result


def test_unanswered_checkers_say_not_attempted(capsys):
    checks.check_split_heads(None)
    checks.check_multi_head_function(None)
    checks.check_heads_prediction(None, X, X, 3)
    printed = capsys.readouterr().out
    assert printed.count("Not attempted yet") == 3


def _native(q, k, v, num_heads, aten=False):
    chan = q.shape[-1]
    eye, zeros = torch.eye(chan), torch.zeros(chan)
    op = torch.ops.aten._native_multi_head_attention if aten else torch._native_multi_head_attention
    return op(q, k, v, chan, num_heads, torch.cat([eye, eye, eye]), torch.zeros(3 * chan), eye, zeros, None, False)[0]


@pytest.mark.parametrize("aten", [False, True])
def test_multi_head_function_refuses_torchs_fused_multi_head_op(aten):
    result = checks.check_multi_head_function.judge(lambda q, k, v, h: _native(q, k, v, h, aten))
    assert not result.ok and "_native_multi_head_attention" in result.message


def test_multi_head_function_refuses_attn_helpers_attention_functions():
    def grouped(q, k, v, num_heads):
        B, N, chan = q.shape
        split = [t.reshape(B, N, num_heads, chan // num_heads).transpose(1, 2) for t in (q, k, v)]
        return attn_helpers.tiled_attention(*split).transpose(1, 2).reshape(B, N, chan)
    result = checks.check_multi_head_function.judge(grouped)
    assert not result.ok and "tiled_attention" in result.message
