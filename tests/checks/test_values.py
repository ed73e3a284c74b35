"""The checkers of checks/values.py (lesson 04, weighted values): right answers pass in every accepted form, each
typical mistake is named, the library's attention is refused under any name, and odd answers get words."""

import pytest
import torch

from attn_helpers import checks

def _attention(q, k, v, mask=None, *, scale=True, dim=-1, flip=False, use_mask=True, weights_only=False):
    import math

    scores = q @ k.mT / (math.sqrt(q.shape[-1]) if scale else 1.0)
    if mask is not None and use_mask:
        scores = scores.masked_fill(mask if flip else ~mask, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    return weights if weights_only else weights @ v


def test_attention_function_accepts_a_correct_function():
    assert checks.check_attention_function.judge(_attention).ok


@pytest.mark.parametrize("kwargs, words", [
    ({"scale": False}, "not divided by sqrt(d_k)"),
    ({"dim": -2}, "over the queries"),
    ({"weights_only": True}, "returns the weights"),
    ({"use_mask": False}, "mask is ignored"),
    ({"flip": True}, "True = blocked"),
])
def test_attention_function_names_each_mistake(kwargs, words):
    verdict = checks.check_attention_function.judge(lambda q, k, v, mask=None: _attention(q, k, v, mask, **kwargs))
    assert not verdict.ok and words in verdict.message


def test_attention_function_names_the_lessons_d_k_written_into_the_function():
    import math

    def pasted(q, k, v, mask=None):  # reader v00: lesson 04's lines with the notebook's d_k = 8 got the generic hint
        scores = q @ k.mT / math.sqrt(8)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    verdict = checks.check_attention_function.judge(pasted)
    assert not verdict.ok and "divided by sqrt(8), the lesson's d_k, where these inputs have d_k = 16" in verdict.message
    assert "q.shape[-1]" in verdict.hint, verdict


@pytest.mark.parametrize("axis, words", [(-2, "q.shape[-2] = k.shape[-2] = 5"), (-2, "axis -2")])
def test_attention_function_does_not_blame_the_keys_for_a_division_by_the_queries(axis, words):
    import math

    def by_queries(q, k, v, mask=None):  # reader g3: was named "the number of keys, not k.shape[-2]"
        scores = q @ k.mT / math.sqrt(q.shape[axis])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    verdict = checks.check_attention_function.judge(by_queries)
    assert not verdict.ok and words in verdict.message + verdict.hint and "number of keys" not in verdict.message, verdict


def test_attention_function_names_a_mask_applied_after_the_softmax():  # reader t2
    def after(q, k, v, mask=None):
        weights = torch.softmax(q @ k.mT / q.shape[-1] ** 0.5, dim=-1)
        if mask is not None:
            weights = weights * mask  # the blocked weights zeroed, the rows no longer summing to one
        return weights @ v
    verdict = checks.check_attention_function.judge(after)
    assert not verdict.ok and "after the softmax" in verdict.message and "masked_fill(~mask" in verdict.hint


@pytest.mark.parametrize("zeroed", [lambda s, mask: s.masked_fill(~mask, 0.0), lambda s, mask: s * mask])
def test_attention_function_names_blocked_scores_set_to_zero(zeroed):  # reader z00: got the generic hint
    def zeroing(q, k, v, mask=None):
        s = q @ k.mT / q.shape[-1] ** 0.5
        return torch.softmax(zeroed(s, mask) if mask is not None else s, dim=-1) @ v
    verdict = checks.check_attention_function.judge(zeroing)
    assert not verdict.ok and "set to 0" in verdict.message and "exp(0) = 1" in verdict.hint, verdict


def test_attention_function_names_a_keep_mask_added_to_the_scores():  # 03a section 3a.5's bug (round 3)
    def added(q, k, v, mask=None):
        s = q @ k.mT / q.shape[-1] ** 0.5
        return torch.softmax(s if mask is None else s + mask, dim=-1) @ v
    verdict = checks.check_attention_function.judge(added)
    assert not verdict.ok and "boolean mask is added" in verdict.message


def test_attention_function_names_a_scale_by_the_number_of_keys():  # a later reader's first try (round 7)
    def by_n_k(q, k, v, mask=None):
        import math

        return _attention(q * math.sqrt(q.shape[-1] / k.shape[-2]), k, v, mask)  # scores / sqrt(N_k)
    verdict = checks.check_attention_function.judge(by_n_k)
    assert not verdict.ok and "k.shape[-2] = 5" in verdict.message and "axis -2" in verdict.hint


def test_midpoint_weights_sum_is_printed_to_the_digit_that_is_wrong():
    v = torch.randn(6, 2, generator=torch.Generator().manual_seed(2))
    verdict = checks.check_midpoint_weights.judge(torch.tensor([0, 0.5, 0, 0, 0, 0.5002]), v, 1, 5)
    assert not verdict.ok and "1.0002" in verdict.message  # it said "sum to 1.000, not 1"


def test_attention_function_names_a_scale_by_sqrt_d_v():
    def by_d_v(q, k, v, mask=None):
        import math

        return _attention(q * math.sqrt(q.shape[-1] / v.shape[-1]), k, v, mask)  # scores / sqrt(d_v)
    verdict = checks.check_attention_function.judge(by_d_v)
    assert not verdict.ok and "sqrt(d_v)" in verdict.message


def test_attention_function_explains_exceptions_tuples_and_non_functions():
    verdict = checks.check_attention_function.judge(lambda q, k, v, mask=None: torch.softmax(q @ k.T, -1) @ v)
    assert not verdict.ok and "k.mT" in verdict.hint
    # reader i2: d2l's keys.transpose(1, 2) is right on 3-D inputs and fails only once a heads axis is in front
    verdict = checks.check_attention_function.judge(
        lambda q, k, v, mask=None: torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, -1) @ v)
    assert not verdict.ok and "heads axis" in verdict.message and "transpose(1, 2)" in verdict.hint, verdict
    verdict = checks.check_attention_function.judge(lambda q, k, v, mask=None: (_attention(q, k, v, mask), None))
    assert not verdict.ok and "tuple" in verdict.message
    verdict = checks.check_attention_function.judge(42)
    assert not verdict.ok and "should be a function" in verdict.message


def test_midpoint_weights():
    v = torch.randn(6, 2, generator=torch.Generator().manual_seed(2))
    w = torch.zeros(6)
    w[1] = w[5] = 0.5
    assert checks.check_midpoint_weights.judge(w, v, 1, 5).ok
    assert checks.check_midpoint_weights.judge([0, 0.5, 0, 0, 0, 0.5], v, 1, 5).ok
    for answer, words in ((torch.ones(6) / 6, "not the midpoint"), (torch.ones(6), "sum to"),
                          (torch.tensor([0, 1.0, 0, 0, 0, 0]), "not the midpoint"),
                          (torch.tensor([-0.5, 1.0, 0, 0, 0, 0.5]), "negative"), (torch.ones(3) / 3, "shape")):
        verdict = checks.check_midpoint_weights.judge(answer, v, 1, 5)
        assert not verdict.ok and words in verdict.message, (answer, verdict)


@pytest.mark.parametrize("answer, words", [
    ([1 / 6] * 6, "mean of ALL the values"),
    ([0, 1.0, 0, 0, 0, 0], "value 1 itself"),
    ([0, 0, 0, 0, 0, 1.0], "value 5 itself"),
    ([0, 0.3, 0, 0, 0, 0.7], "count equally"),
    ([0.2, 0.4, 0, 0, 0, 0.4], "key 0 gets weight too"),
    ([0.5, 0, 0, 0, 0.5, 0], "counted from 0"),
    ([0, 0, 0.5, 0, 0, 0.5], "key 2 gets weight"),
])
def test_midpoint_weights_hint_names_the_mistake_not_the_solution(answer, words):
    v = torch.randn(6, 2, generator=torch.Generator().manual_seed(2))
    verdict = checks.check_midpoint_weights.judge(torch.tensor(answer), v, 1, 5)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict
    assert "0.5 on keys" not in verdict.hint, verdict  # every wrong answer was once told the solution


def test_output_shape_prediction_uses_the_shape_judge():
    q, k, v = torch.randn(3, 30, 8), torch.randn(3, 50, 8), torch.randn(3, 50, 16)
    assert checks.check_output_shape_prediction.judge((3, 30, 16), q, k, v).ok
    verdict = checks.check_output_shape_prediction.judge((3, 30, 50), q, k, v)
    assert not verdict.ok and "attention weights" in verdict.message


def test_attention_function_refuses_the_library():
    import torch.nn.functional as F

    from attn_helpers import scaled_dot_product_attention

    def wrapper(q, k, v, mask=None):
        return scaled_dot_product_attention(q, k, v, mask)

    for fn in (scaled_dot_product_attention, F.scaled_dot_product_attention, wrapper):
        verdict = checks.check_attention_function.judge(fn)
        assert not verdict.ok and "write the steps yourself" in verdict.message, fn


def test_attention_function_accepts_a_lambda_written_by_hand():
    import math

    fn = lambda q, k, v, mask=None: torch.softmax(  # noqa: E731
        (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(~mask if mask is not None else torch.zeros((), dtype=torch.bool),
                                                      float("-inf")), dim=-1) @ v
    assert checks.check_attention_function.judge(fn).ok


def _bypasses_of_the_library():
    """The ways round a search of the source text the grader found (round 2): a renamed torch function, a lambda,
    the package's function under another name, its tiled attention, torch.ops operators, nn.MultiheadAttention."""
    import functools

    import torch.nn.functional as F

    from attn_helpers import scaled_dot_product_attention as sdpa_lib
    from attn_helpers.core import tiled_attention

    sdpa = F.scaled_dot_product_attention

    def renamed(q, k, v, mask=None):
        return sdpa(q, k, v, attn_mask=mask)

    def layer(q, k, v, mask=None):
        mha = torch.nn.MultiheadAttention(q.shape[-1], 1, batch_first=True, bias=False)
        return mha(q, k, v)[0]

    return [renamed, lambda q, k, v, mask=None: sdpa(q, k, v, attn_mask=mask),
            lambda q, k, v, mask=None: sdpa_lib(q, k, v, mask), lambda q, k, v, mask=None: tiled_attention(q, k, v, mask),
            lambda q, k, v, mask=None: torch.ops.aten.scaled_dot_product_attention(q, k, v, mask),
            lambda q, k, v, mask=None: torch.ops.aten.scaled_dot_product_attention.default(q, k, v, mask),
            lambda q, k, v, mask=None: torch._scaled_dot_product_attention_math(q, k, v, mask)[0],
            functools.partial(sdpa, dropout_p=0.0), torch.ops.aten.scaled_dot_product_attention, layer]


@pytest.mark.parametrize("fn", _bypasses_of_the_library())
def test_attention_function_refuses_the_library_under_another_name(fn):
    verdict = checks.check_attention_function.judge(fn)
    assert not verdict.ok and "library's own attention" in verdict.message, verdict.message


def test_attention_function_refuses_the_explorers_masked_softmax():  # reader g7: the explorer's softmax passed
    from attn_helpers.widgets.masking import masked_weights

    def through_lab(q, k, v, mask=None):
        import math

        scores = q @ k.mT / math.sqrt(q.shape[-1])
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool) if mask is None else mask
        return masked_weights(scores, keep, "keep") @ v

    verdict = checks.check_attention_function.judge(through_lab)
    assert not verdict.ok and "attend" in verdict.message, verdict
