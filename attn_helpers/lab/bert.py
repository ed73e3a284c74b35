"""Lesson 11: a pretrained BERT-style encoder rebuilt from its weights with the series' own steps (never
``transformers``); each layer is :class:`attn_helpers.MultiHeadAttention` with the checkpoint's weights, then
``LayerNorm(x + attn_out)``, the feed-forward block and ``LayerNorm(attn_norm + feed-forward)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core import MultiHeadAttention, Traceable, check_token_ids
from .seeded import local_random

__all__ = ["BertLayer", "BertEncoder", "EncoderOutput", "PATTERNS", "attention_shares", "heads_matching"]

PATTERNS = ("[CLS]", "[SEP]", "previous", "next", "self")


class BertLayer(Traceable):
    """Lesson 11: one encoder layer, ``x (B, N, hidden) -> (B, N, hidden)``: attention, residual + LayerNorm,
    feed-forward, residual + LayerNorm; ``mask``: ``keep (B, 1, N)`` from :func:`attn_helpers.padding_mask`."""

    AXES = {**dict.fromkeys(("x", "q", "k", "v"), "batch tokens hidden"),
            **dict.fromkeys(("q_heads", "k_heads", "v_heads"), "batch H tokens head_dim"),
            **dict.fromkeys(("scores", "weights"), "batch H queries keys"), "heads": "batch H tokens head_dim",
            **dict.fromkeys(("merged", "attn_out", "attn_norm"), "batch tokens hidden"),
            "ffn_hidden": "batch tokens intermediate", "block_out": "batch tokens hidden"}

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, *, eps: float = 1e-12) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(hidden_size, num_heads)  # q_proj, k_proj, v_proj, out_proj
        self.attention_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.ffn_in = nn.Linear(hidden_size, intermediate_size)
        self.ffn_out = nn.Linear(intermediate_size, hidden_size)
        self.ffn_norm = nn.LayerNorm(hidden_size, eps=eps)

    def load_checkpoint_layer(self, params: Mapping[str, Tensor], layer: int) -> BertLayer:
        """Copy layer ``layer`` of a BERT checkpoint into this module. ``params``: name -> tensor, the names
        as in ``model.safetensors`` (``PretrainedModel.params``); a wrong shape is named with both shapes."""
        prefix = f"encoder.layer.{layer}."
        pairs = {
            self.attention.q_proj: "attention.self.query", self.attention.k_proj: "attention.self.key",
            self.attention.v_proj: "attention.self.value", self.attention.out_proj: "attention.output.dense",
            self.attention_norm: "attention.output.LayerNorm", self.ffn_in: "intermediate.dense",
            self.ffn_out: "output.dense", self.ffn_norm: "output.LayerNorm",
        }
        with torch.no_grad():
            for module, name in pairs.items():
                for part in ("weight", "bias"):
                    source = params[prefix + name + "." + part]  # the checkpoint's tensor
                    target = getattr(module, part)  # our module's parameter of the same role
                    if source.shape != target.shape:
                        raise ValueError(f"{prefix + name}.{part} has shape {list(source.shape)}, this layer needs "
                                         f"{list(target.shape)}")
                    target.copy_(source)
        return self

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``(B, N, hidden) -> (B, N, hidden)``; with ``return_intermediates`` also a dict (see ``AXES``)."""
        attn_out, att = self.attention(x, mask=mask, return_intermediates=True)  # (B, N, hidden)
        attn_norm = self.attention_norm(x + attn_out)  # residual, then LayerNorm: (B, N, hidden)
        ffn_hidden = F.gelu(self.ffn_in(attn_norm))  # (B, N, intermediate)
        block_out = self.ffn_norm(attn_norm + self.ffn_out(ffn_hidden))  # residual, then LayerNorm: (B, N, hidden)
        inter = {"x": x, **{k: att[k] for k in ("q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "weights",
                                                "heads", "merged")},
                 "attn_out": attn_out, "attn_norm": attn_norm, "ffn_hidden": ffn_hidden, "block_out": block_out}
        self.notify_observers(inter)  # shape_trace's hook
        return (block_out, inter) if return_intermediates else block_out


@dataclass(frozen=True)
class EncoderOutput:
    """Lesson 11: what :class:`BertEncoder` computed: ``hidden_states`` (the embeddings, then each layer's output,
    each ``(B, N, hidden)``), ``attentions`` (each layer's weights ``(B, H, N, N)``) and ``mask`` (the boolean
    key-padding mask ``(B, 1, N)`` that was used)."""

    hidden_states: tuple[Tensor, ...]
    attentions: tuple[Tensor, ...]
    mask: Tensor

    def stacked_attentions(self) -> Tensor:
        """Every layer's weights in one tensor ``(B, L, H, N, N)``."""
        return torch.stack(self.attentions, dim=1)


class BertEncoder(nn.Module):
    """Lesson 11: embeddings and ``num_layers`` :class:`BertLayer`; :meth:`from_pretrained` copies a
    :class:`PretrainedModel`. ``forward(input_ids (B, N), mask) -> EncoderOutput``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        h, eps = config["hidden_size"], config.get("layer_norm_eps", 1e-12)
        self.config = dict(config)
        self.word_embeddings = nn.Embedding(config["vocab_size"], h)
        self.position_embeddings = nn.Embedding(config["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], h)
        self.embedding_norm = nn.LayerNorm(h, eps=eps)
        self.layers = nn.ModuleList(
            BertLayer(h, config["num_attention_heads"], config["intermediate_size"], eps=eps)
            for _ in range(config["num_hidden_layers"]))

    @classmethod
    def from_pretrained(cls, model: Any) -> BertEncoder:
        """A new encoder holding ``model.params`` (a ``PretrainedModel``), in eval mode and its dtype.
        The random initial parameters it replaces are drawn apart from the global random state."""
        with local_random(0):
            encoder = cls(model.config).to(model.dtype)
        w = model.params
        with torch.no_grad():
            encoder.word_embeddings.weight.copy_(w["embeddings.word_embeddings.weight"])
            encoder.position_embeddings.weight.copy_(w["embeddings.position_embeddings.weight"])
            encoder.token_type_embeddings.weight.copy_(w["embeddings.token_type_embeddings.weight"])
            encoder.embedding_norm.weight.copy_(w["embeddings.LayerNorm.weight"])
            encoder.embedding_norm.bias.copy_(w["embeddings.LayerNorm.bias"])
        for index, layer in enumerate(encoder.layers):
            layer.load_checkpoint_layer(w, index)
        return encoder.eval()

    def embed(self, input_ids: Tensor) -> Tensor:
        """``(B, N)`` token ids -> ``(B, N, hidden)``: word + position + segment 0, then LayerNorm."""
        n = input_ids.shape[-1]
        positions = torch.arange(n, device=input_ids.device)  # (N,)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)  # (B, N, hidden)
        x = x + self.token_type_embeddings(torch.zeros_like(input_ids))  # one sentence: segment 0
        return self.embedding_norm(x)

    def forward(self, input_ids: Tensor, mask: Tensor | None = None) -> EncoderOutput:
        """``input_ids (B, N)``; ``mask``: either lesson 03's boolean key-padding mask ``keep (B, 1, N)``
        (``True`` = a real key), used as it is, or the tokenizer's ``attention_mask (B, N)`` of 1 (real
        token) and 0 (padding), read where its 1s are, so padding on either side is blocked. Default: no padding."""
        check_token_ids("input_ids", input_ids)
        B, N = input_ids.shape
        if N > self.position_embeddings.num_embeddings:
            raise ValueError(f"input_ids has {N} tokens; this model has positions for at most "
                             f"{self.position_embeddings.num_embeddings}")
        if mask is None:
            mask = torch.ones(B, 1, N, dtype=torch.bool, device=input_ids.device)  # (B, 1, N): every key real
        elif not isinstance(mask, Tensor):
            raise TypeError(f"mask must be a tensor, got {type(mask).__name__}")
        elif mask.dtype == torch.bool:
            if mask.shape != (B, 1, N):
                raise ValueError(f"a boolean mask must be the key-padding mask (B, 1, N) = {[B, 1, N]}, "
                                 f"got {list(mask.shape)}")
        elif mask.shape != (B, N) or mask.is_floating_point():
            raise ValueError(f"mask must be a boolean keep (B, 1, N) = {[B, 1, N]} or the tokenizer's integer "
                             f"attention_mask (B, N) = {[B, N]}, got {mask.dtype} {list(mask.shape)}")
        else:
            mask = (mask == 1)[:, None, :]  # (B, 1, N): True where the tokenizer marked a real token
        hidden = [self.embed(input_ids)]  # (B, N, hidden)
        attentions = []
        for layer in self.layers:
            out, inter = layer(hidden[-1], mask, return_intermediates=True)
            hidden.append(out)
            attentions.append(inter["weights"])  # (B, H, N, N)
        return EncoderOutput(tuple(hidden), tuple(attentions), mask)


# --- What the heads look at ---

def attention_shares(weights: Tensor, lengths: Tensor | Sequence[int] | None = None) -> Tensor:
    """Lesson 11: each head's average weight on ``[CLS]`` (key 0), ``[SEP]`` (key ``n - 1``), the previous, the next
    and its own token: ``weights (B, ..., N, N)``, ``lengths (B,)`` real tokens (default ``N``) -> ``(..., 5)``, each
    averaged over the real queries that have one. The patterns can overlap."""
    if not isinstance(weights, Tensor) or weights.ndim < 3 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be a tensor (B, ..., N, N) of square attention matrices, got shape "
                         f"{list(getattr(weights, 'shape', []))}")
    B, N = weights.shape[0], weights.shape[-1]
    lengths = [N] * B if lengths is None else [int(n) for n in torch.as_tensor(lengths).tolist()]
    if len(lengths) != B or any(not 2 <= n <= N for n in lengths):
        raise ValueError(f"lengths must give each of the {B} sequences a length in [2, {N}], got {lengths}")
    sums = torch.zeros(*weights.shape[1:-2], len(PATTERNS), dtype=torch.float64)  # (..., 5)
    counts = torch.zeros(len(PATTERNS), dtype=torch.float64)  # (5,)
    for b, n in enumerate(lengths):
        w = weights[b, ..., :n, :n].to(torch.float64)  # (..., n, n): real queries and keys only
        parts = (w[..., :, 0], w[..., :, n - 1], w.diagonal(offset=-1, dim1=-2, dim2=-1),
                 w.diagonal(offset=1, dim1=-2, dim2=-1), w.diagonal(dim1=-2, dim2=-1))
        sums += torch.stack([p.sum(dim=-1) for p in parts], dim=-1)  # (..., 5)
        counts += torch.tensor([n, n, n - 1, n - 1, n], dtype=torch.float64)
    return sums / counts  # (..., 5)


def heads_matching(shares: Tensor, threshold: float = 0.5) -> dict[str, list[tuple[int, int, float]]]:
    """Lesson 11: for each pattern, the heads whose share is at least ``threshold``: ``(layer, head, share)``, largest
    share first. ``shares``: ``(L, H, 5)`` from :func:`attention_shares`."""
    if shares.ndim != 3 or shares.shape[-1] != len(PATTERNS):
        raise ValueError(f"shares must have shape (L, H, {len(PATTERNS)}), got {list(shares.shape)}")
    found = {}
    for p, pattern in enumerate(PATTERNS):
        heads = [(layer, head, float(shares[layer, head, p])) for layer in range(shares.shape[0])
                 for head in range(shares.shape[1]) if shares[layer, head, p] >= threshold]
        found[pattern] = sorted(heads, key=lambda t: -t[2])
    return found

