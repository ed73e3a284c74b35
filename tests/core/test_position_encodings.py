"""attn_helpers.core.positions (lesson 10): rotary embeddings agree with the ``transformers`` package's own
(Llama's ``rotate_half`` pairing and GPT-J's interleaved one), scores depend only on offsets, ``v`` is
left alone, the sinusoidal table is the paper's (as ``transformers``' DistilBERT builds it), the layers
of the series are permutation equivariant (and positions break it), and bad input is refused in words.

Tolerances: float64 comparisons to ``1e-10``; float32 comparisons to ``1e-5`` (absolute, on values of
size about 1), or as stated where ``transformers`` computes its angles in float32.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply_rotary_pos_emb
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions as gptj_sin_cos
from transformers.models.llama.configuration_llama import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply_rotary_pos_emb

import attn_helpers
from attn_helpers import Attention, MultiHeadAttention, causal_mask, scaled_dot_product_attention
from attn_helpers.core.positions import (
    LearnedPositions,
    RotaryAttention,
    apply_rope,
    equivariance_gap,
    permute_tokens,
    rope_frequencies,
    rope_pair_scores,
    sinusoidal_encoding,
)

SETTINGS = settings(max_examples=40, deadline=None)
F64 = dict(rtol=0, atol=1e-10)
F32 = dict(rtol=0, atol=1e-5)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _llama_rotary(head_dim: int, base: float = 10_000.0) -> LlamaRotaryEmbedding:
    config = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)


shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 12), st.integers(1, 16).map(lambda h: 2 * h))


# ------------------------------------------------------------------------------ against transformers

@SETTINGS
@given(shape=shapes, start=st.integers(0, 5000), seed=st.integers(0, 2 ** 16), base=st.sampled_from([100.0, 10_000.0]))
def test_half_pairing_matches_llama_rotate_half_in_float64(shape, start, seed, base):
    """Same inv_freq (Llama's), same rotate_half formula: identical to float64 rounding."""
    B, H, N, d = shape
    g = _gen(seed)
    q, k = torch.randn(B, H, N, d, generator=g, dtype=torch.float64), torch.randn(B, H, N, d, generator=g, dtype=torch.float64)
    position_ids = start + torch.randperm(N, generator=g)[None].expand(B, N)  # (B, N), any order
    inv_freq = _llama_rotary(d, base).inv_freq.to(torch.float64)
    torch.testing.assert_close(inv_freq, rope_frequencies(d, base=base), rtol=1e-6, atol=0)  # float32 in transformers
    freqs = position_ids[..., None].to(torch.float64) * rope_frequencies(d, base=base)  # (B, N, d/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # Llama's layout: (B, N, d)
    q_ref, k_ref = llama_apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())  # unsqueeze_dim=1: heads
    torch.testing.assert_close(apply_rope(q, position_ids[:, None], base=base), q_ref, **F64)
    torch.testing.assert_close(apply_rope(k, position_ids[:, None], base=base), k_ref, **F64)


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_half_pairing_matches_llama_rotary_embedding_end_to_end_in_float32(shape, seed):
    """LlamaRotaryEmbedding computes its angles in float32; positions below 512 keep the difference
    below 1e-4 (float32 rounding of position × inv_freq, times values of size about 3)."""
    B, H, N, d = shape
    g = _gen(seed)
    q, k = torch.randn(B, H, N, d, generator=g), torch.randn(B, H, N, d, generator=g)
    position_ids = torch.randint(0, 512, (B, N), generator=g)
    cos, sin = _llama_rotary(d)(q, position_ids)  # (B, N, d) each
    q_ref, k_ref = llama_apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_rope(q, position_ids[:, None]), q_ref, rtol=0, atol=1e-4)
    torch.testing.assert_close(apply_rope(k, position_ids[:, None]), k_ref, rtol=0, atol=1e-4)


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_interleaved_pairing_matches_gptj_rotate_every_two(shape, seed):
    """GPT-J pairs features 2i and 2i+1 (rotate_every_two); its tensors are (B, N, H, head_dim)."""
    B, H, N, d = shape
    g = _gen(seed)
    x = torch.randn(B, N, H, d, generator=g, dtype=torch.float64)
    position_ids = torch.randint(0, 300, (B, N), generator=g)
    table = gptj_sin_cos(300, d).to(torch.float64)  # (positions, d): sin then cos, float32 angles
    sin, cos = table[position_ids].chunk(2, dim=-1)  # (B, N, d/2) each
    expected = gptj_apply_rotary_pos_emb(x, sin, cos)  # (B, N, H, d)
    got = apply_rope(x.transpose(1, 2), position_ids[:, None], pairing="interleaved").transpose(1, 2)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)  # GPT-J's angles are float32


def test_the_two_pairings_differ_only_by_the_order_of_the_features():
    x = torch.randn(3, 5, 8, generator=_gen(1), dtype=torch.float64)
    to_half = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])  # 0 2 4 6 1 3 5 7
    positions = torch.arange(5)
    half = apply_rope(x[..., to_half], positions)  # interleaved features laid out as halves
    torch.testing.assert_close(half, apply_rope(x, positions, pairing="interleaved")[..., to_half], **F64)
    assert not torch.allclose(apply_rope(x, positions), apply_rope(x, positions, pairing="interleaved"))


def test_sinusoidal_table_matches_distilbert():
    for n, dim in ((50, 32), (7, 2), (128, 64)):
        expected = create_sinusoidal_embeddings(n, dim, torch.empty(n, dim))
        torch.testing.assert_close(sinusoidal_encoding(n, dim), expected, **F32)


# ------------------------------------------------------------------------------ the properties the lesson prints

@SETTINGS
@given(d=st.integers(1, 16).map(lambda h: 2 * h), m=st.integers(0, 3000), n=st.integers(0, 3000),
       shift=st.integers(0, 3000), seed=st.integers(0, 2 ** 16), pairing=st.sampled_from(["half", "interleaved"]))
def test_rotated_scores_depend_only_on_the_offset(d, m, n, shift, seed, pairing):
    """q_m · k_n = q_(m+s) · k_(n+s), to 1e-9 in float64 (positions up to 6000)."""
    g = _gen(seed)
    q, k = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)

    def score(a: int, b: int) -> float:
        return float(apply_rope(q[None], [a], pairing=pairing)[0] @ apply_rope(k[None], [b], pairing=pairing)[0])

    assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=0, abs_tol=1e-9)


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2 ** 16), pairing=st.sampled_from(["half", "interleaved"]))
def test_rotation_keeps_every_pair_length_and_position_zero_changes_nothing(shape, seed, pairing):
    B, H, N, d = shape
    x = torch.randn(B, H, N, d, generator=_gen(seed), dtype=torch.float64)
    positions = torch.randint(0, 10_000, (N,), generator=_gen(seed + 1))
    rotated = apply_rope(x, positions, pairing=pairing)
    assert rotated.shape == x.shape and rotated.dtype == x.dtype
    if pairing == "half":
        lengths = lambda t: t[..., : d // 2] ** 2 + t[..., d // 2:] ** 2  # noqa: E731
    else:
        lengths = lambda t: t[..., 0::2] ** 2 + t[..., 1::2] ** 2  # noqa: E731
    torch.testing.assert_close(lengths(rotated), lengths(x), **F64)
    torch.testing.assert_close(apply_rope(x, torch.zeros(N, dtype=torch.int64), pairing=pairing), x, **F64)


def test_pair_scores_sum_to_the_rotated_dot_product_at_every_offset():
    q, k = torch.randn(16, generator=_gen(2), dtype=torch.float64), torch.randn(16, generator=_gen(3), dtype=torch.float64)
    offsets = torch.arange(-20, 21)
    for pairing in ("half", "interleaved"):
        per_pair = rope_pair_scores(q, k, offsets, pairing=pairing)  # (41, 8)
        assert per_pair.shape == (41, 8)
        for offset, row in zip(offsets.tolist(), per_pair):
            m, n = max(offset, 0) + 5, max(-offset, 0) + 5
            full = apply_rope(q[None], [m], pairing=pairing)[0] @ apply_rope(k[None], [n], pairing=pairing)[0]
            assert math.isclose(float(row.sum()), float(full), abs_tol=1e-10)
    # pair i contributes |q_i| |k_i| cos(offset θ_i + phase): the slowest pair can move by at most
    # |q_7| |k_7| · 40 θ_7 over 40 offsets, the fastest sweeps its whole range
    per_pair = rope_pair_scores(q, k, offsets)
    lengths = (q[:8] ** 2 + q[8:] ** 2).sqrt() * (k[:8] ** 2 + k[8:] ** 2).sqrt()  # (8,)
    theta = rope_frequencies(16)
    slow, fast = per_pair[:, -1], per_pair[:, 0]
    assert float(slow.max() - slow.min()) <= float(lengths[-1] * 40 * theta[-1]) + 1e-12
    assert float(fast.max() - fast.min()) > 1.9 * float(lengths[0]) * 0.95
    assert float(per_pair.abs().max(dim=0).values.sub(lengths).max()) <= 1e-12


def test_sinusoidal_dot_products_depend_only_on_the_offset():
    table = sinusoidal_encoding(200, 32, dtype=torch.float64)  # (200, 32)
    gram = table @ table.T  # (200, 200)
    for offset in (0, 1, 5, 37):
        diagonal = torch.diagonal(gram, offset)
        torch.testing.assert_close(diagonal, torch.full_like(diagonal, float(diagonal[0])), rtol=0, atol=1e-9)
    torch.testing.assert_close(table.norm(dim=-1), torch.full((200,), 4.0, dtype=torch.float64), **F64)  # sqrt(32/2)


# ------------------------------------------------------------------------------ the layer

def test_rotary_attention_rotates_q_and_k_after_the_head_split_and_leaves_v_alone():
    torch.manual_seed(0)
    layer = RotaryAttention(12, 16, num_heads=2).double()
    x = torch.randn(3, 7, 12, dtype=torch.float64)
    out, inter = layer(x, return_intermediates=True)
    assert out.shape == (3, 7, 16) and inter["q_rot"].shape == (3, 2, 7, 8)
    positions = torch.arange(7)
    torch.testing.assert_close(inter["q_rot"], apply_rope(inter["q"], positions), **F64)
    torch.testing.assert_close(inter["k_rot"], apply_rope(inter["k"], positions), **F64)
    q, k, v = layer.qkv(x).reshape(3, 7, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
    torch.testing.assert_close(inter["v"], v, **F64)  # v as projected: never rotated
    heads = scaled_dot_product_attention(apply_rope(q, positions), apply_rope(k, positions), v)
    torch.testing.assert_close(inter["heads"], heads, **F64)
    assert set(RotaryAttention.AXES) == set(inter)


def test_rotary_attention_at_position_zero_everywhere_is_the_plain_layer():
    torch.manual_seed(1)
    rotary = RotaryAttention(10, 8, num_heads=2)
    plain = Attention(10, 8, num_heads=2)
    plain.load_state_dict(rotary.state_dict())
    x = torch.randn(2, 6, 10)
    torch.testing.assert_close(rotary(x, positions=torch.zeros(6, dtype=torch.int64)), plain(x), **F32)
    torch.testing.assert_close(rotary(x, causal_mask(6), positions=torch.zeros(6, dtype=torch.int64)),
                               plain(x, causal_mask(6)), **F32)
    assert not torch.allclose(rotary(x), plain(x), atol=1e-3)


def test_rotary_attention_scores_are_unchanged_by_shifting_every_position():
    torch.manual_seed(2)
    layer = RotaryAttention(8, 8, num_heads=2).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    _, at_zero = layer(x, return_intermediates=True)
    _, shifted = layer(x, positions=torch.arange(5) + 1000, return_intermediates=True)
    torch.testing.assert_close(shifted["scores"], at_zero["scores"], rtol=0, atol=1e-9)
    torch.testing.assert_close(shifted["out"], at_zero["out"], rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------ order-blindness

@SETTINGS
@given(B=st.integers(1, 3), N=st.integers(2, 12), heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2 ** 16))
def test_attention_and_multi_head_attention_are_permutation_equivariant(B, N, heads, seed):
    """Shuffling the tokens shuffles the outputs the same way, to 1e-5 in float32."""
    torch.manual_seed(seed)
    x = torch.randn(B, N, 12)
    perm = torch.randperm(N)
    assert equivariance_gap(Attention(12, 16, heads), x, perm) < 1e-5
    assert equivariance_gap(MultiHeadAttention(12, heads), x, perm) < 1e-5


def test_positions_and_the_causal_mask_break_equivariance():
    torch.manual_seed(3)
    x = torch.randn(2, 6, 8)
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    layer = Attention(8, 8, 2)
    assert equivariance_gap(lambda t: layer(t, causal_mask(6)), x, perm) > 0.01
    assert equivariance_gap(RotaryAttention(8, 8, 2), x, perm) > 0.01
    table = LearnedPositions(6, 8)
    assert equivariance_gap(lambda t: layer(t + table(6)), x, perm) > 0.01
    assert equivariance_gap(lambda t: layer(t + sinusoidal_encoding(6, 8)), x, perm) > 0.01
    # with a causal mask the last token still sees its prefix as a set: shuffling the prefix changes nothing there
    prefix_shuffle = torch.tensor([3, 1, 4, 0, 2, 5])
    with torch.no_grad():
        torch.testing.assert_close(layer(x[:, prefix_shuffle], causal_mask(6))[:, -1], layer(x, causal_mask(6))[:, -1], **F32)


def test_permute_tokens():
    x = torch.arange(12.0).reshape(1, 4, 3)
    assert permute_tokens(x, [2, 0, 3, 1])[0, :, 0].tolist() == [6.0, 0.0, 9.0, 3.0]
    with pytest.raises(ValueError, match=r"perm must be a permutation of 0..3"):
        permute_tokens(x, [0, 0, 1, 2])
    with pytest.raises(ValueError, match=r"perm must be a permutation of 0..3"):
        permute_tokens(x, [0, 1, 2])


# ------------------------------------------------------------------------------ absolute positions

def test_learned_positions_have_exactly_one_row_per_position():
    torch.manual_seed(4)
    table = LearnedPositions(8, 4)
    assert table(8).shape == (8, 4) and table(torch.tensor([[0, 7]])).shape == (1, 2, 4)
    torch.testing.assert_close(table(torch.arange(3)), table.weight[:3], **F32)
    with pytest.raises(IndexError, match=r"no row for position 8: this table has 8 rows, for positions 0..7"):
        table(torch.tensor([3, 8]))
    with pytest.raises(IndexError, match=r"no row for positions -1, 8, 9, 10, \.\.\.: this table has 8 rows"):
        table(torch.tensor([-1, 2, 8, 9, 10, 11]))
    with pytest.raises(IndexError, match=r"no row for positions 8..15"):
        table(16)
    with pytest.raises(TypeError, match="positions must be an int or an integer tensor"):
        table(torch.tensor([0.5]))
    assert "num_positions=8, dim=4" in repr(table)


# ------------------------------------------------------------------------------ bad input

def test_bad_input_is_refused_with_a_clear_message():
    x = torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match=r"head_dim must be an even number .* got 7 \(the last dimension of x, shape \[2, 5, 7\]\)"):
        apply_rope(torch.randn(2, 5, 7), torch.arange(5))
    with pytest.raises(ValueError, match=r"positions must be token indices >= 0, got a smallest position of -1"):
        apply_rope(x, torch.arange(-1, 4))
    with pytest.raises(ValueError, match=r"x has N=5 rows .* positions has shape \[4\]"):
        apply_rope(x, torch.arange(4))
    with pytest.raises(ValueError, match=r"do not broadcast to x's rows \[2, 4, 5\]"):
        apply_rope(torch.randn(2, 4, 5, 6), torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match="positions must hold integers"):
        apply_rope(x, torch.arange(5.0))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        apply_rope(torch.ones(2, 5, 6, dtype=torch.int64), torch.arange(5))
    with pytest.raises(ValueError, match="pairing must be one of"):
        apply_rope(x, torch.arange(5), pairing="odd-even")
    with pytest.raises(ValueError, match="base must be a number greater than 1"):
        apply_rope(x, torch.arange(5), base=1.0)
    with pytest.raises(ValueError, match="one position per row"):
        apply_rope(x, torch.tensor(3))
    with pytest.raises(ValueError, match=r"dim must be an even number"):
        sinusoidal_encoding(4, 5)
    with pytest.raises(ValueError, match=r"head_dim must be an even number .*chan=12 / num_heads=4"):
        RotaryAttention(8, 12, num_heads=4)  # head_dim 3
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, dim=8\)"):
        RotaryAttention(8, 8, 2)(torch.randn(2, 3, 5))


def test_the_top_level_package_exports_the_lesson_names():
    for name in ("apply_rope", "sinusoidal_encoding", "LearnedPositions", "RotaryAttention", "equivariance_gap",
                 "permute_tokens", "rope_frequencies"):
        assert getattr(attn_helpers, name) is getattr(attn_helpers.core.positions, name)
        assert name in attn_helpers.__all__
