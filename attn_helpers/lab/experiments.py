"""Lessons 08 and 10: experiments on trained tiny models, on a task's held-out sequences, without gradients, on
one CPU thread (the same numbers on every machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.arguments import check_positive_int
from .tasks import IGNORE, LookupTask, PreviousTokenTask, Task, held_out_sequences
from .seeded import one_thread
from .tiny_model import TinyAttentionModel
from .training import TrainingRun

__all__ = ["HeadKnockout", "head_knockout", "held_out_accuracy", "order_blind_accuracy", "accuracy_by_length",
           "attention_by_offset"]


# --- Knocking heads out: which head does which lookups? ---

@dataclass
class HeadKnockout:
    """Lesson 08: what :func:`head_knockout` measured; ``K = 1 + L*H`` rows (nothing, then each head knocked out):
    ``accuracy (K,)``, ``by_letter (K, num_letters)`` and ``questions (num_letters,)`` asking for each letter."""

    labels: list[str]
    accuracy: Tensor
    by_letter: Tensor
    questions: Tensor

    def cost(self) -> Tensor:
        """``(K - 1, num_letters)``: how much accuracy knocking out each head costs on each letter."""
        return self.by_letter[:1] - self.by_letter[1:]


def head_knockout(model: TinyAttentionModel, task: LookupTask, *, held_out: int = 256) -> HeadKnockout:
    """Lesson 08: held-out accuracy of ``model`` with each head knocked out in turn (``model(tokens, keep_heads=...)``),
    overall and per letter asked for."""
    if not isinstance(model, TinyAttentionModel):
        raise TypeError(f"model must be a TinyAttentionModel, got {type(model).__name__}")
    if not isinstance(task, LookupTask):
        raise TypeError(f"task must be a LookupTask (its questions ask for letters), got {type(task).__name__}")
    check_positive_int("held_out", held_out)
    L, H = len(model.layers), model.layers[0].num_heads
    tokens, targets = held_out_sequences(task, held_out)  # (B, N) each
    letters = task.question_letters(tokens)  # (B, N): -1 at the pairs
    scored = targets != IGNORE  # (B, N)
    labels = ["nothing", *[f"layer {layer} head {head}" if L > 1 else f"head {head}"
                           for layer in range(L) for head in range(H)]]
    masks = [torch.ones(L, H), *(1 - torch.eye(L * H)).reshape(L * H, L, H)]  # (L, H) each: 0 = the head knocked out
    questions = torch.stack([(letters == c).sum() for c in range(task.num_letters)])  # (num_letters,)
    accuracy, by_letter = [], []
    with torch.no_grad(), one_thread():
        for keep in masks:
            right = (model(tokens, keep_heads=keep).argmax(dim=-1) == targets).to(torch.float64)  # (B, N)
            accuracy.append(right[scored].mean())
            by_letter.append(torch.stack([right[letters == c].sum() for c in range(task.num_letters)])
                             / questions.clamp_min(1))  # (num_letters,)
    return HeadKnockout(labels, torch.stack(accuracy), torch.stack(by_letter), questions)


# --- Lesson 10: accuracy at any length, and what an order-blind model can reach ---

def held_out_accuracy(model: TinyAttentionModel, task: Task, *, held_out: int = 256) -> float:
    """Lesson 08: accuracy of ``model`` on ``held_out`` sequences of ``task`` (the held-out sequences :func:`train`
    uses for a task of that length), over the positions with a target. ``model`` maps tokens ``(B, N) -> logits (B, N,
    C)``; runs without gradients, on one CPU thread."""
    tokens, targets = held_out_sequences(task, held_out)  # (B, N) each
    with torch.no_grad(), one_thread():  # as train() runs: one order of every sum on any machine
        logits = model(tokens)  # (B, N, C)
    scored = targets != IGNORE  # (B, N)
    return float((logits.argmax(dim=-1) == targets)[scored].to(torch.float64).mean())


def order_blind_accuracy(tokens: Tensor, targets: Tensor) -> float:
    """Lesson 10: the best accuracy without order on a previous-token task, ``tokens (B, N)``, ``targets (B, N)``
    -> a number: the commonest other token of the sequence, right with probability ``count / (N - 1)``, averaged over
    the positions with a target."""
    if not isinstance(tokens, Tensor) or not isinstance(targets, Tensor) or tokens.shape != targets.shape \
            or tokens.ndim != 2:
        raise ValueError(f"tokens and targets must be (B, N) tensors of the same shape, got "
                         f"{getattr(tokens, 'shape', None)} and {getattr(targets, 'shape', None)}")
    n = tokens.shape[1]
    counts = torch.zeros(tokens.shape[0], int(tokens.max()) + 1, dtype=torch.int64)  # (B, vocab)
    counts.scatter_add_(1, tokens, torch.ones_like(tokens))  # how often each token occurs in each sequence
    others = counts[:, None, :].repeat(1, n, 1)  # (B, N, vocab): the counts ...
    others.scatter_add_(2, tokens[..., None], -torch.ones_like(tokens[..., None]))  # ... without the token at that position itself
    best = others.max(dim=-1).values.to(torch.float64) / (n - 1)  # (B, N)
    return float(best[targets != IGNORE].mean())


def accuracy_by_length(runs: Mapping[str, TrainingRun], lengths: Sequence[int], *,
                       held_out: int = 256) -> dict[str, dict[int, float | None]]:
    """Lessons 10 and 12: ``{name: {length: accuracy}}``, each run's held-out accuracy on its task remade at each of
    ``lengths``; ``None`` where the model has no position vector (a learned table of ``seq_len`` rows)."""
    table: dict[str, dict[int, float | None]] = {}
    for name, run in runs.items():
        model, task = run.model, run.task
        if not isinstance(task, PreviousTokenTask):
            raise TypeError(f"only previous-token tasks can be remade at another length, got {type(task).__name__}")
        table[name] = {n: None if model.position_scheme == "learned" and n > model.seq_len
                       else held_out_accuracy(model, type(task)(seq_len=n, vocab_size=task.vocab_size), held_out=held_out)
                       for n in lengths}
    return table


def attention_by_offset(model: TinyAttentionModel, task: Task, *, trained_len: int,
                        held_out: int = 256) -> dict[str, float]:
    """Lesson 10: the share of ``model``'s attention on the right key, on other offsets ``|i - j| < trained_len`` and on
    offsets never seen in training (they add up to 1), averaged over layers, heads and query rows with a target."""
    tokens, _ = held_out_sequences(task, held_out)  # (B, N)
    with torch.no_grad(), one_thread():  # as train() runs: one order of every sum on any machine
        _, weights = model(tokens, return_weights=True)  # (B, L, H, N, N)
    weights = weights.to(torch.float64).mean(dim=(1, 2))  # (B, N, N): averaged over layers and heads
    ideal = task.ideal_attention(tokens).to(torch.float64)  # (B, N, N)
    n = tokens.shape[1]
    offset = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()  # (N, N)
    unseen = (offset >= trained_len).to(torch.float64)  # (N, N)
    rows = ideal.sum(dim=-1) > 0  # (B, N): the query rows with a target
    right = float((weights * ideal).sum(dim=-1)[rows].mean())
    never = float((weights * unseen).sum(dim=-1)[rows].mean())
    return {"right key": right, "other offsets seen in training": 1.0 - right - never,
            "offsets never seen in training": never}
