"""Checkers for 08 · Watch attention learn: what knocking out a head does (a prediction), and three functions: the
previous-token task's ideal pattern, each head's pattern match and one head's knockout; the helpers refused."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import torch
from torch import Tensor

from ..core import merge_heads
from ..lab import LookupTask, NoWrapPreviousTokenTask, PreviousTokenTask, TinyAttentionModel, local_random, pattern_match
from ._core import Verdict, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import Watch, library
from ._predict import prediction_checker

__all__ = ["check_knockout_prediction", "check_previous_token_pattern", "check_pattern_match", "check_knockout"]

@prediction_checker(choices=("same", "lower", "chance"))
def check_knockout_prediction(choice: str, accuracy: float, full_accuracy: float, chance: float) -> Verdict:
    """Prediction 8: one head knocked out, is the accuracy the ``"same"`` (within 0.05), at ``"chance"`` (at most
    twice it) or ``"lower"``?"""
    happened = "same" if accuracy >= full_accuracy - 0.05 else ("chance" if accuracy <= 2 * chance else "lower")
    measured = f"{accuracy:.3f} without the head, {full_accuracy:.3f} with both, chance {chance:.3f}"
    if choice == happened:
        return correct(f"{measured}.")
    if happened == "lower":
        if choice == "same":
            return wrong(f"{measured}: the other head does not cover for the missing one.",
                         "if the remaining head could answer every question alone, removing the other would change little.")
        return wrong(f"{measured}: far above chance, so the remaining head still answers many questions.",
                     "chance would mean the remaining head answers nothing; look at its pattern match in 8.4.")
    return wrong(f"{measured}.", "compare the measured accuracy with both reference numbers.")


#: What already builds the pattern: the tasks' ``ideal_attention`` (one code object, so named by what it is).
PATTERN_BUILDERS = Watch({cls.ideal_attention: "the task's own ideal_attention"
                          for cls in (PreviousTokenTask, NoWrapPreviousTokenTask, LookupTask)})
_SMALL_EXAMPLE = "run your function on a small example and print the shape of each intermediate."


def _judge_pattern(N: int) -> Any:
    expected = PreviousTokenTask(seq_len=N).ideal_attention(torch.zeros(1, N, dtype=torch.long))[0]  # (N, N)
    eye = torch.eye(N)  # (N, N)
    no_wrap = torch.diag(torch.ones(N - 1), -1)  # (N, N): row 0 left empty
    mistakes = {
        "each query looks at the NEXT token": (
            eye.roll(1, dims=1), "row i is query i and must put its 1 in column i - 1, one step to the LEFT."),
        "each query looks at the NEXT token, and the last row has nothing": (
            torch.diag(torch.ones(N - 1), 1),
            "that is the line ABOVE the diagonal: row i must put its 1 in column i - 1, one step to the LEFT, "
            "and row 0 wraps around to column N - 1 (torch.diag(..., 1) is above, -1 below the diagonal)."),
        "each query looks at itself": (eye, "the target of position i is the token before it: column i - 1."),
        "position 0 has nothing to look at": (
            no_wrap, "position 0 wraps around: its target is the LAST token, so row 0 has its 1 in column N - 1."),
        "position 0 looks at itself": (
            no_wrap + torch.diag(torch.eye(N)[0]),
            "position 0 wraps around: its target is the last token, so row 0 has its 1 in column N - 1."),
    }
    return lambda got: compare_tensors(got, expected, name="your pattern", likely_mistakes=mistakes)


@checker
def check_previous_token_pattern(answer: Any, task: PreviousTokenTask) -> Verdict:
    """Exercise 8: ``previous_token_pattern(n) -> (n, n)``, row ``i`` one-hot at key ``(i - 1) mod n``."""
    if not isinstance(task, PreviousTokenTask):
        raise TypeError(f"task must be a PreviousTokenTask, got {type(task).__name__}")
    return judge_function(
        answer, [((N,), f"previous_token_pattern({N})", _judge_pattern(N)) for N in dict.fromkeys((task.seq_len, 3, 9))],
        watched=PATTERN_BUILDERS, example="previous_token_pattern(n)", raised=_SMALL_EXAMPLE,
        refusal="which already builds the pattern: the exercise asks you to build it",
        calls="your function hands the work to {}, {}.",
        lines="start from torch.eye(n) (a 1 in column i of row i) and move each row's 1 one column to the left.",
        success=f"for N = {task.seq_len}, 3 and 9: every row has one 1, one step left of the diagonal, and row 0 "
                "wraps around to the last key.")


@checker
def check_pattern_match(answer: Any, weights: Tensor, ideal: Tensor) -> Verdict:
    """Exercise 8: ``match(weights (H, N, N), ideal (N, N)) -> (H,)``, the weight on the ideal key, averaged."""
    task, g = LookupTask(), torch.Generator().manual_seed(8)
    tokens, _ = task.sample(1, g)  # (1, N): a lookup sequence, whose pair rows have no target
    cases = (("the step-10 heads of the previous-token run", weights, ideal),
             ("3 random heads on a lookup sequence (its 4 pair rows have no target)",
              torch.softmax(2 * torch.randn(3, task.seq_len, task.seq_len, generator=g, dtype=torch.float64), dim=-1),
              task.ideal_attention(tokens)[0].to(torch.float64)))  # (H, N, N) and (N, N)
    values = ", ".join(f"{v:.2f}" for v in pattern_match(weights[None], ideal[None]).tolist())
    return judge_function(
        answer, [((w, target), f"match(weights, ideal) on {described}", _judge_match(w, target))
                 for described, w, target in cases],
        watched=Watch({pattern_match: "training.pattern_match"}), example="match(weights, ideal)", raised=_SMALL_EXAMPLE,
        refusal="which already computes it: the exercise asks you to write it",
        calls="your function hands the work to {}, {}.",
        lines="multiply weights by ideal, sum over the keys, then average over the rows that have a target.",
        success=f"one number per head ({values} at step 10), and rows without a target left out on the lookup.")


def _judge_match(w: Tensor, target: Tensor) -> Any:
    expected = pattern_match(w[None], target[None])  # (H,)
    on_target = w * target  # (H, N, N)
    N = target.shape[-1]
    mistakes = {
        "you averaged over all N × N cells": (
            on_target.mean(dim=(-2, -1)),
            "each row has one right key: sum over the keys (dim=-1) first, then average the rows."),
        "you summed over the rows instead of averaging them": (
            on_target.sum(dim=(-2, -1)), "average over the rows, so a perfect head scores 1."),
        "you measured how peaked each row is, not where its peak is": (
            w.max(dim=-1).values.mean(dim=-1),
            "the largest weight can sit on the wrong key; multiply by ideal to keep only the right key's weight."),
        "you left out the heads axis": (
            on_target.sum(dim=-1).mean(), "keep one number per head: average over the rows only (dim=-1 after the sum)."),
    }
    with_target = target.sum(dim=-1) > 0  # (N,): the rows that have a right key
    mistakes["you summed over the queries (dim=-2) instead of the keys"] = (
        on_target.sum(dim=-2)[..., with_target].mean(dim=-1),
        "weights[h, i, j] is query i's weight on key j: sum over the keys (dim=-1) to get each query's weight "
        "on its right key, then average over the queries that have a target.")
    hits = (w.argmax(dim=-1) == target.argmax(dim=-1)).to(w.dtype)  # (H, N): largest weight on the right key
    if bool(hits[..., with_target].any()):  # all zeros would match any all-zero answer, whatever its mistake
        mistakes["you counted the rows whose largest weight is on the right key (a hit rate)"] = (
            hits[..., with_target].mean(dim=-1),
            "the match is the weight on the right key, however large the others: multiply by ideal, sum the keys.")
    mistakes["you multiplied by ideal transposed (ideal.mT)"] = (
        (w * target.mT).sum(dim=-1)[..., with_target].mean(dim=-1),
        "ideal[i, j] = 1 when query i should look at key j, the same (query, key) layout as weights.")
    if bool((target.sum(dim=-1) == 0).any()):
        mistakes["you averaged over every row, also the rows without a target"] = (
            on_target.sum(dim=-1).mean(dim=-1),
            f"a row of ideal that is all zeros has no target (the set R of 8.2.1 leaves it out): average over "
            f"the rows with a target only, ideal.sum(dim=-1) > 0, not over all {N} (a sum over the queries, dim=-2, "
            f"averaged over all {N} gives these numbers too: sum over the keys, dim=-1).")
    return lambda got: compare_tensors(got, expected, name="your match", likely_mistakes=mistakes,
                                       atol=1e-6)


def _knockout_logits(model: TinyAttentionModel, tokens: Tensor, layer: int, head: int, *,
                     mistake: str | None = None) -> Tensor:
    """``(B, N) -> (B, N, C)`` with ``head`` of ``layer`` knocked out; ``mistake``: one of :data:`_KNOCKOUT_MISTAKES`."""
    x = model.embed(tokens)  # (B, N, dim)
    if mistake != "no positions":
        x = x + model.position.weight[: tokens.shape[1]]  # (B, N, dim)
    first = x
    for index, attention in enumerate(model.layers):
        out, inter = attention(first if mistake == "same input" else x, return_intermediates=True)
        heads = inter["heads"].clone()  # (B, H, N, head_dim)
        hit = index == layer or mistake == "every layer"
        if hit and mistake == "token axis":
            heads[:, :, head] = 0.0  # zeroes token `head` of every head
        elif hit and mistake != "after projection":
            heads[:, head] = 0.0
        projected = attention.proj(merge_heads(heads))  # (B, N, dim)
        if hit and mistake == "after projection":
            hd = attention.head_dim
            projected = projected.clone()
            projected[..., head * hd:(head + 1) * hd] = 0.0
        if mistake == "no skip":
            x = projected
        elif mistake == "layer output" or (mistake == "kept layers' output" and not hit):
            x = x + projected + inter["skip"]  # Attention's own output adds the merged v too
        else:
            x = x + projected
    return model.readout(x)  # (B, N, C)


_KNOCKOUT_MISTAKES = {
    "after projection": (
        "the head's slice of features was zeroed AFTER the output projection",
        "proj mixes every head into every output feature: zero the head in heads (B, H, N, head_dim), then project."),
    "token axis": (
        "a token was zeroed instead of a head (heads[:, :, head])",
        "heads has shape (B, H, N, head_dim): the head axis is dim 1, heads[:, head] = 0."),
    "every layer": (
        "that head was knocked out in every layer",
        "zero the head only in the layer you were given (compare the layer index in your loop)."),
    "no skip": (
        "the skip connection was left out (x = proj(...))",
        "the model adds each layer's projected output to its input: x = x + proj(merged)."),
    "layer output": (
        "each layer's full output (projected + merged v, walkthrough 000's skip) was added",
        "the tiny model adds only the projected heads, inter['projected'], to x, not the layer's out."),
    "kept layers' output": (
        "the layers that keep their heads added their full output (out = projected + merged v, walkthrough 000's skip)",
        "the tiny model adds only the projected heads, inter['projected'], to x, in every layer, not the layer's out."),
    "no positions": (
        "the position vectors were left out",
        "the model's input is model.embed(tokens) + model.position.weight, before the first layer."),
    "same input": (
        "every layer read the first x (embeddings + positions), not the x the layers before it made",
        "run each layer on the current x, the one the previous layers have added to."),
}


#: What already knocks a head out: the helper, the checker's own version, any TinyAttentionModel given keep_heads.
KNOCKOUT_SHORTCUTS = library(("head_knockout",)) | Watch({_knockout_logits: "the checker's own knockout",
                                                          TinyAttentionModel: "the model's own keep_heads"})
_KNOCKOUT_ONLY_IF = {TinyAttentionModel: lambda args: args.get("keep_heads") is not None,
                     _knockout_logits: lambda args: args.get("mistake") is None}  # its right version


@checker
def check_knockout(answer: Any, model: TinyAttentionModel, tokens: Tensor) -> Verdict:
    """Exercise 8: ``without_head(model, tokens, layer, head) -> (B, N, C)``, the logits without that head."""
    if not isinstance(model, TinyAttentionModel) or model.wiring != "identity" or model.position_scheme != "learned":
        raise TypeError("model must be a TinyAttentionModel with wiring='identity' and learned positions")
    task = LookupTask(num_pairs=tokens.shape[1] // 2)
    cases = []
    with local_random(8):  # seeded without touching the notebook's random state
        other = TinyAttentionModel(task.vocab_size, task.n_classes, task.seq_len, dim=16, num_heads=4, num_layers=3)
    for described, net in (("the model you were given", model), ("a 3-layer model with 4 heads", other)):
        net = net.to(torch.float64).eval()
        handed = deepcopy(net)  # the learner's function runs on a copy
        L, H = len(net.layers), net.layers[0].num_heads
        for layer in range(L):
            for head in range(H):
                def judge(got: Any, net: TinyAttentionModel = net, layer: int = layer, head: int = head) -> Verdict:
                    keep = torch.ones(len(net.layers), net.layers[0].num_heads)
                    keep[layer, head] = 0.0
                    with torch.no_grad():
                        mistakes = {cause: (_knockout_logits(net, tokens, layer, head, mistake=key), hint)
                                    for key, (cause, hint) in _KNOCKOUT_MISTAKES.items()}
                        mistakes["nothing was knocked out"] = (net(tokens), "set heads[:, head] = 0.0 in the chosen "
                                                                            "layer before the projection.")
                        return compare_tensors(got, net(tokens, keep_heads=keep), name="your logits",
                                               likely_mistakes=mistakes, atol=1e-6, rtol=1e-6)
                cases.append(((handed, tokens, layer, head), f"layer={layer}, head={head} on {described}", judge))
    return judge_function(
        answer, cases, watched=KNOCKOUT_SHORTCUTS, only_if=_KNOCKOUT_ONLY_IF, example="without_head(model, tokens, "
        "layer, head)", refusal="which already knocks heads out: the exercise asks you to write it step by step",
        is_="your answer is {}, {}.", calls="your function hands the knockout to {}, {}.",
        lines="start from x = model.embed(tokens) + model.position.weight and loop over model.layers, zeroing the "
              "head in inter['heads'] before the projection.",
        raised="loop over model.layers; in each, take the intermediates, zero one head where the index matches, "
               "project, add to x; end with model.readout(x).",
        success="the same logits as the model with that head's output zeroed, for every layer and head of the model "
                "you were given and of a 3-layer model with 4 heads.")
