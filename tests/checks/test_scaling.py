"""The checkers of 02 · Scores and scaling: verdicts beyond the exercise tests' solution, None and typical wrong answer."""

import math

import pytest
import torch

from attn_helpers import attend, attention_entropy, attention_scores, checks


def _rows(t):
    """``t`` as a table of rows ``(M, N_k)``, the layout the cross-entropies take."""
    return t.reshape(-1, t.shape[-1])


def _qk(n_q=5, n_k=5, d_k=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, n_q, d_k, generator=g), torch.randn(2, n_k, d_k, generator=g)


# -- check_scaled_scores: my_scores(q, k_t) with keys stored transposed (exercise 2.2) ----------

def test_scaled_scores_accepts_every_way_of_writing_it():
    for fn in (lambda q, k_t: q @ k_t / math.sqrt(q.shape[-1]), lambda q, k_t: (q @ k_t) * k_t.shape[-2] ** -0.5,
               lambda q, k_t: torch.matmul(q / math.sqrt(q.shape[-1]), k_t)):
        verdict = checks.check_scaled_scores.judge(fn)
        # reader u2: d_k read from k_t was told "with d_k read from q"; the verdict names both places
        assert verdict.ok and "q.shape[-1] = k_t.shape[-2]" in verdict.message, verdict


@pytest.mark.parametrize("fn, words", [
    (lambda q, k_t: q @ k_t, "forgot to scale"),
    (lambda q, k_t: q @ k_t / q.shape[-1], "divided by d_k"),
    (lambda q, k_t: q @ k_t / math.sqrt(k_t.shape[-1]), "number of keys"),
    (lambda q, k_t: q @ k_t / math.sqrt(q.shape[-2]), "number of queries"),
    (lambda q, k_t: q @ k_t * math.sqrt(q.shape[-1]), "multiplied by sqrt(d_k)"),
    (lambda q, k_t: (q @ k_t / math.sqrt(q.shape[-1])).mT, "keys-first"),
    # reader: the weights got only "right shape but different values"
    (lambda q, k_t: torch.softmax(q @ k_t / math.sqrt(q.shape[-1]), dim=-1),
     "you returned the weights; the exercise wants the scores before the softmax"),
    (lambda q, k_t: torch.softmax(q @ k_t, dim=-1), "softmax of the unscaled scores"),
    (lambda q, k_t: q @ k_t.mT / math.sqrt(q.shape[-1]), "already transposed"),
    (lambda q, k_t: attention_scores(q, k_t.mT), "attention_scores"),  # grader round 2: the library renamed
    (lambda q, k_t: attend(q, k_t.mT, k_t.mT)[1], "attend"),  # reader w00: attend's scores were accepted
    (torch.zeros(2, 5, 5), "should be a function"),
    # reader v00: the lesson's lines pasted with its leftover d_k (1024) or its layer's scale got the generic hint
    (lambda q, k_t: q @ k_t / math.sqrt(1024), "fixed 0.03125 = 1 / sqrt(1024), where these inputs have d_k = 6"),
    (lambda q, k_t: q @ k_t * 0.125, "fixed 0.125 = 1 / sqrt(64)"),
])
def test_scaled_scores_names_each_mistake(fn, words):
    verdict = checks.check_scaled_scores.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


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
    verdict = checks.check_score_variance.judge(72, d_k=72, var_q=0.5, var_k=0.5)  # 72 × 1 or 72 × (0.5 + 0.5)
    assert not verdict.ok and "either" in verdict.message and "were added" in verdict.message
    verdict = checks.check_score_variance.judge(72.0, d_k=72, var_q=0.5, var_k=0.5)
    assert not verdict.ok
    verdict = checks.check_score_variance.judge(36, d_k=72, var_q=0.5, var_k=0.5)  # reader t2: 36 printed 17.8,
    assert not verdict.ok and "17.8" not in verdict.message + verdict.hint  # which then passed as the answer
    verdict = checks.check_score_variance.judge(144, d_k=72, var_q=0.5, var_k=1.5)
    assert not verdict.ok and "you added the two variances" in verdict.message


@pytest.mark.parametrize("answer, words", [
    (10.8, None), (57.6, "you added the two variances"), (72, "variances 0.5 and 0.3"),
    (36, "only one of the two variances"), (21.6, "only one of the two variances"), (0.15, "one product"),
])
def test_score_variance_of_exercise_2_3(answer, words):
    """Exercise 2.3's variances 0.5 and 0.3: adding them (57.6) and forgetting them (72) are told apart."""
    verdict = checks.check_score_variance.judge(answer, d_k=72, var_q=0.5, var_k=0.3)
    assert verdict.ok is (words is None)
    if words:
        assert words in verdict.message
        assert "variances of independent terms add up." not in verdict.hint  # read once as approving the adding
        assert "(they do not add)" in verdict.hint


@pytest.mark.parametrize("values, prediction, ok", [
    ([0.3, 0.9], "rises", True), ([0.3, 0.9], "falls", False), ([0.30, 0.31], "stays", True),
    ([0.9, 0.3], "Falls", True), ([0.9, 0.3], "up", False),
])
def test_trend_prediction(values, prediction, ok):
    assert checks.check_trend_prediction.judge(prediction, values, "x", [4, 1024]).ok is ok


def test_score_variance_rejects_a_tensor_of_many_numbers():
    verdict = checks.check_score_variance.judge(torch.ones(3), d_k=256)
    assert not verdict.ok and "one number" in verdict.message


# -- check_row_entropy: weights with exact zeros (exercise 2.4) ---------------------------------

def _plogp(w):
    return torch.where(w > 0, w * torch.log(w), 0.0)  # w * log(w), with 0 * log(0) counted as 0


@pytest.mark.parametrize("fn", [
    lambda w: -_plogp(w).sum(dim=-1),
    lambda w: -(w * torch.log(w.clamp_min(1e-30))).sum(dim=-1),  # any correct way of writing it passes
])
def test_row_entropy_accepts_any_correct_way(fn):
    assert checks.check_row_entropy.judge(fn).ok


@pytest.mark.parametrize("fn, words", [
    (lambda w: -(w * torch.log(w)).sum(dim=-1), "count those terms as 0"),
    (lambda w: _plogp(w).sum(dim=-1), "minus sign"),
    (lambda w: -_plogp(w).sum(dim=-1) / math.log(2), "bits"),
    (lambda w: -_plogp(w).sum(), "every row at once"),
    (lambda w: -_plogp(w).mean(dim=-1), "a mean over the keys"),
    (lambda w: -_plogp(w).sum(dim=-2), "expected [3]"),  # named on square weights only
    (attention_entropy, "attention_entropy"),
    (lambda w: attention_entropy(w), "attention_entropy"),
    (1.5, "should be a function"),
])
def test_row_entropy_names_each_mistake(fn, words):
    verdict = checks.check_row_entropy.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


@pytest.mark.parametrize("fn, words", [  # grader round 4: ready-made entropies count 0 * log(0) for you
    (lambda w: torch.distributions.Categorical(probs=w).entropy(), "Categorical.entropy"),
    (lambda w: torch.distributions.OneHotCategorical(probs=w).entropy(), "OneHotCategorical.entropy"),
    (lambda w: torch.special.entr(w).sum(dim=-1), "entr"),
    (lambda w: -torch.xlogy(w, w).sum(dim=-1), "xlogy"),
    (lambda w: -torch.special.xlogy(w, w).sum(dim=-1), "xlogy"),
    (lambda w: -w.xlogy(w).sum(dim=-1), "Tensor.xlogy"),
    (lambda w: -torch.special.xlog1py(w, w - 1).sum(dim=-1), "xlog1py"),
    # reader i2: a divergence from zero is w * log(w) with 0 * log(0) counted as 0
    (lambda w: -torch.nn.functional.kl_div(torch.zeros_like(w), w, reduction="none").sum(dim=-1), "kl_div"),
    # a fresh reader: the cross-entropy of w with itself is its entropy, log(0) clamped
    (lambda w: torch.nn.functional.cross_entropy(_rows(w.clamp_min(1e-30).log()), _rows(w), reduction="none")
     .reshape(w.shape[:-1]), "torch.nn.functional.cross_entropy"),
    (lambda w: torch.nn.CrossEntropyLoss(reduction="none")(_rows(w.clamp_min(1e-30).log()), _rows(w))
     .reshape(w.shape[:-1]), "torch.nn.CrossEntropyLoss"),
    # nll_loss picks one -log(w) per row; with the row's weights as class weights its sum is the entropy
    (lambda w: torch.stack([torch.nn.functional.nll_loss(row.clamp_min(1e-30).log().expand(len(row), -1),
                                                         torch.arange(len(row)), weight=row, reduction="sum")
                            for row in _rows(w)]).reshape(w.shape[:-1]), "torch.nn.functional.nll_loss"),
    # binary_cross_entropy(w, w) holds -w log(w) - (1 - w) log(1 - w); the second term taken off again
    (lambda w: (torch.nn.functional.binary_cross_entropy(w, w, reduction="none")
                - (1 - w) * torch.nn.functional.binary_cross_entropy(w, torch.zeros_like(w), reduction="none"))
     .sum(dim=-1), "torch.nn.functional.binary_cross_entropy"),
])
def test_row_entropy_refuses_ready_made_entropies(fn, words):
    verdict = checks.check_row_entropy.judge(fn)
    assert not verdict.ok and "calls" in verdict.message and words in verdict.message, verdict


def test_row_entropy_hint_for_0_log_0_suggests_nothing_the_checker_refuses():
    """Grader round 5: the hint for the naive formula recommended torch.xlogy, which the checker then refused."""
    verdict = checks.check_row_entropy.judge(lambda w: -(w * torch.log(w)).sum(dim=-1))
    assert not verdict.ok and "0 * log(0)" in verdict.message + verdict.hint, verdict
    for refused in ("xlogy", "entr", "Categorical"):
        assert refused not in verdict.hint, verdict.hint


# -- softmax_grad_norm and softmax_statistics ---------------------------------------------------
