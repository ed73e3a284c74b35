"""Typical wrong answers for the exercises of 00 · Orientation (used by tests/test_exercises.py),
and the orientation checkers' other verdicts."""

from attn_helpers import checks

WRONG_ANSWERS = {
    "0.1": ("answer = 64", "divide by num_heads"),
    "0.2": ("answer = [13, 100, 4, 100]", "heads come before the tokens"),
}


def test_head_dim_checker_rejects_a_non_integer():
    verdict = checks.check_head_dim.judge(2.5, chan=64, num_heads=4)
    assert not verdict.ok and "whole number" in verdict.message


def test_head_dim_checker_names_multiplication():
    verdict = checks.check_head_dim.judge(256, chan=64, num_heads=4)
    assert not verdict.ok and "divide" in verdict.hint


def test_scores_shape_checker_notices_a_missing_head_axis():
    verdict = checks.check_scores_shape.judge([13, 100, 100], B=13, num_heads=4, N=100)
    assert not verdict.ok and "head axis" in verdict.message


def test_scores_shape_checker_rejects_a_non_shape():
    verdict = checks.check_scores_shape.judge(5, B=13, num_heads=4, N=100)
    assert not verdict.ok and "list or tuple" in verdict.message
