"""Checkers for 14 · Two heads that compose: a previous-token knockout (a prediction), each head's
induction score and the repeated part's loss with one head knocked out (the lesson's helpers refused)."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from ..lab import (InductionTask, TinyAttentionModel, induction_task, local_random, repeated_loss,
                   repeated_part)
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import Watch, library
from ._predict import measure_now, prediction_checker

__all__ = ["check_knockout_loss_prediction", "check_induction_scores", "check_knockout_loss"]

@prediction_checker(choices=("same", "higher", "guessing"))
def check_knockout_loss_prediction(choice: str, loss: float | Callable[[], float], full_loss: float,
                                   guessing: float) -> Verdict:
    """Prediction 14: previous-token head knocked out, is the loss the ``"same"`` (within 0.2 nats), back
    at ``"guessing"`` (within 0.5 nats of it) or ``"higher"``? ``loss`` may be a function that measures it
    (:func:`measure_now`)."""
    loss = measure_now(loss)
    happened = "same" if abs(loss - full_loss) <= 0.2 else ("guessing" if abs(loss - guessing) <= 0.5 else "higher")
    measured = f"{loss:.2f} nats without the head, {full_loss:.2f} with it, {guessing:.2f} for a uniform guess"
    if choice == happened:
        return correct(f"{measured}.")
    if choice == "same":
        return wrong(f"{measured}.", "the induction head finds the earlier copy through what the previous-token "
                                     "head wrote: without it, which key would the induction head's query match?")
    return wrong(f"{measured}.", "compare the measured loss with both reference numbers.")


def _scores(weights: Tensor, tokens: Tensor, mistake: str | None = None) -> Tensor:
    """``weights (B, L, H, N, N)``, ``tokens (B, N)`` -> ``(L, H)``; ``mistake`` reproduces one typical error."""
    N = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, N, N): key j holds query i's token
    earlier = torch.ones(N, N, dtype=torch.bool).tril(0 if mistake == "itself" else -1)  # (N, N): j < i
    if mistake == "any copy":
        earlier = ~torch.eye(N, dtype=torch.bool)  # every other position
    copies = same & earlier  # (B, N, N)
    if mistake == "copy":
        ideal = copies
    else:
        ideal = torch.zeros_like(copies)
        if mistake == "before":
            ideal[:, :, :-1] = copies[:, :, 1:]  # key j - 1
        elif mistake == "query axis":
            ideal[:, 1:, :] = copies[:, :-1, :]  # query i + 1 on key j: shifted along the queries
        else:
            ideal[:, :, 1:] = copies[:, :, :-1]  # key j + 1
        if mistake == "adjacent":
            ideal = ideal & torch.ones(N, N, dtype=torch.bool).tril(-1)  # key j + 1 < i: the query itself left out
    ideal = ideal.to(weights.dtype)[:, None, None]  # (B, 1, 1, N, N)
    on = (weights * ideal).sum(dim=-1)  # (B, L, H, N)
    if mistake == "mean":
        on = on / ideal.sum(dim=-1).clamp_min(1)  # the average weight of the marked keys, not their total
    rows = (ideal.sum(dim=-1) > 0).to(weights.dtype)  # (B, 1, 1, N)
    if mistake == "every row":
        return on.mean(dim=(0, -1))
    if mistake == "per sequence":
        return ((on * rows).sum(dim=-1) / rows.sum(dim=-1).clamp_min(1)).mean(dim=0)
    return (on * rows).sum(dim=(0, -1)) / rows.sum(dim=(0, -1)).clamp_min(1)


_SCORE_MISTAKES = {
    "copy": ("the weight on the earlier copy itself was counted (a duplicate-token score)",
             "an induction head looks at the token AFTER the earlier copy: key j + 1, not key j."),
    "before": ("the weight on the token before the earlier copy was counted",
               "the token after the earlier copy is key j + 1, not j - 1."),
    "itself": ("the query's own position was counted as an earlier copy (j <= i)",
               "an earlier copy sits strictly before the query: j < i (tril(-1), not tril(0))."),
    "any copy": ("every copy was counted, also those after the query (no j < i)",
                 "keep only the copies before the query: same & torch.ones(N, N, dtype=torch.bool).tril(-1)."),
    "adjacent": ("the query itself was left out when the earlier copy sits just before it (key j + 1 < i)",
                 "when t_{i-1} = t_i the token after that copy is the query itself, key j + 1 = i: count it (j < i "
                 "is the only condition)."),
    "query axis": ("the marks were shifted along the queries (query i + 1 on key j), not along the keys",
                   "shift along the last axis, the keys: ideal[:, :, 1:] = copies[:, :, :-1] marks key j + 1."),
    "mean": ("each query's weight on the marked keys was averaged, not summed",
             "a query's match is the total weight it puts on the marked keys: sum over the keys."),
    "every row": ("every query was averaged, also those whose token has no earlier copy",
                  "average only over the queries with at least one earlier copy (rows of the pattern with a 1)."),
    "per sequence": ("each sequence was averaged first, then the sequences",
                     "pool the queries of every sequence: sum over sequences and queries, divide by how many count."),
}


def _score_cases() -> list:
    generator = torch.Generator().manual_seed(1414)
    cases = []
    for B, L, H, N, vocab in ((3, 2, 2, 10, 4), (2, 1, 3, 7, 3), (4, 3, 1, 12, 6)):
        tokens = torch.randint(0, vocab, (B, N), generator=generator)  # (B, N): small vocabularies repeat often
        tokens[0] = torch.arange(N) % (N + 1)  # one sequence without any repeat
        weights = torch.rand(B, L, H, N, N, generator=generator, dtype=torch.float64).softmax(dim=-1)  # (B, L, H, N, N)

        def judge(got: Any, weights: Tensor = weights, tokens: Tensor = tokens) -> Verdict:
            mistakes = {cause: (_scores(weights, tokens, key), hint) for key, (cause, hint) in _SCORE_MISTAKES.items()}
            return compare_tensors(got, _scores(weights, tokens), name="your result", likely_mistakes=mistakes,
                                   atol=1e-6, rtol=1e-6)

        cases.append(((weights, tokens), f"weights {list(weights.shape)} with tokens of {vocab} kinds", judge))
    return cases


@checker
def check_induction_scores(answer: Any) -> Verdict:
    """Exercise 14: ``(weights (B, L, H, N, N), tokens (B, N)) -> (L, H)``, the weight after earlier copies."""
    return judge_function(
        answer, _score_cases(), watched=library(("induction_scores", "induction_pattern", "previous_token_scores"))
        | Watch({_scores: "the checker's own reference, _scores"}),  # what already computes the score or pattern
        example="my_induction_match(weights, tokens)",
        lines="compare every token with every token: same = tokens[:, :, None] == tokens[:, None, :]; keep j < i; "
              "move each mark one key to the right; sum the weights there; average over the rows that have a mark.",
        success="one induction match per head: the weight after earlier copies, averaged over the queries that "
                "have one.")


def _mistaken_loss(model: TinyAttentionModel, tokens: Tensor, layer: int, head: int, mistake: str) -> float:
    L, H = len(model.layers), model.layers[0].num_heads
    kept_heads = torch.ones(L, H)
    if mistake == "only that head kept":
        kept_heads = torch.zeros(L, H)
        kept_heads[layer, head] = 1.0
    elif mistake == "whole layer":
        kept_heads[layer] = 0.0
    elif mistake == "swapped":
        if head >= L or layer >= H:
            return float("nan")  # kept_heads[head, layer] does not exist: the learner's code would have raised
        kept_heads[head, layer] = 0.0
    elif mistake != "nothing":
        kept_heads[layer, head] = 0.0
    with torch.no_grad():
        logits = model(tokens, keep_heads=kept_heads)  # (B, N, V)
    scored = repeated_part(tokens)  # (B, N)
    nxt = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)  # (B, N)
    if mistake == "not shifted":
        return F.cross_entropy(logits[scored], tokens[scored]).item()
    if mistake == "previous token":
        return F.cross_entropy(logits[scored], tokens.roll(1, dims=1)[scored]).item()
    if mistake == "every position":
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)).item()
    if mistake == "per sequence":
        losses = [F.cross_entropy(logits[b][scored[b]], nxt[b][scored[b]]) for b in range(tokens.shape[0])]
        return torch.stack(losses).mean().item()
    if mistake == "copy end":
        scored = scored | torch.roll(scored, 1, dims=1)  # the second copy's last token too
        scored[:, -1] = False
    return F.cross_entropy(logits[scored], nxt[scored]).item()


_LOSS_MISTAKES = {
    "not shifted": ("the target was the current token, not the next one",
                    "position i predicts token i + 1: compare logits[:, i] with tokens[:, i + 1]."),
    "every position": ("every position was scored, not only the repeated part",
                       "keep only the positions lab.repeated_part(tokens) marks: elsewhere nothing can be known."),
    "copy end": ("the last token of the second copy was scored too",
                 "the last token of the copy predicts a token outside it: lab.repeated_part leaves it out."),
    "only that head kept": ("every head but the chosen one was knocked out",
                            "keep_heads holds 1 for the heads kept and 0 for the one knocked out."),
    "whole layer": ("the whole layer was knocked out", "zero one entry: kept_heads[layer, head] = 0."),
    "swapped": ("the head was knocked out at kept_heads[head, layer], layer and head swapped",
                "kept_heads has shape (L, H): the layer first, kept_heads[layer, head] = 0."),
    "nothing": ("nothing was knocked out",
                "set kept_heads[layer, head] = 0 and pass keep_heads=kept_heads to the model."),
    "per sequence": ("each sequence's loss was averaged first, then the sequences",
                     "pool the scored positions of every sequence into one cross-entropy: logits[scored] against "
                     "the next tokens at scored."),
    "previous token": ("the target was the previous token, not the next one",
                       "position i predicts token i + 1: tokens.roll(-1, dims=1), not roll(1)."),
}


@checker
def check_knockout_loss(answer: Any, model: TinyAttentionModel) -> Verdict:
    """Exercise 14: ``knockout_loss(model, tokens, layer, head) -> float``, the repeated part's loss without it."""
    if not isinstance(model, TinyAttentionModel) or not model.causal:
        raise TypeError("model must be a causal TinyAttentionModel")
    with local_random(14):  # an untrained model of 3 causal rotary layers of 4 heads, 24 tokens of 12 kinds
        other = TinyAttentionModel(12, 12, 24, dim=16, num_heads=4, num_layers=3, position_scheme="rope", causal=True)
    task = InductionTask(seq_len=24, vocab_size=12, min_repeat=4, max_repeat=8)
    cases = []
    models = [("the trained model on new sequences", deepcopy(model).eval(), induction_task(64, seed=7777)),
              ("an untrained 3-layer model with 4 heads", other.to(torch.float64).eval(),
               induction_task(16, seed=4141, task=task))]
    for described, net, tokens in models:
        for layer in range(len(net.layers)):
            for head in range(net.layers[0].num_heads):
                def judge(got: Any, net=net, tokens=tokens, layer=layer, head=head) -> Verdict:
                    value = as_number(got, "the loss", hint="return one number, e.g. loss.item().")
                    expected = repeated_loss(net, tokens, [(layer, head)])
                    if abs(value - expected) <= 1e-6 * max(1.0, abs(expected)):
                        return correct()
                    for key, (cause, hint) in _LOSS_MISTAKES.items():
                        if abs(value - _mistaken_loss(net, tokens, layer, head, key)) <= 1e-6 * max(1.0, abs(value)):
                            return wrong(f"{value:.4f} matches what you get when {cause} (expected {expected:.4f}).",
                                         hint)
                    return wrong(f"{value:.4f}, expected {expected:.4f}.",
                                 "knock the head out with keep_heads, then take the cross-entropy of the logits at "
                                 "the repeated part against the next tokens.")
                cases.append(((net, tokens, layer, head), f"{described}, layer {layer} head {head}", judge))
    return judge_function(
        answer, cases, watched=library(("repeated_loss",)) | Watch({_mistaken_loss: "the checker's own reference, "
                                                                              "_mistaken_loss"}),
        example="knockout_loss(model, tokens, layer, head)",
        lines="kept_heads = torch.ones(L, H); kept_heads[layer, head] = 0; logits = model(tokens, "
              "keep_heads=kept_heads); score the positions of lab.repeated_part(tokens) against the next token "
              "with F.cross_entropy.",
        success="the repeated part's loss with each head knocked out, on new sequences and on another model.")
