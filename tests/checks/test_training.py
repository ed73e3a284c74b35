"""Lesson 08's checkers (attn_helpers/checks/training.py): the ideal pattern, the pattern match and the knockout
are judged on inputs of their own, each typical mistake named, the lesson's helpers and the model's own
knockout refused."""

from __future__ import annotations

import copy

import pytest
import torch

from attn_helpers import merge_heads
from attn_helpers.checks import check_knockout, check_knockout_prediction, check_pattern_match, check_previous_token_pattern
from attn_helpers.checks.training import _KNOCKOUT_MISTAKES, _knockout_logits
from attn_helpers.lab import (LookupTask, PreviousTokenTask, TinyAttentionModel, TrainConfig, head_knockout,
                              initial_model, pattern_match)


def _sample(task, batch=64, seed=0):
    return task.sample(batch, torch.Generator().manual_seed(seed))


def _previous_token_pattern(n):
    return torch.eye(n).roll(-1, dims=1)


def test_check_previous_token_pattern():
    task = PreviousTokenTask(seq_len=6)
    assert check_previous_token_pattern.judge(_previous_token_pattern, task).ok
    assert check_previous_token_pattern.judge(lambda n: torch.eye(n).roll(1, dims=0), task).ok
    for answer, hint in ((lambda n: torch.eye(n).roll(1, dims=1), "to the LEFT"), (torch.eye, "column i - 1"),
                         (lambda n: torch.diag(torch.ones(n - 1), -1), "wraps around"),
                         (lambda n: torch.diag(torch.ones(n - 1), 1), "ABOVE the diagonal")):
        verdict = check_previous_token_pattern.judge(answer, task)
        assert not verdict.ok and hint in verdict.hint


def test_check_previous_token_pattern_refuses_copies_and_the_task_itself():
    task = PreviousTokenTask(seq_len=6)
    verdict = check_previous_token_pattern.judge(torch.eye(6).roll(-1, dims=1), task)  # a tensor, not a function
    assert not verdict.ok and "should be a function" in verdict.message
    verdict = check_previous_token_pattern.judge(lambda n: torch.eye(6).roll(-1, dims=1), task)  # only N = 6
    assert not verdict.ok and "(3)" in verdict.message and "shape" in verdict.message

    def borrowed(n):
        return PreviousTokenTask(seq_len=n).ideal_attention(torch.zeros(1, n, dtype=torch.long))[0]

    ideal = PreviousTokenTask.ideal_attention  # an alias: seen while the function runs
    for answer in (borrowed, lambda n: task.ideal_attention(torch.zeros(1, n, dtype=torch.long))[0],
                   lambda n: ideal(PreviousTokenTask(seq_len=n), torch.zeros(1, n, dtype=torch.long))[0]):
        verdict = check_previous_token_pattern.judge(answer, task)
        assert not verdict.ok and "hands the work to the task's own ideal_attention" in verdict.message, verdict
        assert "PreviousTokenTask" not in verdict.message  # the builder is named, not a class
    verdict = check_previous_token_pattern.judge(lambda n: 1 / 0, task)
    assert not verdict.ok and "ZeroDivisionError" in verdict.message


def _match(weights, ideal):
    """The exercise's solution, as a learner would write it."""
    on_target = (weights * ideal).sum(dim=-1)  # (H, N)
    return on_target[:, ideal.sum(dim=-1) > 0].mean(dim=-1)  # (H,)


def test_check_pattern_match():
    weights = torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(1)), dim=-1)
    ideal = torch.eye(6).roll(-1, dims=1)
    assert check_pattern_match.judge(_match, weights, ideal).ok
    for answer, hint in ((lambda w, i: (w * i).mean((-2, -1)), "sum over the keys"),
                         (lambda w, i: (w * i).sum((-2, -1)), "average over the rows"),
                         (lambda w, i: w.max(-1).values.mean(-1), "multiply by ideal"),
                         (lambda w, i: (w * i).sum(-1).mean(), "one number per head"),
                         # the two below got only the generic hint before they were named
                         (lambda w, i: (w.argmax(-1) == i.argmax(-1)).double().mean(-1), "however large the others"),
                         (lambda w, i: (w * i.mT).sum(-1)[:, i.sum(-1) > 0].mean(-1), "same (query, key) layout"),
                         # summed over the queries: right on a permutation, told "a hit rate" on the lookup before
                         (lambda w, i: (w * i).sum(-2)[:, i.sum(-1) > 0].mean(-1), "sum over the keys (dim=-1)"),
                         # right where every row has a target, wrong on the lookup's pair rows
                         (lambda w, i: (w * i).sum(-1).mean(-1), "rows with a target only")):
        verdict = check_pattern_match.judge(answer, weights, ideal)
        assert not verdict.ok and hint in verdict.hint, verdict


def test_check_pattern_match_refuses_copies_and_the_library():
    weights = torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(1)), dim=-1)
    ideal = torch.eye(6).roll(-1, dims=1)
    printed = _match(weights, ideal)
    verdict = check_pattern_match.judge(printed, weights, ideal)
    assert not verdict.ok and "should be a function" in verdict.message
    verdict = check_pattern_match.judge(lambda w, i: printed, weights, ideal)  # the step-10 numbers, copied
    assert not verdict.ok and "lookup" in verdict.message
    pm = pattern_match  # an alias: seen while the function runs
    for answer in (lambda w, i: pattern_match(w[None], i[None]), pattern_match, lambda w, i: pm(w[None], i[None])[0]):
        verdict = check_pattern_match.judge(answer, weights, ideal)
        assert not verdict.ok and "pattern_match" in verdict.message, verdict


def test_check_knockout_prediction():
    for accuracy, right in ((0.99, "same"), (0.66, "lower"), (0.13, "chance")):
        assert check_knockout_prediction.judge(right, accuracy, 0.999, 0.125).ok
        for other in {"same", "lower", "chance"} - {right}:
            assert not check_knockout_prediction.judge(other, accuracy, 0.999, 0.125).ok
    assert "removing the other would change little" in check_knockout_prediction.judge("same", 0.66, 0.999, 0.125).hint
    assert "one of" in check_knockout_prediction.judge("half", 0.66, 0.999, 0.125).message
    assert check_knockout_prediction.judge(" Lower ", 0.66, 0.999, 0.125).ok


def _without_head(model, tokens, layer, head, first_only=False, kept_out=False):
    """The exercise's solution as a learner might write it (the head zeroed by a 0/1 factor per head);
    ``first_only``: the mistake of running every layer on the first x (embeddings + positions); ``kept_out``: the
    mistake of adding the layer's own ``out`` in the layers that keep their heads."""
    x = model.embed(tokens) + model.position.weight  # (B, N, dim)
    h = x
    for index, attention in enumerate(model.layers):
        out, inter = attention(x if first_only else h, return_intermediates=True)
        if kept_out and index != layer:
            h = h + out
            continue
        heads = inter["heads"]  # (B, H, N, head_dim)
        factor = torch.ones(heads.shape[1], 1, 1)  # (H, 1, 1)
        factor[head] = 0.0 if index == layer else 1.0
        h = h + attention.proj(merge_heads(heads * factor))
    return model.readout(h)


@pytest.fixture(scope="module")
def two_layer_model():
    return initial_model(LookupTask(), TrainConfig(num_layers=2)).eval()


def test_check_knockout_accepts_the_solution_and_names_each_mistake(two_layer_model):
    tokens, _ = _sample(LookupTask(), batch=16)
    assert check_knockout.judge(_without_head, two_layer_model, tokens).ok
    for key, (cause, hint) in _KNOCKOUT_MISTAKES.items():
        verdict = check_knockout.judge(
            lambda m, t, l, h, key=key: _knockout_logits(m, t, l, h, mistake=key), two_layer_model, tokens)
        assert not verdict.ok and cause in verdict.message and verdict.hint == hint, (key, verdict)
    verdict = check_knockout.judge(lambda m, t, l, h: m(t), two_layer_model, tokens)
    assert not verdict.ok and "nothing was knocked out" in verdict.message


def test_check_knockout_names_layers_that_all_read_the_first_input(two_layer_model):
    """Written as a learner would (it got only the generic hint before the mistake was named)."""
    tokens, _ = _sample(LookupTask(), batch=16)
    verdict = check_knockout.judge(lambda m, t, l, h: _without_head(m, t, l, h, first_only=True), two_layer_model, tokens)
    assert not verdict.ok and "every layer read the first x" in verdict.message, verdict


def test_check_knockout_names_the_layer_output_added_where_heads_are_kept(two_layer_model):
    """Written as a learner would (reader j5: it got only the generic hint; the folded solution warns of it)."""
    tokens, _ = _sample(LookupTask(), batch=16)
    verdict = check_knockout.judge(lambda m, t, l, h: _without_head(m, t, l, h, kept_out=True), two_layer_model, tokens)
    assert not verdict.ok and "keep their heads added their full output" in verdict.message, verdict


def test_check_knockout_refuses_the_models_own_knockout(two_layer_model):
    tokens, _ = _sample(LookupTask(), batch=4)

    def with_keep_heads(model, tokens, layer, head):
        keep = torch.ones(len(model.layers), model.layers[0].num_heads)
        keep[layer, head] = 0.0
        return model(tokens, keep_heads=keep)

    def through_an_alias(model, tokens, layer, head):  # the same, with the forward pass under another name
        keep = torch.ones(len(model.layers), model.layers[0].num_heads)
        keep[layer, head] = 0.0
        run = model.forward
        return run(tokens, **{"keep" + "_heads": keep})

    def on_a_fresh_model(model, tokens, layer, head):  # a new instance with the same weights, not the one handed over
        fresh = TinyAttentionModel(model.embed.num_embeddings, model.readout.out_features, tokens.shape[1],
                                   dim=model.embed.embedding_dim, num_heads=model.layers[0].num_heads,
                                   num_layers=len(model.layers)).to(torch.float64)
        fresh.load_state_dict(model.state_dict())
        return with_keep_heads(fresh, tokens, layer, head)

    same = copy.deepcopy(two_layer_model).double()
    assert torch.equal(on_a_fresh_model(same, tokens, 1, 0), with_keep_heads(same, tokens, 1, 0))  # a real bypass
    for answer in (with_keep_heads, through_an_alias, on_a_fresh_model):
        verdict = check_knockout.judge(answer, two_layer_model, tokens)
        assert not verdict.ok and "keep_heads" in verdict.message, verdict
    assert "head_knockout" in check_knockout.judge(head_knockout, two_layer_model, tokens).message
    for answer in (_knockout_logits, lambda m, t, l, h: _knockout_logits(m, t, l, h)):  # the checker's own
        verdict = check_knockout.judge(answer, two_layer_model, tokens)
        assert not verdict.ok and "the checker's own knockout" in verdict.message, verdict


def test_check_knockout_explains_bad_answers(two_layer_model):
    tokens, _ = _sample(LookupTask(), batch=4)
    assert "should be a function" in check_knockout.judge(3, two_layer_model, tokens).message
    verdict = check_knockout.judge(lambda m, t, l, h: 1 / 0, two_layer_model, tokens)
    assert not verdict.ok and "ZeroDivisionError" in verdict.message and "layer=0, head=0" in verdict.message
    only_two_layers = lambda m, t, l, h: _without_head(m, t, l, h) if len(m.layers) == 2 else m(t)
    verdict = check_knockout.judge(only_two_layers, two_layer_model, tokens)
    assert not verdict.ok and "3-layer model" in verdict.message


# ------------------------------------------------------------------------------ the loop, shown
