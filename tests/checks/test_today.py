"""Lesson 12's checkers: the right functions pass, the library's own answer and transformers' are refused, and each
typical mistake is named (the window mask of a decoding step, the sink softmax, ALiBi's bias, the soft-cap
prediction)."""

import pytest
import torch

from attn_helpers import checks
from attn_helpers.core import alibi_bias, sliding_window_mask, softmax_with_sinks


def window_mask(n_q, n_k, window):
    i, j = torch.arange(n_k - n_q, n_k)[:, None], torch.arange(n_k)[None, :]
    return (j <= i) & (j > i - window)


def sink_softmax(scores, sinks):
    sink = sinks[:, None, None].expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]


def alibi(num_heads, n):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    return -slopes[:, None, None] * (torch.arange(n)[:, None] - torch.arange(n)[None, :])


@pytest.mark.parametrize("check, answer", [(checks.check_cache_window_mask, window_mask),
                                           (checks.check_sink_softmax, sink_softmax), (checks.check_alibi, alibi)])
def test_the_right_functions_pass(check, answer):
    assert check.judge(answer).ok


@pytest.mark.parametrize("check, answer, called", [
    (checks.check_cache_window_mask, lambda n_q, n_k, w: sliding_window_mask(n_k, window=w)[-n_q:], "sliding_window_mask"),
    (checks.check_sink_softmax, softmax_with_sinks, "softmax_with_sinks"),
    (checks.check_alibi, lambda h, n: alibi_bias(h, n), "alibi_bias"),
])
def test_the_librarys_answer_is_refused(check, answer, called):
    verdict = check.judge(answer)
    assert not verdict.ok and called in verdict.message


def test_transformers_is_refused():
    def bloom(num_heads, n):
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        return build_alibi_tensor(torch.ones(1, n), num_heads, torch.float64).reshape(num_heads, 1, n).expand(-1, n, n)

    verdict = checks.check_alibi.judge(bloom)
    # reader r12b: imported inside the function, the refusal named transformers' <module>, and said Bloom's form
    # "does the exercise for you" although it differs from -m_h (i - j) by m_h i in every row
    assert not verdict.ok and "transformers' build_alibi_tensor" in verdict.message
    assert "does the exercise" not in verdict.message and "slope · i in each row" in verdict.hint


@pytest.mark.parametrize("answer, named", [
    (lambda n_q, n_k, w: ~window_mask(n_q, n_k, w), "'True = blocked'"),
    (lambda n_q, n_k, w: window_mask(n_q, n_k, w + 1), "window + 1 keys"),
    (lambda n_q, n_k, w: torch.arange(n_k)[None, :] <= torch.arange(n_k - n_q, n_k)[:, None], "no window"),
    (lambda n_q, n_k, w: window_mask(n_q, n_k, w).float(), "should be boolean"),
    # reader w1: queries one place too late were told "window - 1 keys" (the same mask for one query)
    (lambda n_q, n_k, w: (lambda i, j: (j <= i) & (j > i - w))(torch.arange(n_k - n_q + 1, n_k + 1)[:, None],
                                                               torch.arange(n_k)[None, :]), "one place too late"),
    (lambda n_q, n_k, w: window_mask(n_q, n_k, max(w - 1, 1)), "window - 1 keys"),
])
def test_window_mistakes_are_named(answer, named):
    verdict = checks.check_cache_window_mask.judge(answer)
    assert not verdict.ok and named in verdict.message


@pytest.mark.parametrize("answer, named", [
    (lambda s, k: torch.softmax(s, dim=-1), "as a plain softmax's"),
    (lambda s, k: sink_softmax(s, k[:1].expand_as(k)), "first head's sink"),
    (lambda s, k: torch.softmax(torch.cat([s, k[:, None, None].expand(*s.shape[:-1], 1)], -1), -1), "sink's column"),
    (lambda s, k: (lambda w: w / w.sum(-1, keepdim=True))(sink_softmax(s, k)), "normalised again"),
    # the sink first, then the last column dropped (reader l2: the generic hint before)
    (lambda s, k: torch.softmax(torch.cat([k[:, None, None].expand(*s.shape[:-1], 1), s], -1), -1)[..., :-1],
     "dropped the last column, a real key's"),
])
def test_sink_mistakes_are_named(answer, named):
    verdict = checks.check_sink_softmax.judge(answer)
    assert not verdict.ok and named in verdict.message


@pytest.mark.parametrize("answer, named", [
    (lambda h, n: -alibi(h, n), "sign is flipped"),
    (lambda h, n: -(2.0 ** (-8 * torch.arange(h) / h))[:, None, None] * (torch.arange(n)[:, None] - torch.arange(n)),
     "start at 2^0"),
    (lambda h, n: alibi(h, n).flip(0), "reverse order"),
    (lambda h, n: -alibi(h, n).abs(), "|i - j|"),
])
def test_alibi_mistakes_are_named(answer, named):
    verdict = checks.check_alibi.judge(answer)
    assert not verdict.ok and named in verdict.message


@pytest.mark.parametrize("prediction, ok", [("tens", True), ("units", False), ("both", False), ("maybe", False)])
def test_the_softcap_prediction_is_judged_on_the_measurement(prediction, ok):
    assert checks.check_softcap_prediction.judge(prediction, 0.003, 0.56, 10.0).ok == ok


def test_the_softcap_prediction_measures_only_once_a_prediction_is_written(capsys):
    # reader item: the measured changes sat in a notebook variable before a prediction, ready to be copied
    calls = []

    def measure(change):
        return lambda: calls.append(change) or change

    checks.check_softcap_prediction(None, measure(0.003), measure(0.56), cap=10.0)
    assert "Not attempted" in capsys.readouterr().out and not calls
    assert checks.check_softcap_prediction.judge("tens", measure(0.003), measure(0.56), 10.0).ok
    assert calls == [0.003, 0.56]
