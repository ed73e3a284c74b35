"""Lesson 14's checkers (attn_helpers/checks/induction.py): the induction score and the knockout loss name each
typical mistake, also written by hand, and refuse the lesson's helpers and their own references."""

from __future__ import annotations

import math
import types

import pytest
import torch
from torch.nn import functional as F

from attn_helpers.checks import check_induction_scores, check_knockout_loss, check_knockout_loss_prediction
from attn_helpers.checks.induction import _LOSS_MISTAKES, _SCORE_MISTAKES, _mistaken_loss, _score_cases, _scores
from attn_helpers.lab import (INDUCTION_CONFIG, InductionTask, induction_scores, induction_task, initial_model,
                              repeated_loss, repeated_part)


@pytest.fixture(scope="module")
def probe():
    return induction_task(128, seed=2024)


def test_score_checker_reference_equals_the_library(probe):
    task = InductionTask()
    model = initial_model(task, INDUCTION_CONFIG).eval()
    with torch.no_grad():
        _, weights = model(probe, return_weights=True)
    torch.testing.assert_close(_scores(weights, probe), induction_scores(model, probe))


def test_score_checker_names_each_mistake():
    (weights, tokens), _, judge = _score_cases()[0]
    for key, (cause, hint) in _SCORE_MISTAKES.items():
        verdict = judge(_scores(weights, tokens, key))
        assert not verdict.ok and cause in verdict.message, key
    assert judge(_scores(weights, tokens)).ok


def test_score_checker_refuses_the_library():
    verdict = check_induction_scores.judge(induction_scores)
    assert not verdict.ok and "induction_scores" in verdict.message


def test_knockout_checker_names_each_mistake():
    model = initial_model(InductionTask(), INDUCTION_CONFIG).eval()

    # the same code under another name: the guard refuses the checker's own _mistaken_loss (next test)
    mistaken = types.FunctionType(_mistaken_loss.__code__.replace(co_name="learners_loss"), _mistaken_loss.__globals__)

    def answer_for(key):
        return lambda m, t, layer, head: mistaken(m, t, layer, head, key)

    for key, (cause, _) in _LOSS_MISTAKES.items():
        verdict = check_knockout_loss.judge(answer_for(key), model)
        assert not verdict.ok and cause in verdict.message, key
    refused = check_knockout_loss.judge(lambda m, t, layer, head: repeated_loss(m, t, [(layer, head)]), model)
    assert not refused.ok and "repeated_loss" in refused.message


def test_checkers_refuse_their_own_references():  # reader h2: both passed
    model = initial_model(InductionTask(), INDUCTION_CONFIG).eval()
    verdict = check_induction_scores.judge(lambda w, t: _scores(w, t))
    assert not verdict.ok and "_scores" in verdict.message, verdict
    verdict = check_knockout_loss.judge(lambda m, t, layer, head: _mistaken_loss(m, t, layer, head, ""), model)
    assert not verdict.ok and "_mistaken_loss" in verdict.message, verdict


def test_prediction_checker():
    assert check_knockout_loss_prediction.judge("guessing", 3.4, 0.4, math.log(32)).ok
    assert check_knockout_loss_prediction.judge("same", 0.5, 0.4, math.log(32)).ok
    assert check_knockout_loss_prediction.judge("higher", 1.5, 0.4, math.log(32)).ok
    assert not check_knockout_loss_prediction.judge("same", 3.4, 0.4, math.log(32)).ok


def test_prediction_checker_measures_only_once_a_prediction_is_written(capsys):
    # reader item: the knocked-out loss sat in a notebook variable before a prediction, ready to be copied
    calls = []

    def measure():
        calls.append(1)
        return 3.4

    check_knockout_loss_prediction(None, measure, 0.4, math.log(32))
    assert "Not attempted" in capsys.readouterr().out and not calls
    assert check_knockout_loss_prediction.judge("guessing", measure, 0.4, math.log(32)).ok and calls == [1]


def test_score_checker_names_the_adjacent_copy_variant_written_by_hand():
    def adjacent(weights, tokens):  # a learner's variant: the token after the copy must lie before the query
        N = tokens.shape[1]
        same = tokens[:, :, None] == tokens[:, None, :]  # (B, N, N)
        ideal = torch.zeros_like(same)
        ideal[:, :, 1:] = (same & torch.ones(N, N, dtype=torch.bool).tril(-1))[:, :, :-1]  # key j + 1
        ideal = (ideal & torch.ones(N, N, dtype=torch.bool).tril(-1)).to(weights.dtype)[:, None, None]  # j + 1 < i
        on = (weights * ideal).sum(dim=-1)  # (B, L, H, N)
        rows = (ideal.sum(dim=-1) > 0).to(weights.dtype)
        return (on * rows).sum(dim=(0, -1)) / rows.sum(dim=(0, -1)).clamp_min(1)

    verdict = check_induction_scores.judge(adjacent)
    assert not verdict.ok and _SCORE_MISTAKES["adjacent"][0] in verdict.message


def test_knockout_checker_names_per_sequence_averaging_written_by_hand():
    model = initial_model(InductionTask(), INDUCTION_CONFIG).eval()

    def per_sequence(model, tokens, layer, head):  # a learner's variant: one mean per sequence, then their mean
        kept_heads = torch.ones(len(model.layers), model.layers[0].num_heads)
        kept_heads[layer, head] = 0.0
        with torch.no_grad():
            logits = model(tokens, keep_heads=kept_heads)  # (B, N, V)
        scored, nxt = repeated_part(tokens), tokens.roll(-1, dims=1)  # (B, N) each
        return torch.stack([F.cross_entropy(logits[b][scored[b]], nxt[b][scored[b]])
                            for b in range(len(tokens))]).mean().item()

    verdict = check_knockout_loss.judge(per_sequence, model)
    assert not verdict.ok and _LOSS_MISTAKES["per sequence"][0] in verdict.message
