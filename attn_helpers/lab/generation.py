"""Lesson 09: generation with a KV cache, a tiny causal character model and greedy decoding from it."""

from __future__ import annotations

import time

import torch
from torch import Tensor, nn

from ..core import (KVCache, MultiHeadAttention, cached_attention_step, causal_mask, check_positive_int,
                   check_token_ids, shape_of)
from .seeded import local_random
from .training import Adam

__all__ = ["CharVocab", "TinyCausalLM", "train_char_model", "generate_greedy", "GENERATION_TEXT"]

GENERATION_TEXT = ("a cat sat on a mat. a dog sat on a log. a cat sat on a dog. a dog sat on a cat. "
                   "a rat sat on a hat. a bat sat on a rat. ")  # the lesson's training text: short, repetitive


class CharVocab:
    """Lesson 09: the characters of a text, each with an id: ``encode("cat") -> (3,)`` ids, ``decode(ids) -> "cat"``."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text:
            raise ValueError(f"text must be a non-empty string, got {text!r}")
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """``text`` of ``n`` characters -> ``(n,)`` int64 ids; a character not in the vocabulary is named."""
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise ValueError(f"text has characters outside the vocabulary {''.join(self.chars)!r}: {unknown}")
        return torch.tensor([self.ids[c] for c in text], dtype=torch.long)

    def decode(self, ids: Tensor) -> str:
        """``(n,)`` ids -> a string of ``n`` characters."""
        if not isinstance(ids, Tensor) or ids.ndim != 1 or ids.is_floating_point():
            raise ValueError(f"ids must be a 1-D tensor of integer ids, got {ids!r:.60}")
        return "".join(self.chars[i] for i in ids.tolist())


class TinyCausalLM(nn.Module):
    """Lesson 09: embed -> + causal self-attention -> + MLP -> logits, ``tokens (B, N) -> logits (B, N, V)``,
    without positions; :meth:`step` computes new tokens' logits only, their attention served from a :class:`KVCache`."""

    def __init__(self, vocab_size: int, d_model: int = 32, num_heads: int = 4) -> None:
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))
        self.readout = nn.Linear(d_model, vocab_size)

    def _head(self, x: Tensor, attended: Tensor) -> Tensor:
        h = x + attended  # (B, n, d_model): skip connection around attention
        h = h + self.mlp(h)  # (B, n, d_model)
        return self.readout(h)  # (B, n, V)

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N)`` int64 -> ``logits (B, N, V)``, every position causally (no cache)."""
        tokens = check_token_ids("tokens", tokens, self.vocab_size)
        x = self.embed(tokens)  # (B, N, d_model)
        return self._head(x, self.attn(x, mask=causal_mask(tokens.shape[1], device=tokens.device)))

    def step(self, tokens_new: Tensor, cache: KVCache) -> Tensor:
        """``tokens_new (B, n_new)`` -> ``logits (B, n_new, V)``, attending to ``cache`` (which grows) and the new tokens."""
        tokens_new = check_token_ids("tokens_new", tokens_new, self.vocab_size)
        x = self.embed(tokens_new)  # (B, n_new, d_model)
        return self._head(x, cached_attention_step(self.attn, x, cache))


def train_char_model(
    text: str = GENERATION_TEXT, *, d_model: int = 32, num_heads: int = 4, seq_len: int = 16, batch: int = 16,
    steps: int = 200, lr: float = 0.015, seed: int = 0,
) -> tuple[TinyCausalLM, CharVocab, list[float]]:
    """Lesson 09: train a :class:`TinyCausalLM` on the next character of ``text``, ``batch`` random windows of
    ``seq_len + 1`` per step; seeded, float64 and Adam, so the same arguments give the same model. Returns ``(model in
    eval mode, vocabulary, loss per step)``."""
    vocab = CharVocab(text)
    for name, value in (("seq_len", seq_len), ("batch", batch), ("steps", steps)):
        check_positive_int(name, value)
    ids = vocab.encode(text)
    ids = ids.repeat(-(-(seq_len + 1) // len(ids)) + 1)  # long enough for any window: (n,)
    generator = torch.Generator().manual_seed(seed)  # the training windows
    with local_random(seed):  # the initial parameters, drawn as after torch.manual_seed(seed)
        model = TinyCausalLM(len(vocab), d_model, num_heads).double()
    optimiser = Adam(model.parameters(), lr=lr)  # attn_helpers.lab's Adam: torch.optim's first use costs seconds
    windows = torch.arange(seq_len + 1)  # (seq_len + 1,)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(text), (batch, 1), generator=generator)  # (batch, 1)
        chunk = ids[starts + windows]  # (batch, seq_len + 1)
        logits = model(chunk[:, :-1])  # (batch, seq_len, V)
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(vocab)), chunk[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return model.eval(), vocab, losses


@torch.no_grad()
def generate_greedy(
    model: TinyCausalLM, prompt: Tensor, num_new: int, *, use_cache: bool, step_seconds: list[float] | None = None,
) -> Tensor:
    """Lesson 09: ``prompt (B, N_prompt)`` -> ``(B, N_prompt + num_new)``, the likeliest token appended ``num_new``
    times; ``use_cache=True`` runs the prompt once (the prefill), then only the newest token. ``step_seconds`` receives
    each step's wall-clock seconds."""
    if not isinstance(model, TinyCausalLM):
        raise TypeError(f"model must be an attn_helpers.lab.TinyCausalLM, got {type(model).__name__}")
    prompt = check_token_ids("prompt", prompt, model.vocab_size)
    if prompt.shape[1] == 0:
        raise ValueError(f"prompt must hold at least one token per sequence, got shape {shape_of(prompt)}")
    check_positive_int("num_new", num_new)
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be True or False, got {use_cache!r}")
    tokens = prompt
    cache = KVCache(max_tokens=prompt.shape[1] + num_new) if use_cache else None
    newest = prompt  # what the cache has not seen yet: the whole prompt at the first step
    for _ in range(num_new):
        start = time.perf_counter()
        if cache is None:
            logits = model(tokens)[:, -1]  # (B, V): the whole sequence again, keep the last position
        else:
            logits = model.step(newest, cache)[:, -1]  # (B, V): only the new token(s)
        newest = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, newest], dim=1)  # (B, n + 1)
        if step_seconds is not None:
            step_seconds.append(time.perf_counter() - start)
    return tokens
