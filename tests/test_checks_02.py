"""The checkers of 02 · Scores and scaling: verdicts beyond the exercise tests' solution, None and typical wrong answer."""

import math

import pytest
import torch

from attn_helpers import attention_entropy, checks


def _qk(n_q=5, n_k=5, d_k=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, n_q, d_k, generator=g), torch.randn(2, n_k, d_k, generator=g)


# -- check_scaled_scores ------------------------------------------------------------------------

def test_scaled_scores_accepts_every_way_of_writing_it():
    q, k = _qk()
    for answer in (q @ k.transpose(-2, -1) / math.sqrt(8), (q * 8 ** -0.5) @ k.mT,
                   torch.einsum("bic,bjc->bij", q, k) / 8 ** 0.5):
        assert checks.check_scaled_scores.judge(answer, q, k).ok


@pytest.mark.parametrize("make, cause", [
    (lambda q, k: q @ k.transpose(-2, -1) / 8, "divided by d_k instead of sqrt(d_k)"),
    (lambda q, k: q @ k.transpose(-2, -1) * math.sqrt(8), "multiplied by sqrt(d_k)"),
    (lambda q, k: q.transpose(-2, -1) @ k / math.sqrt(8), "transposed q instead of k"),
    (lambda q, k: q.transpose(-2, -1) @ k, "and did not scale"),
    (lambda q, k: k @ q.transpose(-2, -1) / math.sqrt(8), "swapped q and k"),
    (lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(5), "sqrt(N_k)"),  # 5 keys, d_k = 8
])
def test_scaled_scores_names_each_typical_mistake(make, cause):
    q, k = _qk()
    verdict = checks.check_scaled_scores.judge(make(q, k), q, k)
    assert not verdict.ok and cause in verdict.message


def test_scaled_scores_with_different_numbers_of_queries_and_keys():
    q, k = _qk(n_q=3, n_k=7, d_k=4)
    assert checks.check_scaled_scores.judge(q @ k.mT / 2, q, k).ok
    verdict = checks.check_scaled_scores.judge(q @ k.mT, q, k)
    assert not verdict.ok and "sqrt(4) = 2.000" in verdict.hint


def test_scaled_scores_rejects_garbage_without_a_traceback():
    q, k = _qk()
    verdict = checks.check_scaled_scores.judge("scores", q, k)
    assert not verdict.ok and "tensor" in verdict.message


# -- check_score_variance -----------------------------------------------------------------------

def test_score_variance_accepts_d_k_as_int_float_or_tensor():
    for answer in (256, 256.0, torch.tensor(256.0), 255):
        assert checks.check_score_variance.judge(answer, d_k=256).ok


def test_score_variance_success_reports_a_measurement_near_d_k():
    verdict = checks.check_score_variance.judge(64, d_k=64)
    measured = float(verdict.message.split("pairs: ")[1].rstrip("."))
    assert abs(measured - 64) < 0.1 * 64


@pytest.mark.parametrize("answer, words", [(1, "after dividing"), (65536, "too large"), (100, "not the variance"), (16, "standard deviation")])
def test_score_variance_names_other_mistakes(answer, words):
    verdict = checks.check_score_variance.judge(answer, d_k=256)
    assert not verdict.ok and words in verdict.message


def test_score_variance_with_entry_variances():
    assert checks.check_score_variance.judge(18, d_k=72, var_q=0.5, var_k=0.5).ok
    verdict = checks.check_score_variance.judge(72, d_k=72, var_q=0.5, var_k=0.5)
    assert not verdict.ok and "variances 0.5 and 0.5" in verdict.message
    verdict = checks.check_score_variance.judge(72.0, d_k=72, var_q=0.5, var_k=0.5)
    assert not verdict.ok
    verdict = checks.check_score_variance.judge(144, d_k=72, var_q=0.5, var_k=1.5)
    assert not verdict.ok and "adds the two variances" in verdict.message


@pytest.mark.parametrize("values, prediction, ok", [
    ([0.3, 0.9], "rises", True), ([0.3, 0.9], "falls", False), ([0.30, 0.31], "stays", True),
    ([0.9, 0.3], "Falls", True), ([0.9, 0.3], "up", False),
])
def test_trend_prediction(values, prediction, ok):
    assert checks.check_trend_prediction.judge(prediction, values, "x", [4, 1024]).ok is ok


def test_score_variance_rejects_a_tensor_of_many_numbers():
    verdict = checks.check_score_variance.judge(torch.ones(3), d_k=256)
    assert not verdict.ok and "one number" in verdict.message


# -- check_row_entropy --------------------------------------------------------------------------

def _entropy(w):
    return -(w * w.log()).sum(dim=-1)


def test_row_entropy_runs_the_function_on_weights_of_its_own():
    assert checks.check_row_entropy.judge(_entropy).ok
    assert checks.check_row_entropy.judge(lambda w: -torch.special.xlogy(w, w).sum(-1)).ok


@pytest.mark.parametrize("make, words", [
    (lambda w: -_entropy(w), "minus sign"),
    (lambda w: -(w * torch.log2(w)).sum(dim=-1), "bits"),
    (lambda w: -torch.log(w).sum(dim=-1), "no weight in front"),
    (lambda w: _entropy(w).sum(), "every row at once"),
    (lambda w: -(w * w.log()).mean(dim=-1), "a mean over the keys"),
    (lambda w: -(w * w.log()).sum(dim=-2), "shape"),  # first case (3, 5): a sum down the columns
    (lambda w: -(w * w.log()).sum(dim=1), "expected [2, 3]"),  # right until the 3-axis case
])
def test_row_entropy_names_typical_mistakes(make, words):
    verdict = checks.check_row_entropy.judge(make)
    assert not verdict.ok and words in verdict.message


def test_row_entropy_names_a_sum_down_the_columns_on_square_weights():
    def columns_after_the_first_case(w):
        return _entropy(w) if w.shape[-1] != w.shape[-2] else -(w * w.log()).sum(dim=-2)
    verdict = checks.check_row_entropy.judge(columns_after_the_first_case)
    assert not verdict.ok and "down the columns" in verdict.message


@pytest.mark.parametrize("answer", [attention_entropy, lambda w: attention_entropy(w)])
def test_row_entropy_refuses_the_library(answer):
    verdict = checks.check_row_entropy.judge(answer)
    assert not verdict.ok and "attention_entropy" in verdict.message


def test_row_entropy_refuses_a_number():
    verdict = checks.check_row_entropy.judge(1.2)
    assert not verdict.ok and "should be a function" in verdict.message


# -- softmax_grad_norm and softmax_statistics ---------------------------------------------------
