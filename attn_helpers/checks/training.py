"""Checkers for 08 · Watch attention learn: the ideal pattern of a task, the pattern-match number,
and which training run learned slowest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..training import PreviousTokenTask, TrainingRun, pattern_match
from ._core import Verdict, checker, compare_tensors, correct, wrong

__all__ = ["check_previous_token_pattern", "check_pattern_match", "check_slowest_run"]


@checker
def check_previous_token_pattern(answer: Any, task: PreviousTokenTask) -> Verdict:
    """Exercise: the ideal attention ``(N, N)`` of ``task``: row ``i`` one-hot at key ``(i - 1) mod N``."""
    if not isinstance(task, PreviousTokenTask):
        raise TypeError(f"task must be a PreviousTokenTask, got {type(task).__name__}")
    N = task.seq_len
    tokens = torch.zeros(1, N, dtype=torch.long)  # the pattern does not depend on the tokens
    expected = task.ideal_attention(tokens)[0]  # (N, N)
    eye = torch.eye(N)  # (N, N)
    no_wrap = torch.diag(torch.ones(N - 1), -1)  # (N, N): row 0 left empty
    mistakes = {
        "each query looks at the NEXT token": (
            eye.roll(1, dims=1), "row i is query i and must put its 1 in column i - 1, one step to the LEFT."),
        "each query looks at itself": (eye, "the target of position i is the token before it: column i - 1."),
        "position 0 has nothing to look at": (
            no_wrap, "position 0 wraps around: its target is the LAST token, so row 0 has its 1 in column N - 1."),
        "position 0 looks at itself": (
            no_wrap + torch.diag(torch.eye(N)[0]),
            "position 0 wraps around: its target is the last token, so row 0 has its 1 in column N - 1."),
    }
    return compare_tensors(answer, expected, name="your pattern", likely_mistakes=mistakes,
                           success=f"{N} × {N}: every row has one 1, one step left of the diagonal, and row 0 "
                                   f"wraps around to key {N - 1}.")


@checker
def check_pattern_match(answer: Any, weights: Tensor, ideal: Tensor) -> Verdict:
    """Exercise: each head's pattern match on one sequence: ``weights (H, N, N)``, ``ideal (N, N)`` ->
    ``(H,)``, the weight on the ideal key summed over keys and averaged over the rows (all rows have a target)."""
    expected = pattern_match(weights[None], ideal[None])  # (H,)
    on_target = weights * ideal  # (H, N, N)
    N = ideal.shape[-1]
    mistakes = {
        "you averaged over all N × N cells": (
            on_target.mean(dim=(-2, -1)),
            f"each row has one right key: sum over the keys (dim=-1) first, then average the {N} rows."),
        "you summed over the rows instead of averaging them": (
            on_target.sum(dim=(-2, -1)), f"average over the rows (divide by {N}), so a perfect head scores 1."),
        "you measured how peaked each row is, not where its peak is": (
            weights.max(dim=-1).values.mean(dim=-1),
            "the largest weight can sit on the wrong key; multiply by ideal to keep only the right key's weight."),
        "you left out the heads axis": (
            on_target.sum(dim=-1).mean(), "keep one number per head: average over the rows only (dim=-1 after the sum)."),
    }
    return compare_tensors(answer, expected, name="your pattern match", likely_mistakes=mistakes, atol=1e-6,
                           success="one number per head: " + ", ".join(f"{v:.2f}" for v in expected.tolist()) + ".")


def _slowness(run: TrainingRun, accuracy: float) -> tuple[float, float]:
    """Sort key: later to reach ``accuracy`` is slower; among runs that never do, lower final accuracy is slower."""
    reached = run.steps_to(accuracy)
    return (float("inf") if reached is None else float(reached), -run.final_accuracy)


def _describe(run: TrainingRun, accuracy: float) -> str:
    reached = run.steps_to(accuracy)
    if reached is None:
        return f"never reached {accuracy:.0%} in {run.config.steps} steps (ended at {run.final_accuracy:.3f})"
    return f"reached {accuracy:.0%} held-out accuracy at step {reached}"


@checker
def check_slowest_run(answer: Any, runs: Mapping[str, TrainingRun], accuracy: float = 0.99) -> Verdict:
    """Exercise: the name of the run in ``runs`` that learned slowest: the last to reach ``accuracy``
    held-out accuracy; among runs that never reach it, the one with the lowest final accuracy."""
    if not isinstance(answer, str):
        return wrong(f"the answer should be a run's name (a string), got {type(answer).__name__}.",
                     f"write one of: {', '.join(repr(n) for n in runs)}.")
    if answer not in runs:
        return wrong(f"there is no run called {answer!r}.", f"write one of: {', '.join(repr(n) for n in runs)}.")
    ranked = sorted(runs, key=lambda name: _slowness(runs[name], accuracy))
    slowest, fastest = ranked[-1], ranked[0]
    if answer == slowest:
        return correct(f"{answer!r} {_describe(runs[answer], accuracy)}.")
    mine = f"{answer!r} {_describe(runs[answer], accuracy)}"
    if answer == fastest:
        return wrong(f"{mine}: that is the fastest run, not the slowest.",
                     "look for the run that takes the MOST steps to reach the threshold, or never reaches it.")
    if runs[answer].steps_to(accuracy) is None:
        return wrong(f"{mine}, but another run that never reached it ended lower.",
                     "when several runs never reach the threshold, the one with the lowest final accuracy is slowest.")
    return wrong(f"{mine}, but another run took longer.",
                 "compare run.steps_to(accuracy) for every run; None means it never got there, which is slowest.")
