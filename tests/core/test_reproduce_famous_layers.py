"""From the lessons to real code: two famous attention layers rebuilt from library pieces with copied weights.

- nanoGPT's ``CausalSelfAttention`` is :class:`Attention` without the skip through V (``skip_through_v=False``)
  and a causal mask.
- A Llama-style layer (grouped-query heads, rotary positions, a KV cache) is :class:`GroupedQueryAttention`,
  compared with the real ``transformers`` ``LlamaAttention`` with its own rotary embedding and ``DynamicCache``,
  a prefill then single-token steps with :func:`cached_attention_step`.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from transformers import DynamicCache
from transformers.models.llama.configuration_llama import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from attn_helpers import Attention, GroupedQueryAttention, KVCache, cached_attention_step, causal_mask


class NanoGPTCausalSelfAttention(nn.Module):
    """nanoGPT's ``CausalSelfAttention`` (github.com/karpathy/nanoGPT, ``model.py``; MIT license, (c) Andrej
    Karpathy), its non-flash path written out, dropout left out (0 in eval mode)."""

    def __init__(self, n_embd: int, n_head: int, bias: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)  # key, query, value projections for all heads
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)  # output projection
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.c_proj(y)


@pytest.mark.parametrize("bias", [True, False])
def test_attention_without_the_skip_through_v_is_nanogpts_causal_self_attention(bias):
    generator = torch.Generator().manual_seed(0)
    reference = NanoGPTCausalSelfAttention(n_embd=48, n_head=6, bias=bias).double()
    ours = Attention(48, 48, num_heads=6, qkv_bias=bias, proj_bias=bias, skip_through_v=False).double()
    ours.qkv.load_state_dict(reference.c_attn.state_dict())  # the weights, copied as they are
    ours.proj.load_state_dict(reference.c_proj.state_dict())
    x = torch.randn(3, 11, 48, generator=generator, dtype=torch.float64)
    # Tolerance 1e-12: both compute in float64, the same products in the same order up to the softmax.
    torch.testing.assert_close(ours(x, mask=causal_mask(11)), reference(x), rtol=0, atol=1e-12)


def llama_reference(d_model: int, num_heads: int, num_kv_heads: int, bias: bool) -> tuple[LlamaAttention, LlamaRotaryEmbedding]:
    config = LlamaConfig(hidden_size=d_model, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
                         head_dim=d_model // num_heads, attention_bias=bias, num_hidden_layers=1)
    config._attn_implementation = "eager"
    layer = LlamaAttention(config, layer_idx=0).double().eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.3)
    return layer, LlamaRotaryEmbedding(config)


def llama_step(layer: LlamaAttention, rotary: LlamaRotaryEmbedding, x: torch.Tensor, start: int,
               cache: DynamicCache) -> torch.Tensor:
    """The reference layer on ``x (B, n, d_model)`` at positions ``start .. start + n - 1``, with its cache."""
    n = x.shape[1]
    positions = torch.arange(start, start + n)[None]  # (1, n)
    keep = torch.arange(start + n)[None, :] <= positions[0, :, None]  # (n, start + n): keys up to each token's own
    additive = torch.zeros(n, start + n, dtype=x.dtype).masked_fill(~keep, float("-inf"))[None, None]  # (1, 1, n, start + n)
    out, _ = layer(x, position_embeddings=rotary(x, positions), attention_mask=additive, past_key_values=cache)
    return out


@pytest.mark.parametrize("bias", [False, True])
def test_grouped_query_attention_with_rope_and_a_cache_is_llamas_attention(bias):
    reference, rotary = llama_reference(d_model=32, num_heads=4, num_kv_heads=2, bias=bias)
    ours = GroupedQueryAttention(32, 4, 2, bias=bias).double()
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(ours, name).load_state_dict(getattr(reference, name).state_dict())
    ours.out_proj.load_state_dict(reference.o_proj.state_dict())
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    # Tolerance 1e-5: the reference computes its rotation angles and its softmax in float32.
    tol = dict(rtol=0, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask=causal_mask(9)), llama_step(reference, rotary, x, 0, DynamicCache()), **tol)
        theirs, cache = DynamicCache(), KVCache(max_tokens=9)
        steps = [(0, 5)] + [(t, t + 1) for t in range(5, 9)]  # a prefill of 5 tokens, then one token at a time
        for start, stop in steps:
            expected = llama_step(reference, rotary, x[:, start:stop], start, theirs)
            torch.testing.assert_close(cached_attention_step(ours, x[:, start:stop], cache), expected, **tol)
    assert cache.k.shape == (2, 2, 9, 8)  # the cache holds num_kv_heads = 2 heads, not 4 repeated ones
