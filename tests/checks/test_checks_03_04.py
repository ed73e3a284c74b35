"""The checkers of lessons 03 (softmax and masks) and 04 (weighted values): right answers pass in
every accepted form, each typical mistake is named, and odd answers get words, never a traceback."""

import pytest
import torch

from attn_helpers import causal_mask, checks, mask_to_additive, padding_mask
from attn_helpers.core import online_softmax


# -- 03: check_padding_keep_mask, check_masked_row_prediction; 03a: check_convention_prediction --

LENGTHS = torch.tensor([3, 5])


def test_padding_keep_mask_accepts_the_comparison_and_the_helper():
    by_hand = (torch.arange(5)[None, :] < LENGTHS[:, None])[:, None, :]
    assert checks.check_padding_keep_mask.judge(by_hand, LENGTHS, 5).ok
    assert checks.check_padding_keep_mask.judge(padding_mask(LENGTHS, 5), LENGTHS, 5).ok


@pytest.mark.parametrize("answer, words", [
    ((torch.arange(5)[None, :] < LENGTHS[:, None]), "no query axis"),
    ((torch.arange(5)[None, :] <= LENGTHS[:, None])[:, None, :], "one key too many"),
    (~padding_mask(LENGTHS, 5), "marked the padding"),
    (padding_mask(LENGTHS, 5).float(), "boolean"),
    ([[1, 1, 1, 0, 0]], "not a tensor"),
])
def test_padding_keep_mask_names_each_mistake(answer, words):
    verdict = checks.check_padding_keep_mask.judge(answer, LENGTHS, 5)
    assert not verdict.ok and words in verdict.message + verdict.hint


def test_masked_row_prediction_reads_the_computed_row():
    nan_row = torch.softmax(torch.full((4,), float("-inf")), dim=-1)
    assert checks.check_masked_row_prediction.judge("NaN", nan_row).ok
    assert not checks.check_masked_row_prediction.judge("uniform", nan_row).ok
    assert checks.check_masked_row_prediction.judge("zeros", torch.zeros(4)).ok
    assert checks.check_masked_row_prediction.judge("uniform", torch.full((4,), 0.25)).ok
    assert not checks.check_masked_row_prediction.judge("empty", torch.zeros(4)).ok


def test_convention_prediction():
    assert checks.check_convention_prediction.judge("keep", True, "SDPA").ok
    assert checks.check_convention_prediction.judge("blocked", False, "nn.MultiheadAttention").ok
    verdict = checks.check_convention_prediction.judge("blocked", True, "SDPA")
    assert not verdict.ok and "'keep'" in verdict.message


# -- 03: check_softmax_axis: scores stored keys-first (exercise 3.3) -----------------------------

def test_softmax_axis_accepts_the_keys_axis_counted_from_the_end():
    assert checks.check_softmax_axis.judge(lambda s: torch.softmax(s, dim=-2)).ok
    assert checks.check_softmax_axis.judge(lambda s: torch.softmax(s.mT, dim=-1).mT).ok


@pytest.mark.parametrize("fn, words", [
    (lambda s: torch.softmax(s, dim=-1), "which here is the queries"),  # lesson 03 c6 copied (round 2)
    (lambda s: torch.softmax(s, dim=-2).mT, "queries-first"),
    (lambda s: torch.softmax(s, dim=2), "which here is the queries"),  # right only with four axes
    (lambda s: torch.softmax(s, dim=0), "a batch or head axis"),
    (lambda s: s, "forgot the softmax"),
    (lambda s: online_softmax(s.mT).mT, "online_softmax"),  # the library's softmax (round 2)
    (torch.zeros(2, 3), "should be a function"),
])
def test_softmax_axis_names_each_mistake(fn, words):
    verdict = checks.check_softmax_axis.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


# -- 03a: check_additive_mask: from a blocked mask, in a given dtype (exercise 3.6) --------------

def test_additive_mask_accepts_the_blocked_mask_filled_in_its_dtype():
    fn = lambda blocked, dtype: torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, float("-inf"))  # noqa: E731
    assert checks.check_additive_mask.judge(fn).ok


@pytest.mark.parametrize("fn, words", [
    # 03a c6's line for a keep mask, copied (round 2): the wrong convention, and float32
    (lambda blocked, dtype: torch.zeros(blocked.shape).masked_fill(~blocked, float("-inf")), "True = blocked"),
    (lambda blocked, dtype: torch.zeros(blocked.shape).masked_fill(blocked, float("-inf")), "the dtype is"),
    (lambda blocked, dtype: blocked.to(dtype), "blocks nothing"),
    (lambda blocked, dtype: torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, -1e9), "-1e9"),
    (lambda blocked, dtype: blocked, "boolean mask"),
    (lambda blocked, dtype: torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, torch.finfo(dtype).min),
     "finfo(dtype).min"),  # round 3
    (lambda blocked, dtype: mask_to_additive(blocked, invert=True, dtype=dtype), "mask_to_additive"),
    (torch.zeros(3), "should be a function"),
])
def test_additive_mask_names_each_mistake(fn, words):
    verdict = checks.check_additive_mask.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


def test_padding_keep_mask_names_positions_compared_with_the_lengths():
    verdict = checks.check_padding_keep_mask.judge(
        lambda lengths, n: (torch.arange(n)[None, :] >= lengths[:, None])[:, None, :], torch.tensor([3, 5]), 5,
        side="left")
    assert not verdict.ok and "not with n - lengths" in verdict.message


# -- 04: check_attention_function, check_midpoint_weights, check_output_shape_prediction ------------

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
    assert not verdict.ok and "sqrt(N_k)" in verdict.message and "k.shape[-2]" in verdict.hint


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


# -- 03: check_padding_keep_mask with left padding (exercise 3.2): a function, padding_mask refused ----

def _left(lengths, n):
    return (torch.arange(n)[None, :] >= (n - lengths)[:, None])[:, None, :]  # (B, 1, n)


def test_left_padding_keep_mask_accepts_the_comparison():
    assert checks.check_padding_keep_mask.judge(_left, LENGTHS, 5, side="left").ok


@pytest.mark.parametrize("answer, words", [
    (lambda lengths, n: (torch.arange(n)[None, :] < lengths[:, None])[:, None, :], "right-padded"),
    (lambda lengths, n: ~_left(lengths, n), "marked the padding"),
    (lambda lengths, n: (torch.arange(n)[None, :] > (n - lengths)[:, None])[:, None, :], "dropped the first real key"),
    (lambda lengths, n: _left(lengths, n)[:, 0], "no query axis"),
    (lambda lengths, n: _left(LENGTHS, 5), "lengths [2, 6, 1] and n = 7"),  # the exercise's numbers only
    (_left(LENGTHS, 5), "should be a function"),
])
def test_left_padding_keep_mask_names_each_mistake(answer, words):
    verdict = checks.check_padding_keep_mask.judge(answer, LENGTHS, 5, side="left")
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


@pytest.mark.parametrize("answer", [padding_mask, lambda lengths, n: padding_mask(lengths, n).flip(-1)])
def test_left_padding_keep_mask_refuses_padding_mask(answer):
    verdict = checks.check_padding_keep_mask.judge(answer, LENGTHS, 5, side="left")  # grader round 4
    assert not verdict.ok and "padding_mask" in verdict.message, verdict


def test_padding_keep_mask_rejects_an_unknown_side():
    verdict = checks.check_padding_keep_mask.judge(padding_mask(LENGTHS, 5), LENGTHS, 5, side="middle")
    assert not verdict.ok and "side must be 'right' or 'left'" in verdict.message


# -- 04: check_attention_function refuses the library's own attention ------------------------------

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


# -- 03a: check_window_blocked_mask: a causal window of w keys, True = blocked (exercise 3.5) ------

def _window(n, w):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j > i) | (j <= i - w)


def test_window_mask_accepts_a_function_written_by_hand():
    assert checks.check_window_blocked_mask.judge(_window).ok


@pytest.mark.parametrize("fn, words", [
    # round 3: the library's causal builders, and slices of the lesson's 8-token masks, no longer pass
    (lambda n, w: ~causal_mask(n), "only the future"),
    (lambda n, w: torch.nn.Transformer.generate_square_subsequent_mask(n) == float("-inf"), "only the future"),
    (lambda n, w: (~causal_mask(8))[:n, :n], "shape [8, 8], expected [12, 12]"),
    (lambda n, w: ~_window(n, w), "True = keep"),
    (lambda n, w: _window(n, w + 1), "w + 1 keys"),
    (lambda n, w: _window(n, max(w - 1, 1)), "w - 1 keys"),
    (lambda n, w: _window(n, w) | torch.eye(n, dtype=torch.bool), "own key"),
    (lambda n, w: (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs() >= w, "a band"),
    (lambda n, w: torch.arange(n)[None, :] <= torch.arange(n)[:, None] - w, "every future key stays visible"),
    (lambda n, w: _window(n, w).float(), "boolean mask"),
    (_window(5, 2), "should be a function"),
])
def test_window_mask_names_each_mistake(fn, words):
    verdict = checks.check_window_blocked_mask.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict
