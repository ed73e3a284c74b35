"""Lessons 08 and 10: toy tasks whose right attention pattern is known in advance. Each samples token ids
``(B, N)`` and targets ``(B, N)`` (:data:`IGNORE`: no target) with a generator it is given.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core import check_positive_int, check_token_ids

__all__ = ["IGNORE", "HELD_OUT_SEED", "Task", "PreviousTokenTask", "NoWrapPreviousTokenTask", "LookupTask",
           "held_out_sequences", "pattern_match"]

IGNORE = -100  # target of a position that has nothing to predict (cross_entropy's ignore_index)
HELD_OUT_SEED = 20_240  # every run of a task is evaluated on the same held-out sequences
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _check_tokens(tokens: object, task: "Task") -> Tensor:
    if check_token_ids("tokens", tokens).shape[1] != task.seq_len:
        raise ValueError(f"tokens must have shape (B, N={task.seq_len}) for {task.name!r}, got {list(tokens.shape)}")
    return tokens


class Task:
    """Lesson 08: a toy task. Subclasses set ``name``, ``seq_len``, ``vocab_size`` and ``n_classes`` and implement
    :meth:`sample`, :meth:`ideal_attention` and :meth:`token_labels`."""

    name: str = "task"
    seq_len: int
    vocab_size: int
    n_classes: int

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``batch`` random sequences drawn with ``generator``: tokens ``(B, N)`` and targets ``(B, N)``, int64."""
        raise NotImplementedError

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        """The pattern that solves the task, ``(B, N, N)`` float32: row ``i`` one-hot at the key holding what position
        ``i`` must output, zeros where there is no target."""
        raise NotImplementedError

    def token_labels(self, tokens: Tensor) -> list[str]:
        """Readable labels for one sequence ``tokens (N,)``, e.g. ``["c", "a", ...]``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in vars(self).items() if k != "name")
        return f"{type(self).__name__}({fields})"


class PreviousTokenTask(Task):
    """Lesson 08: ``seq_len`` letters drawn uniformly from ``vocab_size``; target ``i`` is token ``i - 1`` (position 0
    wraps around to ``N - 1``); the right pattern is the line just below the diagonal."""

    name = "previous token"

    def __init__(self, seq_len: int = 8, vocab_size: int = 16) -> None:
        self.seq_len = check_positive_int("seq_len", seq_len)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        if seq_len < 2:
            raise ValueError(f"seq_len must be at least 2, got {seq_len}")
        if vocab_size > len(LETTERS):
            raise ValueError(f"vocab_size must be at most {len(LETTERS)} (one letter each), got {vocab_size}")
        self.n_classes = vocab_size

    def _source(self) -> Tensor:
        """``(N,)``: the position each query must copy from."""
        return (torch.arange(self.seq_len) - 1) % self.seq_len  # (N,)

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        check_positive_int("batch", batch)
        tokens = torch.randint(0, self.vocab_size, (batch, self.seq_len), generator=generator)  # (B, N)
        return tokens, tokens[:, self._source()]  # (B, N), (B, N)

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        tokens = _check_tokens(tokens, self)
        one = torch.zeros(self.seq_len, self.seq_len)  # (N, N)
        one[torch.arange(self.seq_len), self._source()] = 1.0
        return one.expand(tokens.shape[0], -1, -1).clone()  # (B, N, N)

    def token_labels(self, tokens: Tensor) -> list[str]:
        tokens = _check_tokens(tokens.reshape(1, -1), self)[0]  # (1, N) checked, then (N,)
        return [LETTERS[t] for t in tokens.tolist()]


class NoWrapPreviousTokenTask(PreviousTokenTask):
    """Lesson 10: :class:`PreviousTokenTask` without the wrap-around (position 0 has no target), so the rule holds
    at every length."""

    name = "previous token, no wrap-around"

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        tokens, targets = super().sample(batch, generator)  # (B, N) each
        targets = targets.clone()
        targets[:, 0] = IGNORE  # nothing to the left of the first token
        return tokens, targets

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        ideal = super().ideal_attention(tokens)  # (B, N, N)
        ideal[:, 0] = 0.0  # the first row has no target
        return ideal

class LookupTask(Task):
    """Lesson 08: ``num_pairs`` pairs (``"C5"``: letter C stores digit 5), then the same letters as questions (``"C?"``)
    in a new order; a question's target is its letter's digit. The right pattern is found by content, not position."""

    name = "lookup"

    def __init__(self, num_pairs: int = 4, num_letters: int = 8, num_digits: int = 8) -> None:
        self.num_pairs = check_positive_int("num_pairs", num_pairs)
        self.num_letters = check_positive_int("num_letters", num_letters)
        self.num_digits = check_positive_int("num_digits", num_digits)
        if num_pairs > num_letters:
            raise ValueError(f"num_pairs={num_pairs} needs as many different letters, but num_letters={num_letters}")
        if num_letters > len(LETTERS) or num_digits > 10:
            raise ValueError(f"num_letters must be at most {len(LETTERS)} and num_digits at most 10, "
                             f"got {num_letters} and {num_digits}")
        self.seq_len = 2 * num_pairs
        self.vocab_size = num_letters * num_digits + num_letters
        self.n_classes = num_digits

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        check_positive_int("batch", batch)
        P, D = self.num_pairs, self.num_digits
        letters = torch.rand(batch, self.num_letters, generator=generator).argsort(dim=-1)[:, :P]  # (B, P) distinct
        digits = torch.randint(0, D, (batch, P), generator=generator)  # (B, P)
        order = torch.rand(batch, P, generator=generator).argsort(dim=-1)  # (B, P): question j asks pair order[j]
        questions = letters.gather(1, order)  # (B, P)
        tokens = torch.cat([letters * D + digits, self.num_letters * D + questions], dim=1)  # (B, 2P)
        targets = torch.cat([torch.full((batch, P), IGNORE), digits.gather(1, order)], dim=1)  # (B, 2P)
        return tokens, targets

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        tokens = _check_tokens(tokens, self)
        P, D = self.num_pairs, self.num_digits
        pair_letters = tokens[:, :P] // D  # (B, P)
        question_letters = tokens[:, P:] - self.num_letters * D  # (B, P)
        if (tokens[:, :P] >= self.num_letters * D).any() or (question_letters < 0).any():
            raise ValueError("tokens do not follow the lookup layout: pair tokens first, then question tokens")
        match = (question_letters[:, :, None] == pair_letters[:, None, :]).float()  # (B, P questions, P pairs)
        ideal = torch.zeros(tokens.shape[0], self.seq_len, self.seq_len)  # (B, N, N)
        ideal[:, P:, :P] = match
        return ideal

    def question_letters(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N) -> (B, N)``: the letter (``0 .. num_letters-1``) each question asks for, ``-1`` at pairs."""
        tokens = _check_tokens(tokens, self)
        letters = tokens - self.num_letters * self.num_digits  # (B, N): questions' letters, negative at pairs
        return letters.masked_fill(letters < 0, -1)

    def token_labels(self, tokens: Tensor) -> list[str]:
        tokens = _check_tokens(tokens.reshape(1, -1), self)[0]  # (1, N) checked, then (N,)
        P, D = self.num_pairs, self.num_digits
        pairs = [f"{LETTERS[t // D].upper()}{t % D}" for t in tokens[:P].tolist()]
        questions = [f"{LETTERS[t - self.num_letters * D].upper()}?" for t in tokens[P:].tolist()]
        return pairs + questions


def held_out_sequences(task: Task, count: int) -> tuple[Tensor, Tensor]:
    """Lesson 08: the ``count`` sequences every run of ``task`` is measured on: tokens ``(count, N)`` and targets
    ``(count, N)``, drawn with a generator seeded by :data:`HELD_OUT_SEED` (the global random state is left alone)."""
    return task.sample(count, torch.Generator().manual_seed(HELD_OUT_SEED))


def pattern_match(weights: Tensor, ideal: Tensor) -> Tensor:
    """Lesson 08: the attention weight on the right key, averaged (1 = the ideal pattern): ``weights (B, *heads, N_q,
    N_k)``, one-hot ``ideal (B, N_q, N_k)`` (all-zero rows left out) -> ``(*heads,)``; uniform attention scores
    ``1 / N_k``."""
    if not isinstance(weights, Tensor) or not isinstance(ideal, Tensor):
        raise TypeError(f"weights and ideal must be tensors, got {type(weights).__name__} and {type(ideal).__name__}")
    if ideal.ndim != 3 or weights.ndim < 3 or weights.shape[0] != ideal.shape[0] \
            or weights.shape[-2:] != ideal.shape[-2:]:
        raise ValueError(f"weights must be (B, *heads, N_q, N_k) and ideal (B, N_q, N_k) with the same B, N_q, "
                         f"N_k; got weights {list(weights.shape)} and ideal {list(ideal.shape)}")
    extra = weights.ndim - 3  # number of head axes
    ideal = ideal.to(weights.dtype).reshape(ideal.shape[0], *([1] * extra), *ideal.shape[1:])  # (B, 1.., N_q, N_k)
    on_target = (weights * ideal).sum(dim=-1)  # (B, *heads, N_q)
    has_target = (ideal.sum(dim=-1) > 0).to(weights.dtype)  # (B, 1.., N_q)
    count = has_target.sum(dim=(0, -1)).clamp_min(1.0)  # (1..,)
    return (on_target * has_target).sum(dim=(0, -1)) / count  # (*heads,)
