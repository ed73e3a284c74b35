"""Lessons 01-05: the running example, its sentences, a small vocabulary and a seeded embedding table
(equal words get equal rows; the global random state is left alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..core import Attention
from .seeded import local_random, one_thread

__all__ = ["SENTENCE", "PADDED_SENTENCE", "LONG_SENTENCE", "VOCAB", "embed", "embedding_table", "token_ids",
           "sentence_intermediates"]

SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
PADDED_SENTENCE = SENTENCE + ("<pad>", "<pad>")  # 8 tokens, the last two padding
LONG_SENTENCE = SENTENCE + tuple(
    "because it was warm and the dog slept by the door while rain fell "
    "on the old roof of the quiet house near the river bank".split()
)  # 32 words
VOCAB = ("<pad>", "the", "cat", "sat", "on", "mat", "down", "a", "dog", "ran")


def embedding_table(dim: int, *, seed: int = 0) -> Tensor:
    """Lesson 01: the table ``(len(VOCAB), dim)``: one random row per word of :data:`VOCAB`, fixed by ``seed`` and
    ``dim``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive int (the width of a token vector), got {dim!r}")
    generator = torch.Generator().manual_seed(1_000 * seed + dim)
    return torch.randn(len(VOCAB), dim, generator=generator)  # (vocab, dim)


def token_ids(tokens: Sequence[str]) -> Tensor:
    """Lesson 01: each token's row number in :data:`VOCAB`: ``(N,)`` integers."""
    unknown = [t for t in tokens if t not in VOCAB]
    if unknown:
        raise ValueError(f"tokens {unknown} are not in the example's vocabulary VOCAB = {list(VOCAB)}")
    return torch.tensor([VOCAB.index(t) for t in tokens], dtype=torch.long)  # (N,)


def embed(tokens: Sequence[str], dim: int, *, seed: int = 0) -> Tensor:
    """Lessons 01-05, 08, 10, 11 and 13: look every token up in :func:`embedding_table`: ``N`` tokens -> ``(N, dim)``;
    equal words, equal rows."""
    table = embedding_table(dim, seed=seed)  # (vocab, dim)
    return table[token_ids(tokens)]  # (N, dim): row i is the table row of token i


def sentence_intermediates(tokens: Sequence[str], vocab: Sequence[str], num_heads: int, chan: int, dim: int, *,
                           seed: int, std: float = 1.0) -> dict[str, Tensor]:
    """Lessons 00 and 05 (the heads explorer): the intermediates by name (``Attention.AXES``) of one forward pass over
    ``tokens`` of ``Attention(dim, chan, num_heads)`` built after ``torch.manual_seed(seed)``, on one CPU thread.

    Token vectors: one seeded row of spread ``std`` per word of ``vocab`` (first-seen order): equal words, equal
    vectors. The Linear layers do not depend on ``num_heads``: moving it only cuts the same q, k, v into other heads.
    """
    words = list(dict.fromkeys(vocab))
    with one_thread():
        with local_random(seed):
            layer = Attention(dim, chan, num_heads=num_heads)
        table = torch.randn(len(words), dim, generator=torch.Generator().manual_seed(seed)) * std  # (vocab, dim)
        x = table[torch.tensor([words.index(t) for t in tokens])][None]  # (1, N, dim)
        with torch.no_grad():
            _, inter = layer(x, return_intermediates=True)
    return inter
