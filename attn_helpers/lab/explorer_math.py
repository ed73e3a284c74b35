"""The math behind the lessons' explorers (``attn_helpers.widgets``), so a widget only draws.

Each function is a small, seeded computation on :mod:`attn_helpers.core`: the mask types and mask
conventions of lesson 03, one query's weighted values of lesson 04, the scaled logits of lesson 02,
the projected token vectors of lesson 01, the forward pass of lesson 05's heads explorer and the
seeded stacks of lesson 06's skip explorer.
None of them touches the notebook's random state: every random number comes from a local ``torch.Generator``
or inside :func:`~attn_helpers.lab.local_random`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..core import Attention, attention_scores, causal_mask, mask_to_additive, padding_mask
from .example import VOCAB, embed
from .probes import AttentionStack
from .seeded import local_random
from .threads import one_thread

__all__ = [
    "MASK_TYPES",
    "MASK_CONVENTIONS",
    "keep_mask",
    "masked_weights",
    "VALUE_MASKS",
    "weights_and_outputs",
    "scaled_logits",
    "sentence_embeddings",
    "seeded_attention",
    "seeded_stack",
    "projected_qkv",
    "word_vectors",
    "sentence_intermediates",
]

MASK_TYPES = ("none", "causal", "padding", "causal+padding", "padding (queries too)")
MASK_CONVENTIONS = ("keep", "blocked", "-1e9")  # this package's; masked_fill(-inf) + softmax; walkthrough 004's
VALUE_MASKS = ("none", "causal")


def keep_mask(kind: str, n: int, length: int) -> Tensor:
    """The ``(n, n)`` boolean mask (``True`` = may attend) of one mask type from :data:`MASK_TYPES`.

    ``length`` real tokens come first, ``n - length`` padding tokens last. ``"padding (queries
    too)"`` also blocks every key for a padded query, so those rows are fully masked.
    """
    if kind not in MASK_TYPES:
        raise ValueError(f"kind must be one of {MASK_TYPES}, got {kind!r}")
    keep = torch.ones(n, n, dtype=torch.bool)
    real_keys = padding_mask([length], n)[0]  # (1, n): True for real keys
    if kind in ("causal", "causal+padding"):
        keep = keep & causal_mask(n)  # (n, n)
    if kind in ("padding", "causal+padding", "padding (queries too)"):
        keep = keep & real_keys  # (n, n), broadcast over query rows
    if kind == "padding (queries too)":
        keep = keep & real_keys.transpose(0, 1)  # (n, n): padded query rows blocked entirely
    return keep


def masked_weights(scores: Tensor, keep: Tensor, convention: str, temperature: float = 1.0) -> Tensor:
    """``softmax(scores / temperature)`` with ``keep`` applied the way ``convention`` does it.

    ``scores (..., N_q, N_k)``, ``keep`` boolean broadcastable to it (``True`` = may attend);
    returns weights of the same shape. ``"keep"``: this package's convention (a fully masked row
    gets zeros); ``"blocked"``: ``masked_fill(~keep, -inf)`` then ``torch.softmax`` (NaN there);
    ``"-1e9"``: walkthrough 004's ``masked_fill(keep == 0, -1e9)`` (uniform there).
    """
    scaled = scores / temperature  # (..., N_q, N_k)
    if convention == "keep":
        dead = ~keep.any(dim=-1, keepdim=True)  # (..., N_q, 1)
        weights = torch.softmax(scaled + mask_to_additive(keep | dead), dim=-1)  # dead rows: plain softmax
        return weights.masked_fill(dead, 0.0)  # ... then zeros
    if convention == "blocked":
        return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)
    if convention == "-1e9":
        return torch.softmax(scaled.masked_fill(keep == 0, -1e9), dim=-1)
    raise ValueError(f"convention must be one of {list(MASK_CONVENTIONS)}, got {convention!r}")


def weights_and_outputs(scores: Tensor, v: Tensor, temperature: float = 1.0, mask: str = "none") -> tuple[Tensor, Tensor]:
    """``softmax(scores / temperature)`` (optionally causal) and the outputs ``weights @ v``.

    ``scores (N_q, N_k)``, ``v (N_k, d_v)`` -> ``weights (N_q, N_k)``, ``context (N_q, d_v)``.
    ``mask``: ``"none"`` or ``"causal"`` (query ``i`` sees keys ``j <= i``).
    """
    if mask not in VALUE_MASKS:
        raise ValueError(f"mask must be one of {VALUE_MASKS}, got {mask!r}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    scaled = scores / temperature  # (N_q, N_k)
    if mask == "causal":
        scaled = scaled.masked_fill(~causal_mask(*scores.shape), float("-inf"))  # (N_q, N_k)
    weights = torch.softmax(scaled, dim=-1)  # (N_q, N_k)
    return weights, weights @ v  # (N_q, N_k), (N_q, d_v)


def scaled_logits(q: Tensor, k: Tensor, *, scaled: bool = True, temperature: float = 1.0) -> Tensor:
    """What the softmax sees: ``q @ k^T``, divided by ``sqrt(d_k)`` when ``scaled``, then by ``temperature``.

    ``q (..., N_q, d_k)``, ``k (..., N_k, d_k)`` -> ``(..., N_q, N_k)``. ``temperature`` must be > 0.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be greater than 0, got {temperature}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k (last dimension): q has shape {list(q.shape)}, k has shape {list(k.shape)}")
    scale = q.shape[-1] ** -0.5 if scaled else 1.0
    return attention_scores(q, k, scale=scale / temperature)  # (..., N_q, N_k)


def sentence_embeddings(tokens: Sequence[str], dim: int, *, seed: int = 0) -> Tensor:
    """Token vectors ``(1, N, dim)`` from a seeded lookup table: equal words get equal rows.

    Words of the series' running example are looked up in its table (:func:`attn_helpers.embed`), so
    the explorer shows the same vectors as the lessons; other words get a table of their own. Neither
    depends on the global random state, so moving a slider never changes what a notebook cell draws next.
    """
    if all(t in VOCAB for t in tokens):
        return embed(tokens, dim, seed=seed)[None]  # (1, N, dim)
    vocab = sorted(set(tokens))
    g = torch.Generator().manual_seed(10_000 * seed + dim)
    table = torch.randn(len(vocab), dim, generator=g)  # (vocab, dim)
    ids = torch.tensor([vocab.index(t) for t in tokens])  # (N,)
    return table[ids][None]  # (1, N, dim)


def seeded_attention(dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, *, seed: int = 0) -> Attention:
    """``Attention(dim, chan, num_heads, qkv_bias)`` as built after ``torch.manual_seed(seed)``
    (:func:`~attn_helpers.lab.local_random`: the global random state is left as it was)."""
    with local_random(seed):
        return Attention(dim, chan, num_heads=num_heads, qkv_bias=qkv_bias)


def seeded_stack(depth: int, dim: int, chan: int, num_heads: int, *, seed: int, v_scale: float = 1.0,
                 tail: AttentionStack | None = None, tokens: tuple[int, int] = (2, 8)) -> tuple[AttentionStack, Tensor]:
    """Lesson 06's stack and input, drawn as its cells draw them after ``torch.manual_seed(seed)``:
    ``AttentionStack(depth, dim, chan, num_heads, wiring="none").double()``, then the input
    ``torch.randn(*tokens, dim)`` in float64, so random seed k here is the lesson's seed k. The draws come from a
    local generator (:func:`~attn_helpers.lab.local_random`); layer 0 draws first, so it is the same for every
    ``depth``. Every ``W_v`` is then multiplied by ``v_scale``.

    ``tail``: a stack whose layers 1 and up are appended (the same modules, not copies), so a narrower input
    ``dim`` can share every layer after the first with a stack of ``dim = chan``.
    """
    with local_random(seed):
        stack = AttentionStack(depth, dim, chan, num_heads, wiring="none").double()
        x = torch.randn(*tokens, dim, dtype=torch.float64)  # (B, N, dim)
    with torch.no_grad():
        for layer in stack.layers:
            layer.qkv.weight[2 * chan:] *= v_scale  # rows 2*chan.. of qkv.weight (3*chan, in) are W_v
    if tail is not None:
        stack.layers.extend(tail.layers[1:])
    return stack, x


def projected_qkv(tokens: Sequence[str], dim: int, chan: int, num_heads: int = 1, qkv_bias: bool = False, *,
                  seed: int = 1) -> dict[str, Tensor]:
    """Lesson 01's projection of a sentence: ``x (1, N, dim)`` -> ``qkv (1, N, 3·chan)`` -> ``q, k, v (1, N, chan)``.

    A seeded layer (:func:`seeded_attention`) over :func:`sentence_embeddings`; also ``params``, the
    number of entries of the fused projection (a 0-d tensor).
    """
    layer = seeded_attention(dim, chan, num_heads, qkv_bias, seed=seed)
    x = sentence_embeddings(tokens, dim)  # (1, N, dim)
    with torch.no_grad():
        qkv = layer.qkv(x)  # (1, N, 3*chan)
    q, k, v = qkv.split(chan, dim=-1)  # each (1, N, chan)
    params = torch.tensor(sum(p.numel() for p in layer.qkv.parameters()))
    return {"x": x, "qkv": qkv, "q": q, "k": k, "v": v, "params": params}


def word_vectors(tokens: Sequence[str], vocab: Sequence[str], dim: int, *, seed: int, std: float = 1.0) -> Tensor:
    """Token vectors ``(1, N, dim)``: one seeded row of spread ``std`` per word of ``vocab``, so equal words
    get equal vectors; the global RNG is left alone."""
    words = list(dict.fromkeys(vocab))  # first-seen order
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(len(words), dim, generator=generator) * std  # (vocab, dim)
    ids = torch.tensor([words.index(t) for t in tokens])  # (N,)
    return table[ids][None]  # (1, N, dim)


def sentence_intermediates(tokens: Sequence[str], vocab: Sequence[str], num_heads: int, chan: int, dim: int, *,
                           seed: int, std: float = 1.0) -> dict[str, Tensor]:
    """One forward pass of a seeded ``Attention(dim, chan, num_heads)`` over ``tokens``: its intermediates by
    name (shapes in ``Attention.AXES``; ``"weights"`` is ``(1, num_heads, N, N)``).

    Same arguments, same numbers. The weights depend on ``chan`` but not on ``num_heads`` (the Linear
    layers have the same shapes), so moving ``num_heads`` only changes how the same q, k and v are cut
    into heads. Runs on one CPU thread: for tensors this small, waking a second thread costs more than
    it saves (ten times more on a busy 2-core machine); the previous thread count is restored afterwards.
    """
    with one_thread():
        layer = seeded_attention(dim, chan, num_heads, seed=seed)
        x = word_vectors(tokens, vocab, dim, seed=seed, std=std)  # (1, N, dim)
        with torch.no_grad():
            _, inter = layer(x, return_intermediates=True)
    return inter
