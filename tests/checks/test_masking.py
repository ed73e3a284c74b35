"""The checkers of checks/masking.py (lessons 03 and 03a: softmax and masks, mask conventions): right answers pass
in every accepted form, each typical mistake is named, and odd answers get words, never a traceback."""

import pytest
import torch

from attn_helpers import causal_mask, checks, mask_to_additive, padding_mask
from attn_helpers.core import online_softmax

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


def test_additive_mask_refuses_the_library_apply_mask():  # reader g5: it passed
    from attn_helpers.core import apply_mask

    verdict = checks.check_additive_mask.judge(lambda blocked, dtype: apply_mask(torch.zeros(blocked.shape, dtype=dtype),
                                                                                  ~blocked))
    assert not verdict.ok and "apply_mask" in verdict.message, verdict
    # reader u2: its hint was the solution's line, which then passed when pasted; it names the steps
    assert "masked_fill" not in verdict.hint and "torch.zeros(" not in verdict.hint, verdict.hint


def test_additive_mask_refuses_pytorchs_internal_mask_converter_by_its_name():  # a fresh reader: it passed
    convert = torch.nn.functional._canonical_mask  # the learner's code; the checker itself reads no private name
    verdict = checks.check_additive_mask.judge(lambda blocked, dtype: convert(
        mask=blocked, mask_name="m", other_type=None, other_name="", target_type=dtype))
    assert not verdict.ok and "PyTorch's internal mask converter" in verdict.message, verdict

    def _canonical_mask(blocked, dtype):  # a learner's own function of that name is refused too (accepted misfire)
        return torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, float("-inf"))

    def mine(blocked, dtype):
        return _canonical_mask(blocked, dtype)

    assert not checks.check_additive_mask.judge(mine).ok


def test_padding_keep_mask_names_positions_compared_with_the_lengths():
    verdict = checks.check_padding_keep_mask.judge(
        lambda lengths, n: (torch.arange(n)[None, :] >= lengths[:, None])[:, None, :], torch.tensor([3, 5]), 5,
        side="left")
    assert not verdict.ok and "not with n - lengths" in verdict.message


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


def _window(n, w):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j > i) | (j <= i - w)


def test_window_mask_accepts_a_function_written_by_hand():
    assert checks.check_window_blocked_mask.judge(_window).ok


def test_window_mask_refuses_the_library_sliding_window_mask():  # reader g3: it passed, inverted
    from attn_helpers.core import sliding_window_mask

    verdict = checks.check_window_blocked_mask.judge(lambda n, w: ~sliding_window_mask(n, window=w))
    assert not verdict.ok and "sliding_window_mask" in verdict.message, verdict


@pytest.mark.parametrize("fn, words", [
    # round 3: the library's causal builders, and slices of the lesson's 8-token masks, no longer pass
    (lambda n, w: ~causal_mask(n), "only the future"),
    (lambda n, w: torch.nn.Transformer.generate_square_subsequent_mask(n) == float("-inf"), "only the future"),
    (lambda n, w: (~causal_mask(8))[:n, :n], "shape [8, 8], expected [12, 12]"),
    (lambda n, w: ~_window(n, w), "True = keep"),
    (lambda n, w: _window(n, w + 1), "window + 1 keys"),
    (lambda n, w: _window(n, max(w - 1, 1)), "window - 1 keys"),
    (lambda n, w: _window(n, w) | torch.eye(n, dtype=torch.bool), "own key"),
    (lambda n, w: (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs() >= w, "a band"),
    (lambda n, w: torch.arange(n)[None, :] <= torch.arange(n)[:, None] - w, "every future key stays visible"),
    # a fresh reader: the far edge one place off with the future visible, the query left out of its window,
    # and a band one key wider got "N of its M entries differ"
    (lambda n, w: torch.arange(n)[None, :] < torch.arange(n)[:, None] - w, "(window + 1 keys), and every future"),
    (lambda n, w: torch.arange(n)[None, :] <= torch.arange(n)[:, None] - w + 1,
     "(window - 1 keys), and every future"),
    (lambda n, w: _window(n, w + 1) | torch.eye(n, dtype=torch.bool), "the window keys before it but not itself"),
    (lambda n, w: (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs() > w, "w keys on either side"),
    (lambda n, w: _window(n, w).float(), "boolean mask"),
    (_window(5, 2), "should be a function"),
])
def test_window_mask_names_each_mistake(fn, words):
    verdict = checks.check_window_blocked_mask.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


def test_window_and_additive_masks_name_two_more_mistakes():  # reader g7: both got the generic hint
    verdict = checks.check_window_blocked_mask.judge(lambda n, w: _window(n, w).mT)
    assert not verdict.ok and "transposed" in verdict.message, verdict
    verdict = checks.check_additive_mask.judge(lambda blocked, dtype: blocked.to(dtype) * float("-inf"))
    assert not verdict.ok and "0 x -inf is nan" in verdict.message, verdict
