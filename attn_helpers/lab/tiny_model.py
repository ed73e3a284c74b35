"""Lessons 08, 10, 12 and 14: the tiny model, token and position embeddings, attention layers, a read-out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ..core import (Attention, RotaryAttention, alibi_bias, causal_mask, check_positive_int, check_token_ids,
                   mask_to_additive, merge_heads, sinusoidal_encoding)
from .seeded import local_random
from .tasks import Task
from .wiring import check_wiring, next_hidden

if TYPE_CHECKING:
    from .training import TrainConfig

__all__ = ["POSITION_SCHEMES", "TinyAttentionModel"]

# how the model is told where a token sits (lesson 10; "alibi": lesson 12)
POSITION_SCHEMES = ("learned", "none", "sinusoidal", "rope", "alibi")


class TinyAttentionModel(nn.Module):
    """Lesson 08: ``tokens (B, N) -> logits (B, N, n_classes)`` through ``num_layers`` :class:`Attention` layers.

    ``scaled=False`` leaves the scores undivided (lesson 02); ``wiring``: one of lesson 06's :data:`SKIP_KINDS`;
    ``position_scheme`` (lesson 10): ``"learned"`` (at most ``seq_len`` tokens), ``"none"``, ``"sinusoidal"``,
    ``"rope"``, or ``"alibi"`` (lesson 12: a bias on the scores under a causal mask, :meth:`attention_bias`);
    ``causal=True``: each query sees only keys at or before it (lesson 14)."""

    def __init__(self, vocab_size: int, n_classes: int, seq_len: int, *, dim: int = 32, num_heads: int = 2,
                 num_layers: int = 1, wiring: str = "identity", scaled: bool = True,
                 position_scheme: str = "learned", causal: bool = False) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("n_classes", n_classes), ("seq_len", seq_len),
                            ("dim", dim), ("num_heads", num_heads), ("num_layers", num_layers)):
            check_positive_int(name, value)
        check_wiring(wiring, "wiring")
        if position_scheme not in POSITION_SCHEMES:
            raise ValueError(f"position_scheme must be one of {list(POSITION_SCHEMES)}, got {position_scheme!r}")
        self.seq_len, self.wiring, self.scaled = seq_len, wiring, bool(scaled)
        self.position_scheme, self.causal = position_scheme, bool(causal)

        self.embed = nn.Embedding(vocab_size, dim)
        table = nn.Embedding(seq_len, dim)  # drawn for every scheme: the parameters after it start the same
        self.position = table if position_scheme == "learned" else None
        layer = RotaryAttention if position_scheme == "rope" else Attention
        self.layers = nn.ModuleList(
            layer(dim, dim, num_heads, qk_scale=None if scaled else 1.0) for _ in range(num_layers))
        self.readout = nn.Linear(dim, n_classes)

    @classmethod
    def for_task(cls, task: Task, config: "TrainConfig") -> "TinyAttentionModel":
        """The model ``config`` describes, sized for ``task``'s tokens, sequence length and classes, its
        parameters drawn as after ``torch.manual_seed(config.seed)`` (the global random state is left alone)."""
        with local_random(config.seed):
            return cls(task.vocab_size, task.n_classes, task.seq_len, dim=config.dim, num_heads=config.num_heads,
                       num_layers=config.num_layers, wiring=config.wiring, scaled=config.scaled,
                       position_scheme=config.position_scheme, causal=config.causal)

    def embed_with_positions(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N) -> h (B, N, dim)``: the token vectors plus the scheme's positions, if any."""
        h = self.embed(tokens)  # (B, N, dim)
        if self.position_scheme == "learned":
            h = h + self.position.weight[: tokens.shape[1]]  # (B, N, dim): rows 0..N-1 of the table
        elif self.position_scheme == "sinusoidal":
            h = h + sinusoidal_encoding(tokens.shape[1], h.shape[-1], dtype=h.dtype).to(h.device)  # (B, N, dim)
        return h  # "none" adds nothing; "rope" adds nothing here: its layers rotate q and k

    def forward(self, tokens: Tensor, *, return_weights: bool = False, return_intermediates: bool = False,
                keep_heads: Tensor | None = None):
        """``tokens (B, N) -> logits (B, N, n_classes)``; ``return_weights``: also the weights ``(B, L, H, N, N)``;
        ``return_intermediates``: instead each layer's ``Attention`` intermediates plus ``"hidden"`` ``(B, N, dim)``.
        ``keep_heads (L, H)`` multiplies each head's output by its entry (0 = knocked out) before the projection."""
        check_token_ids("tokens", tokens, self.embed.num_embeddings)
        if self.position_scheme == "learned" and tokens.shape[1] > self.seq_len:
            raise ValueError(f"tokens has N={tokens.shape[1]} positions but the model has {self.seq_len} "
                             f"position embeddings (shape {list(tokens.shape)})")
        shape = (len(self.layers), self.layers[0].num_heads)
        if keep_heads is not None and (not isinstance(keep_heads, Tensor) or tuple(keep_heads.shape) != shape):
            raise ValueError(f"keep_heads must be a tensor of shape (L, H) = {list(shape)}, got "
                             f"{list(keep_heads.shape) if isinstance(keep_heads, Tensor) else type(keep_heads).__name__}")
        h = self.embed_with_positions(tokens)  # (B, N, dim)
        bias = self.attention_bias(tokens.shape[1], h.dtype)  # (1, H, N, N): ALiBi's bias, causal; or None
        if bias is None and self.causal:
            bias = causal_mask(tokens.shape[1], device=tokens.device)  # (N, N): key j <= query i
        layers = []
        for index, layer in enumerate(self.layers):
            out, inter = layer(h, bias, return_intermediates=True)  # (B, N, dim)
            if keep_heads is not None:  # knock heads out: zero their outputs before the output projection
                heads = inter["heads"] * keep_heads[index].to(h.dtype)[None, :, None, None]  # (B, H, N, head_dim)
                merged = merge_heads(heads)  # (B, N, dim)
                projected = layer.proj(merged)  # (B, N, dim)
                out = projected + inter["skip"]  # (B, N, dim): walkthrough 000's skip through v
                inter = {**inter, "heads": heads, "merged": merged, "projected": projected, "out": out}
            h = next_hidden(self.wiring, h, out, inter["projected"])  # (B, N, dim): joined by the skip wiring
            layers.append({**inter, "hidden": h})
        logits = self.readout(h)  # (B, N, n_classes)
        if return_intermediates:
            return logits, layers
        if return_weights:
            return logits, torch.stack([inter["weights"] for inter in layers], dim=1)  # (B, L, H, N, N)
        return logits

    def attention_bias(self, n: int, dtype: torch.dtype = torch.float32) -> Tensor | None:
        """What every layer adds to its scores for ``n`` tokens: ``None``, or for ``"alibi"`` ALiBi's bias
        ``-slope_h * (i - j)`` with ``-inf`` above the diagonal (a causal mask), ``(1, H, n, n)``."""
        if self.position_scheme != "alibi":
            return None
        causal = mask_to_additive(causal_mask(n), dtype=torch.float64)  # (n, n): 0 or -inf
        return (alibi_bias(self.layers[0].num_heads, n) + causal)[None].to(dtype)  # (1, H, n, n)
