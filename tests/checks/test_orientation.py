"""The checkers of 00 · Orientation: verdicts beyond the exercise tests' solution, None and typical wrong answer."""

import io
import math
from contextlib import redirect_stdout

import pytest

from attn_helpers.core import tiled_attention
import torch
import torch.nn.functional as F

from attn_helpers import attend, attention_scores, checks, scaled_dot_product_attention


X = torch.tensor([[0.1, 0.0], [1.0, 0.2], [0.9, 1.0], [0.0, 0.8]])
TOKENS = ["the", "cat", "sat", "down"]
WEIGHTS = torch.softmax(X @ X.mT / 2 ** 0.5, dim=-1)


def test_scores_shape_checker_notices_a_missing_head_axis():
    verdict = checks.check_scores_shape.judge([13, 100, 100], B=13, num_heads=4, N=100)
    assert not verdict.ok and "head axis" in verdict.message


def test_scores_shape_checker_says_a_score_belongs_to_a_pair_of_tokens():  # reader t2: [B, H, N] has the heads
    verdict = checks.check_scores_shape.judge([8, 2, 20], B=8, num_heads=2, N=20)
    assert not verdict.ok and "head axis" not in verdict.message and "pair of tokens" in verdict.message
    assert "last two axes are N (queries) and N (keys)" in verdict.hint


@pytest.mark.parametrize("answer, words", [  # reader i00: the fallback said the last two axes were N and N
    ([2, 20, 20], "has no batch axis"), ([16, 20, 20], "merges the batch and head axes"),
    ([1, 2, 20, 20], "this exercise's B"), ([13, 4, 100, 100], "this exercise's B"),
])
def test_scores_shape_checker_names_what_is_wrong_in_front_of_the_n_by_n(answer, words):
    verdict = checks.check_scores_shape.judge(answer, B=8, num_heads=2, N=20)
    assert not verdict.ok and words in verdict.message + verdict.hint and "last two axes" not in verdict.hint


def test_scores_shape_checker_rejects_a_non_shape():
    verdict = checks.check_scores_shape.judge(5, B=13, num_heads=4, N=100)
    assert not verdict.ok and "list or tuple" in verdict.message


@pytest.mark.parametrize("answer", [[8.7, 2, 20, 20], [8.0, 2, 20, 20], ["8", 2, 20, 20]])
def test_scores_shape_checker_refuses_what_is_not_a_whole_number(answer):  # int(8.7) = 8 passed before
    verdict = checks.check_scores_shape.judge(answer, B=8, num_heads=2, N=20)
    assert not verdict.ok and "whole numbers" in verdict.message


def test_largest_key_prediction_accepts_the_winner_in_any_case():
    assert checks.check_largest_key.judge(" SAT ", WEIGHTS, TOKENS, query="cat").ok


def test_largest_key_prediction_rejects_a_word_not_in_the_sentence():
    verdict = checks.check_largest_key.judge("dog", WEIGHTS, TOKENS, query="cat")
    assert not verdict.ok and "one of" in verdict.message


def test_largest_key_prediction_not_attempted_points_at_the_cell_above():
    out = io.StringIO()
    with redirect_stdout(out):
        checks.check_largest_key(None, WEIGHTS, TOKENS, query="cat")
    assert "cell above" in out.getvalue()


def _weights(x, d_k=None, dim=-1):
    return torch.softmax(x @ x.mT / math.sqrt(x.shape[-1] if d_k is None else d_k), dim=dim)


def test_self_attention_weights_checker_runs_the_function_on_inputs_of_its_own():
    assert checks.check_self_attention_weights.judge(lambda x: _weights(x)).ok


@pytest.mark.parametrize("answer, words", [
    (lambda x: _weights(x, dim=0), "dim=0"),
    (lambda x: _weights(x, d_k=x.shape[0]), "sqrt(N)"),  # only catchable because the checker's N != d_k
    (lambda x: _weights(x, d_k=3), "different values"),  # the sqrt(3) of one example written in
    (lambda x: _weights(x, d_k=2), "sqrt(2), the d_k of section 0.1"),  # 00 c7's line copied (round 3)
    (lambda x: torch.softmax(x @ x.mT / x.shape[-1], dim=-1), "instead of sqrt(d_k)"),  # was told sqrt(N)
    (lambda x: torch.softmax(x @ x.mT, dim=-1), "not divided by sqrt(d_k)"),
    (lambda x: x @ x.mT / math.sqrt(x.shape[-1]), "no softmax"),
])
def test_self_attention_weights_checker_names_the_mistake(answer, words):
    verdict = checks.check_self_attention_weights.judge(answer)
    assert not verdict.ok and words in verdict.message + verdict.hint


@pytest.mark.parametrize("answer, words", [
    (lambda x: scaled_dot_product_attention(x, x, x, return_weights=True)[1], "scaled_dot_product_attention"),
    (lambda x: F.scaled_dot_product_attention(x, x, torch.eye(x.shape[0])), "F.scaled_dot_product_attention"),
    (lambda x: attend(x, x, x)[2], "attend"),  # reader w00: attend's weights were accepted
    (lambda x: _weights(attention_scores(x, x)), "attention_scores"),
    (lambda x: tiled_attention(x, x, torch.eye(x.shape[0])), "tiled_attention"),  # grader round 2
    (torch.eye(3), "should be a function"),
])
def test_self_attention_weights_checker_refuses_the_library_and_values(answer, words):
    verdict = checks.check_self_attention_weights.judge(answer)
    assert not verdict.ok and words in verdict.message
    # reader u2: the refusal's hint was the solution's line, which then passed when pasted; it names the steps
    assert "x.mT" not in verdict.hint and "softmax(" not in verdict.hint, verdict.hint


def test_self_attention_weights_checker_inputs_keep_every_mistake_apart():
    """On every input the checker uses, no two likely mistakes (nor one and the right answer) give the same weights:
    on an input of shape (4, 2), dividing by d_k = 2 is dividing by sqrt(N), and the hint named the wrong one."""
    from attn_helpers.checks._function import random_cases
    from attn_helpers.checks.orientation import _CASE_SHAPES, _weight_mistakes

    for x in random_cases(3, _CASE_SHAPES):
        expected, mistakes = _weight_mistakes(x)
        tables = {"the right answer": expected, **{cause: table for cause, (table, _) in mistakes.items()}}
        names = list(tables)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                same = tables[a].shape == tables[b].shape and torch.allclose(tables[a], tables[b], atol=1e-3)
                assert not same, f"on x of shape {tuple(x.shape)}: {a!r} and {b!r} give the same weights"
