"""Tests of attn_helpers.core.attention, checked against PyTorch's own implementations.

References: ``torch.nn.functional.scaled_dot_product_attention`` (masks: True = may attend, or
additive) and ``torch.nn.MultiheadAttention(batch_first=True)`` (masks: True = blocked).
Tensors are small and seeded; the property tests draw shapes and a seed, never the floats themselves.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F
from torch.testing import assert_close

from attn_helpers.core import (
    Attention,
    AttentionHead,
    ConcatHeadsAttention,
    MultiHeadAttention,
    attention_scores,
    blocked_to_keep,
    check_heads,
    causal_mask,
    mask_to_additive,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from attn_helpers.lab.measure import attention_entropy

PROPERTY = settings(max_examples=40, deadline=None)
DTYPES = [torch.float32, torch.float64]


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """A seeded standard-normal tensor that leaves the global RNG alone."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(requires_grad)


def random_keep_mask(*shape: int, seed: int = 0, p: float = 0.5, at_least_one: bool = True) -> torch.Tensor:
    """A boolean mask (True = may attend); with ``at_least_one`` every query row keeps one key."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, generator=g) < p
    if at_least_one:
        rows = torch.randint(shape[-1], shape[:-1], generator=g)  # one key per row that is always kept
        mask.scatter_(-1, rows[..., None], True)
    return mask


def qkv(b=(2, 3), n_q=5, n_k=6, d_k=8, d_v=7, dtype=torch.float32, seed=0, requires_grad=False):
    q = randn(*b, n_q, d_k, seed=seed, dtype=dtype, requires_grad=requires_grad)
    k = randn(*b, n_k, d_k, seed=seed + 1, dtype=dtype, requires_grad=requires_grad)
    v = randn(*b, n_k, d_v, seed=seed + 2, dtype=dtype, requires_grad=requires_grad)
    return q, k, v


# --------------------------------------------------------------------------------------------
# scaled_dot_product_attention against torch.nn.functional.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_without_mask_matches_torch(dtype):
    q, k, v = qkv(dtype=dtype)
    out = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 5, 7) and out.dtype == dtype
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_boolean_mask_true_means_may_attend_like_torch(dtype):
    q, k, v = qkv(dtype=dtype)
    mask = random_keep_mask(2, 3, 5, 6)
    assert_close(scaled_dot_product_attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_additive_float_mask_matches_torch(dtype):
    q, k, v = qkv(dtype=dtype)
    mask = randn(5, 6, seed=9, dtype=dtype)  # any float is added to the scores
    mask[0, :3] = float("-inf")
    assert_close(scaled_dot_product_attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_sdpa_float_mask_of_another_float_dtype_is_added_in_the_scores_dtype():
    q, k, v = qkv(dtype=torch.float32)
    mask64 = mask_to_additive(causal_mask(5, 6), dtype=torch.float64)
    out = scaled_dot_product_attention(q, k, v, mask64)
    assert out.dtype == torch.float32
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask64.float()))
    q, k, v = qkv(dtype=torch.float64)
    mask32 = mask_to_additive(causal_mask(5, 6))  # float32 by default
    assert_close(scaled_dot_product_attention(q, k, v, mask32), F.scaled_dot_product_attention(q, k, v, attn_mask=mask32))


@pytest.mark.parametrize(("n_q", "n_k"), [(6, 6), (4, 6), (6, 4)])
def test_causal_mask_matches_torch_is_causal(n_q, n_k):
    q, k, v = qkv(n_q=n_q, n_k=n_k)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(scaled_dot_product_attention(q, k, v, causal_mask(n_q, n_k)), expected)


def test_causal_mask_lets_query_i_see_keys_up_to_i():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 3).tolist() == [[True, False, False], [True, True, False]]
    assert causal_mask(3).dtype == torch.bool


def test_padding_mask_marks_real_keys_with_shape_b_1_n():
    mask = padding_mask([3, 1, 0], 4)
    assert mask.shape == (3, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0].tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]
    assert_close(padding_mask(torch.tensor([2, 4]), 4), padding_mask([2, 4], 4))


@pytest.mark.parametrize("dtype", DTYPES)
def test_padding_mask_matches_torch_key_padding(dtype):
    q, k, v = qkv(b=(3, 2), n_q=4, n_k=6, dtype=dtype)
    lengths = torch.tensor([6, 3, 1])
    mask = padding_mask(lengths, 6)[:, None]  # (B, 1, 1, N_k) for (B, H, N_q, N_k) scores
    assert_close(scaled_dot_product_attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    # 3-D scores take the (B, 1, N_k) mask as it is
    q3, k3, v3 = q[:, 0], k[:, 0], v[:, 0]
    mask3 = padding_mask(lengths, 6)
    assert_close(scaled_dot_product_attention(q3, k3, v3, mask3),
                 F.scaled_dot_product_attention(q3, k3, v3, attn_mask=mask3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_attention_with_seed_004_shapes_matches_torch(dtype):
    # n_Q=30 queries attend to n_K=n_V=50 keys; d_K=128, d_V=256
    q, k, v = qkv(b=(2,), n_q=30, n_k=50, d_k=128, d_v=256, dtype=dtype)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.shape == (2, 30, 256) and weights.shape == (2, 30, 50)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0, 1e-3])
def test_explicit_scale_matches_torch(scale):
    q, k, v = qkv(dtype=torch.float64)
    mask = random_keep_mask(5, 6, seed=3)
    assert_close(scaled_dot_product_attention(q, k, v, mask, scale=scale),
                 F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale))


def test_default_scale_is_one_over_sqrt_d_k():
    q, k, _ = qkv(dtype=torch.float64, d_k=16)
    assert_close(attention_scores(q, k), q @ k.transpose(-2, -1) / 4.0)
    assert_close(attention_scores(q, k, scale=0.0), torch.zeros(2, 3, 5, 6, dtype=torch.float64))


@pytest.mark.parametrize(("q_batch", "k_batch", "mask_shape"), [
    ((2, 1), (1, 3), (5, 6)),
    ((2, 3), (3,), (1, 3, 1, 6)),
    ((1,), (4, 2), (4, 1, 5, 6)),
])
def test_broadcasting_batch_dims_match_torch(q_batch, k_batch, mask_shape):
    q = randn(*q_batch, 5, 8, seed=1)
    k = randn(*k_batch, 6, 8, seed=2)
    v = randn(*k_batch, 6, 7, seed=3)
    mask = random_keep_mask(*mask_shape, seed=4)
    out = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == torch.broadcast_shapes(q_batch, k_batch) + (5, 7)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("dtype", DTYPES)
def test_returned_weights_are_softmax_rows_summing_to_one(dtype):
    q, k, v = qkv(dtype=dtype)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert weights.shape == (2, 3, 5, 6)
    assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=dtype))
    assert_close(weights, torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1))
    assert_close(out, weights @ v)


def test_scale_zero_gives_uniform_weights_not_the_default_scale():
    q, k, v = qkv(dtype=torch.float64)
    out, weights = scaled_dot_product_attention(q, k, v, scale=0.0, return_weights=True)
    assert_close(weights, torch.full((2, 3, 5, 6), 1 / 6, dtype=torch.float64))
    assert_close(out, v.mean(dim=-2, keepdim=True).expand(2, 3, 5, 7))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.0))


def fully_masked_cases(dtype):
    keep = random_keep_mask(2, 3, 5, 6, seed=5)
    keep[:, :, 2] = False  # query 2 may attend to nothing
    keep[0, 1, 4] = False  # and query 4 of one head in one batch
    return [("boolean", keep), ("additive", mask_to_additive(keep, dtype=dtype))], keep


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_row_gives_zero_output_and_weights_and_finite_gradients(dtype):
    cases, keep = fully_masked_cases(dtype)
    dead = ~keep.any(dim=-1)  # (B, H, N_q)
    for kind, mask in cases:
        q, k, v = qkv(dtype=dtype, requires_grad=True)
        out, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
        assert not out.isnan().any() and not weights.isnan().any(), kind
        assert (out[dead] == 0).all() and (weights[dead] == 0).all(), kind
        assert_close(weights[~dead].sum(-1), torch.ones(int((~dead).sum()), dtype=dtype))
        (out.square().sum() + weights.sum()).backward()
        for name, t in (("q", q), ("k", k), ("v", v)):
            assert t.grad is not None and torch.isfinite(t.grad).all(), (kind, name)
        # a blocked query row receives no gradient at all: nothing depends on it
        assert (q.grad[dead] == 0).all(), kind


def test_rows_with_keys_left_match_torch_when_other_rows_are_fully_masked():
    q, k, v = qkv(dtype=torch.float64)
    cases, keep = fully_masked_cases(torch.float64)
    dead = ~keep.any(dim=-1)
    # torch is asked with the dead rows opened up; the live rows do not depend on them
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep | dead[..., None])
    for _, mask in cases:
        assert_close(scaled_dot_product_attention(q, k, v, mask)[~dead], expected[~dead])


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_to_q_k_v_match_torch(use_mask, dtype):
    mask = random_keep_mask(5, 6, seed=7) if use_mask else None
    grad_out = randn(2, 3, 5, 7, seed=8, dtype=dtype)
    ours = qkv(dtype=dtype, requires_grad=True)
    theirs = qkv(dtype=dtype, requires_grad=True)
    (scaled_dot_product_attention(*ours, mask) * grad_out).sum().backward()
    (F.scaled_dot_product_attention(*theirs, attn_mask=mask) * grad_out).sum().backward()
    for name, a, b in zip("qkv", ours, theirs):
        assert_close(a.grad, b.grad, msg=lambda m, name=name: f"grad of {name}: {m}")


def test_dropout_is_reproducible_with_a_fixed_seed_and_changes_the_weights():
    q, k, v = qkv()
    torch.manual_seed(123)
    out1, w1 = scaled_dot_product_attention(q, k, v, dropout_p=0.5, return_weights=True)
    torch.manual_seed(123)
    out2, w2 = scaled_dot_product_attention(q, k, v, dropout_p=0.5, return_weights=True)
    assert torch.equal(out1, out2) and torch.equal(w1, w2)
    _, plain = scaled_dot_product_attention(q, k, v, return_weights=True)
    dropped = w1 == 0
    assert dropped.any() and (~dropped).any()
    assert_close(w1[~dropped], plain[~dropped] / 0.5)  # kept weights are rescaled by 1 / (1 - p)


def test_attention_entropy_is_log_n_for_uniform_and_zero_for_one_hot():
    uniform = torch.full((2, 5), 1 / 5)
    one_hot = F.one_hot(torch.tensor([1, 3]), 5).float()
    assert_close(attention_entropy(uniform), torch.full((2,), math.log(5)))
    assert_close(attention_entropy(one_hot), torch.zeros(2))


# --------------------------------------------------------------------------------------------
# Property tests over random shapes
# --------------------------------------------------------------------------------------------

batch_dims = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
sizes = st.integers(1, 7)


@PROPERTY
@given(b=batch_dims, n_q=sizes, n_k=sizes, d_k=sizes, d_v=sizes, seed=st.integers(0, 2**16),
       mask_kind=st.sampled_from(["none", "bool", "additive", "bool_broadcast"]),
       dtype=st.sampled_from(DTYPES))
def test_property_sdpa_matches_torch_for_random_shapes_and_masks(b, n_q, n_k, d_k, d_v, seed, mask_kind, dtype):
    q, k, v = qkv(b=b, n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v, dtype=dtype, seed=seed)
    mask = None
    if mask_kind == "bool":
        mask = random_keep_mask(*b, n_q, n_k, seed=seed)
    elif mask_kind == "bool_broadcast":
        mask = random_keep_mask(n_q, n_k, seed=seed)
    elif mask_kind == "additive":
        mask = mask_to_additive(random_keep_mask(*b, n_q, n_k, seed=seed), dtype=dtype)
    out, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    assert out.shape == (*b, n_q, d_v) and weights.shape == (*b, n_q, n_k)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert_close(weights.sum(-1), torch.ones(*b, n_q, dtype=dtype))


@PROPERTY
@given(b=batch_dims, n_q=sizes, n_k=sizes, d=sizes, seed=st.integers(0, 2**16), additive=st.booleans())
def test_property_fully_masked_rows_are_zero_and_other_rows_match_torch(b, n_q, n_k, d, seed, additive):
    q, k, v = qkv(b=b, n_q=n_q, n_k=n_k, d_k=d, d_v=d, dtype=torch.float64, seed=seed, requires_grad=True)
    keep = random_keep_mask(*b, n_q, n_k, seed=seed)
    g = torch.Generator().manual_seed(seed)
    dead = torch.rand(*b, n_q, generator=g) < 0.4  # rows to block entirely
    keep = keep & ~dead[..., None]
    mask = mask_to_additive(keep, dtype=torch.float64) if additive else keep
    out, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    assert (out[dead] == 0).all() and (weights[dead] == 0).all()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep | dead[..., None])
    assert_close(out[~dead], expected[~dead])
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@PROPERTY
@given(b=batch_dims, n=sizes, num_heads=st.integers(1, 4), head_dim=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_property_merge_heads_undoes_split_heads(b, n, num_heads, head_dim, seed):
    x = randn(*b, n, num_heads * head_dim, seed=seed)
    heads = split_heads(x, num_heads)
    assert heads.shape == (*b, num_heads, n, head_dim)
    assert torch.equal(merge_heads(heads), x)


@PROPERTY
@given(batch=st.integers(1, 3), n_q=sizes, n_k=sizes, num_heads=st.integers(1, 4), head_dim=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_property_tensor_method_equals_concatenated_heads(batch, n_q, n_k, num_heads, head_dim, seed):
    chan = num_heads * head_dim
    q, k, v = qkv(b=(batch,), n_q=n_q, n_k=n_k, d_k=chan, d_v=chan, dtype=torch.float64, seed=seed)
    mask = random_keep_mask(batch, 1, n_q, n_k, seed=seed)  # same for every head
    tensor_method = merge_heads(scaled_dot_product_attention(
        split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads), mask))
    per_head = [
        scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols], mask[:, 0])
        for cols in (slice(h * head_dim, (h + 1) * head_dim) for h in range(num_heads))
    ]
    assert_close(tensor_method, torch.cat(per_head, dim=-1))


@PROPERTY
@given(batch=st.integers(1, 3), n=sizes, dim=st.integers(1, 6), num_heads=st.integers(1, 4),
       head_dim=st.integers(1, 4), qkv_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_property_attention_module_equals_concatenated_heads_module(batch, n, dim, num_heads, head_dim, qkv_bias, seed):
    torch.manual_seed(seed)
    a = Attention(dim, num_heads * head_dim, num_heads, qkv_bias=qkv_bias).double()
    c = ConcatHeadsAttention.from_attention(a)
    x = randn(batch, n, dim, seed=seed, dtype=torch.float64)
    mask = random_keep_mask(batch, n, n, seed=seed)
    assert_close(c(x, mask), a(x, mask))


# --------------------------------------------------------------------------------------------
# Heads and masks
# --------------------------------------------------------------------------------------------

def test_split_heads_shape_and_head_h_holds_features_h_block():
    x = randn(2, 5, 12)
    heads = split_heads(x, 3)  # (B, H, N, head_dim)
    assert heads.shape == (2, 3, 5, 4)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., h * 4:(h + 1) * 4])
    assert merge_heads(heads).shape == (2, 5, 12)


def test_split_heads_with_one_head_only_adds_an_axis():
    x = randn(2, 5, 6)
    assert torch.equal(split_heads(x, 1), x[:, None])


@pytest.mark.parametrize("dtype", DTYPES)
def test_three_mask_conventions_give_identical_weights(dtype):
    q, k, v = qkv(dtype=dtype)
    keep = random_keep_mask(2, 3, 5, 6, seed=11)
    blocked = ~keep  # the masked_fill / nn.MultiheadAttention convention
    masks = {
        "boolean keep": keep,
        "blocked_to_keep(blocked)": blocked_to_keep(blocked),
        "additive from keep": mask_to_additive(keep, dtype=dtype),
        "additive from blocked": mask_to_additive(blocked, invert=True, dtype=dtype),
    }
    _, reference = scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    for name, mask in masks.items():
        _, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
        assert torch.equal(weights, reference), name
    # and masked_fill with True = blocked, the seed-004 way, gives the same weights
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(blocked, float("-inf"))
    assert_close(torch.softmax(scores, dim=-1), reference)


def test_mask_to_additive_puts_zero_where_allowed_and_minus_inf_where_blocked():
    keep = torch.tensor([[True, False], [False, True]])
    assert mask_to_additive(keep).tolist() == [[0.0, -math.inf], [-math.inf, 0.0]]
    assert mask_to_additive(keep, invert=True).tolist() == [[-math.inf, 0.0], [0.0, -math.inf]]
    assert mask_to_additive(keep).dtype == torch.float32
    assert mask_to_additive(keep, dtype=torch.float64).dtype == torch.float64
    assert torch.equal(blocked_to_keep(keep), ~keep)


# --------------------------------------------------------------------------------------------
# Attention (seed 000)
# --------------------------------------------------------------------------------------------

SEED_B, SEED_N, SEED_DIM, SEED_CHAN = 13, 100, 49, 64


@pytest.mark.parametrize("num_heads", [1, 4])
def test_attention_reproduces_seed_000_shapes(num_heads):
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, num_heads)
    hd = SEED_CHAN // num_heads
    out, inter = a(randn(SEED_B, SEED_N, SEED_DIM), return_intermediates=True)
    expected = {
        "x": [13, 100, 49],
        "qkv": [13, 100, 192],
        "qkv_heads": [3, 13, num_heads, 100, hd],
        "q": [13, num_heads, 100, hd],
        "k": [13, num_heads, 100, hd],
        "v": [13, num_heads, 100, hd],
        "scores": [13, num_heads, 100, 100],
        "weights": [13, num_heads, 100, 100],
        "heads": [13, num_heads, 100, hd],
        "merged": [13, 100, 64],
        "projected": [13, 100, 64],
        "skip": [13, 100, 64],
        "out": [13, 100, 64],
    }
    assert {name: list(t.shape) for name, t in inter.items()} == expected
    assert out is inter["out"]
    assert a.head_dim == hd and a.scale == hd ** -0.5


def seed_000_forward(a: Attention, x: torch.Tensor, scale: float) -> torch.Tensor:
    """Seed 000's forward pass, written out as the seed wrote it."""
    B, N, _ = x.shape
    qkv = a.qkv(x).reshape(B, N, 3, a.num_heads, a.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q * scale) @ k.transpose(-2, -1)
    attn = attn.softmax(dim=-1)
    x = (attn @ v).transpose(1, 2).reshape(B, N, a.chan)
    x = a.proj(x)
    v = v.transpose(1, 2).reshape(B, N, a.chan)
    return v + x


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("num_heads", [1, 4])
def test_attention_equals_seed_000_formula_by_hand(num_heads, qkv_bias):
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, num_heads, qkv_bias=qkv_bias)
    x = randn(3, 10, SEED_DIM, seed=1)
    assert_close(a(x), seed_000_forward(a, x, a.head_dim ** -0.5))


def test_attention_qk_scale_zero_is_honoured():
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, 4, qk_scale=0.0)
    assert a.scale == 0.0  # the seed's `qk_scale or head_dim ** -0.5` would give 0.25
    x = randn(2, 10, SEED_DIM, seed=1)
    out, inter = a(x, return_intermediates=True)
    assert_close(inter["weights"], torch.full((2, 4, 10, 10), 0.1))
    assert_close(out, seed_000_forward(a, x, 0.0))
    assert not torch.allclose(out, seed_000_forward(a, x, 0.25))


@pytest.mark.parametrize("num_heads", [1, 4])
def test_attention_heads_equal_torch_sdpa_on_its_q_k_v(num_heads):
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, num_heads, qkv_bias=True, qk_scale=0.3)
    x = randn(3, 10, SEED_DIM, seed=1)
    mask = padding_mask([10, 4, 7], 10)  # (B, 1, N)
    out, inter = a(x, mask, return_intermediates=True)
    heads = F.scaled_dot_product_attention(inter["q"], inter["k"], inter["v"], attn_mask=mask[:, None], scale=0.3)
    assert_close(inter["heads"], heads)
    merged = heads.transpose(1, 2).reshape(3, 10, SEED_CHAN)
    assert_close(out, a.proj(merged) + inter["v"].transpose(1, 2).reshape(3, 10, SEED_CHAN))


# --------------------------------------------------------------------------------------------
# ConcatHeadsAttention (seeds 001, 002)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_tensor_method_equals_concatenated_heads(num_heads, qkv_bias):
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, num_heads, qkv_bias=qkv_bias)
    c = ConcatHeadsAttention.from_attention(a)
    x = randn(3, 10, SEED_DIM, seed=1)
    out_a, inter_a = a(x, return_intermediates=True)
    out_c, inter_c = c(x, return_intermediates=True)
    assert_close(out_c, out_a)
    for name in ConcatHeadsAttention.AXES:
        assert_close(inter_c[name], inter_a[name], msg=lambda m, name=name: f"{name}: {m}")


def test_tensor_method_equals_concatenated_heads_in_seed_001_example():
    # 3 batches, 5 tokens, 4-dim embeddings, 2 heads
    torch.manual_seed(0)
    a = Attention(4, 4, 2)
    c = ConcatHeadsAttention.from_attention(a)
    x = randn(3, 5, 4, seed=1)
    assert_close(c(x), a(x))


@pytest.mark.parametrize("mask_name", ["causal (N, N)", "padding (B, 1, N)", "per batch (B, N, N)",
                                       "per head (B, H, N, N)", "additive (N, N)"])
def test_tensor_method_equals_concatenated_heads_with_masks(mask_name):
    torch.manual_seed(0)
    a = Attention(SEED_DIM, SEED_CHAN, 4, qkv_bias=True)
    c = ConcatHeadsAttention.from_attention(a)
    x = randn(3, 10, SEED_DIM, seed=1)
    mask = {
        "causal (N, N)": causal_mask(10),
        "padding (B, 1, N)": padding_mask([10, 3, 6], 10),
        "per batch (B, N, N)": random_keep_mask(3, 10, 10, seed=2),
        "per head (B, H, N, N)": random_keep_mask(3, 4, 10, 10, seed=3),
        "additive (N, N)": mask_to_additive(causal_mask(10)),
    }[mask_name]
    out_a, inter_a = a(x, mask, return_intermediates=True)
    out_c, inter_c = c(x, mask, return_intermediates=True)
    assert_close(out_c, out_a)
    assert_close(inter_c["weights"], inter_a["weights"])


def test_concat_heads_copy_keeps_dtype_and_qk_scale():
    torch.manual_seed(0)
    a = Attention(6, 8, 2, qk_scale=0.0).double()
    c = ConcatHeadsAttention.from_attention(a)
    assert c.proj.weight.dtype == torch.float64
    assert all(head.scale == 0.0 for head in c.heads)
    x = randn(2, 5, 6, seed=1, dtype=torch.float64)
    assert_close(c(x), a(x))


def test_attention_head_uses_its_own_dim():
    head = AttentionHead(dim=7, head_dim=3)  # seed 002 read a global n_emb instead of its argument
    out, weights, v = head(randn(2, 5, 7))
    assert out.shape == (2, 5, 3) and weights.shape == (2, 5, 5) and v.shape == (2, 5, 3)
    assert head.query.in_features == 7


# --------------------------------------------------------------------------------------------
# MultiHeadAttention against torch.nn.MultiheadAttention
# --------------------------------------------------------------------------------------------

TOL = {torch.float32: dict(atol=1e-6, rtol=1e-5), torch.float64: dict(atol=1e-12, rtol=1e-10)}


def torch_mha(d_model=16, num_heads=4, dtype=torch.float32, seed=0, **kwargs) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True, **kwargs).to(dtype)
    if kwargs.get("bias", True):
        with torch.no_grad():  # torch initialises the biases to zero; make them matter
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    return ref.eval()


def compare_with_torch(ref, query, key, value, *, ours_mask=None, torch_kwargs=None, dtype=torch.float32):
    ours = MultiHeadAttention.from_torch(ref)
    assert not ours.training
    with torch.no_grad():
        expected, expected_weights = ref(query, key, value, average_attn_weights=False, **(torch_kwargs or {}))
        out, inter = ours(query, key, value, ours_mask, return_intermediates=True)
    assert_close(out, expected, **TOL[dtype])
    assert_close(inter["weights"], expected_weights, **TOL[dtype])
    return out, inter


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_self_attention_matches_torch(dtype):
    ref = torch_mha(dtype=dtype)
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    out, _ = compare_with_torch(ref, x, x, x, dtype=dtype)
    assert out.shape == (3, 7, 16)
    with torch.no_grad():  # key and value default to the query
        assert torch.equal(MultiHeadAttention.from_torch(ref)(x), out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_cross_attention_with_kdim_and_vdim_matches_torch(dtype):
    ref = torch_mha(d_model=16, num_heads=2, dtype=dtype, kdim=6, vdim=10)
    assert not ref._qkv_same_embed_dim  # torch keeps separate q/k/v projection weights here
    query, key, value = randn(2, 4, 16, seed=1, dtype=dtype), randn(2, 9, 6, seed=2, dtype=dtype), randn(2, 9, 10, seed=3, dtype=dtype)
    out, inter = compare_with_torch(ref, query, key, value, dtype=dtype)
    assert out.shape == (2, 4, 16) and inter["weights"].shape == (2, 2, 4, 9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_cross_attention_with_same_widths_matches_torch(dtype):
    ref = torch_mha(dtype=dtype)
    query, memory = randn(2, 4, 16, seed=1, dtype=dtype), randn(2, 9, 16, seed=2, dtype=dtype)
    compare_with_torch(ref, query, memory, memory, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_without_bias_matches_torch(dtype):
    ref = torch_mha(dtype=dtype, bias=False)
    ours = MultiHeadAttention.from_torch(ref)
    assert all(layer.bias is None for layer in (ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj))
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    compare_with_torch(ref, x, x, x, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_boolean_attn_mask_true_means_blocked_in_torch(dtype):
    ref = torch_mha(dtype=dtype)
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    blocked = ~random_keep_mask(7, 7, seed=2)  # torch: True = blocked
    compare_with_torch(ref, x, x, x, ours_mask=blocked_to_keep(blocked), torch_kwargs=dict(attn_mask=blocked), dtype=dtype)
    # a different mask per batch and head: torch wants (B * H, N_q, N_k), we take (B, H, N_q, N_k)
    blocked = ~random_keep_mask(3, 4, 7, 7, seed=3)
    compare_with_torch(ref, x, x, x, ours_mask=blocked_to_keep(blocked),
                       torch_kwargs=dict(attn_mask=blocked.reshape(12, 7, 7)), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_causal_mask_matches_torch(dtype):
    ref = torch_mha(dtype=dtype)
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    torch_causal = nn.Transformer.generate_square_subsequent_mask(7, dtype=dtype)  # additive, -inf above diagonal
    compare_with_torch(ref, x, x, x, ours_mask=causal_mask(7),
                       torch_kwargs=dict(attn_mask=torch_causal, is_causal=True), dtype=dtype)
    compare_with_torch(ref, x, x, x, ours_mask=causal_mask(7),
                       torch_kwargs=dict(attn_mask=blocked_to_keep(causal_mask(7))), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_key_padding_mask_matches_torch(dtype):
    ref = torch_mha(dtype=dtype)
    query, memory = randn(3, 5, 16, seed=1, dtype=dtype), randn(3, 8, 16, seed=2, dtype=dtype)
    lengths = torch.tensor([8, 2, 5])
    keep = padding_mask(lengths, 8)  # (B, 1, N_k), True = real key
    key_padding_mask = ~keep[:, 0]  # torch: (B, N_k), True = padding
    compare_with_torch(ref, query, memory, memory, ours_mask=keep,
                       torch_kwargs=dict(key_padding_mask=key_padding_mask), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_causal_and_padding_masks_combine_like_torch(dtype):
    ref = torch_mha(dtype=dtype)
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    keep = causal_mask(7) & padding_mask([7, 4, 2], 7)  # (B, N_q, N_k): the module adds the head axis
    assert keep.shape == (3, 7, 7)
    compare_with_torch(ref, x, x, x, ours_mask=keep, dtype=dtype, torch_kwargs=dict(
        attn_mask=~causal_mask(7), key_padding_mask=~padding_mask([7, 4, 2], 7)[:, 0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_additive_mask_matches_torch(dtype):
    ref = torch_mha(dtype=dtype)
    x = randn(3, 7, 16, seed=1, dtype=dtype)
    additive = randn(7, 7, seed=2, dtype=dtype)
    additive[0, 3:] = float("-inf")
    compare_with_torch(ref, x, x, x, ours_mask=additive, torch_kwargs=dict(attn_mask=additive), dtype=dtype)


def test_mha_weights_averaged_over_heads_match_torch_default():
    ref = torch_mha()
    x = randn(3, 7, 16, seed=1)
    with torch.no_grad():
        _, averaged = ref(x, x, x)  # torch averages over heads unless average_attn_weights=False
        _, inter = MultiHeadAttention.from_torch(ref)(x, return_intermediates=True)
    assert averaged.shape == (3, 7, 7)
    assert_close(inter["weights"].mean(dim=1), averaged, **TOL[torch.float32])


def test_mha_scales_by_head_dim_not_d_model():
    ref = torch_mha(d_model=16, num_heads=4)
    x = randn(2, 5, 16, seed=1)
    with torch.no_grad():
        _, inter = MultiHeadAttention.from_torch(ref)(x, return_intermediates=True)
    scores = inter["q_heads"] @ inter["k_heads"].transpose(-2, -1) / math.sqrt(4)  # head_dim = 16 / 4
    assert_close(inter["scores"], scores)


@pytest.mark.parametrize("kwargs", [dict(), dict(bias=False), dict(kdim=6, vdim=10)])
def test_mha_to_torch_gives_an_equal_torch_module(kwargs):
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, **kwargs).eval()
    ref = ours.to_torch()
    assert isinstance(ref, nn.MultiheadAttention) and ref.batch_first and not ref.training
    kdim, vdim = kwargs.get("kdim", 16), kwargs.get("vdim", 16)
    query, key, value = randn(2, 4, 16, seed=1), randn(2, 6, kdim, seed=2), randn(2, 6, vdim, seed=3)
    with torch.no_grad():
        expected, _ = ref(query, key, value)
        assert_close(ours(query, key, value), expected, **TOL[torch.float32])
    back = MultiHeadAttention.from_torch(ref)
    for (name, p), (_, p_back) in zip(ours.named_parameters(), back.named_parameters()):
        assert torch.equal(p, p_back), name


def test_mha_from_torch_keeps_training_mode():
    ref = torch_mha(dropout=0.5)
    assert not MultiHeadAttention.from_torch(ref.eval()).training
    assert MultiHeadAttention.from_torch(ref.train()).training


def test_mha_from_torch_rejects_batch_first_false():
    with pytest.raises(ValueError, match=r"batch_first=True.*got batch_first=False"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4))


def test_mha_from_torch_rejects_other_modules_and_options():
    with pytest.raises(TypeError, match=r"module must be a torch.nn.MultiheadAttention, got Linear"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))
    with pytest.raises(ValueError, match=r"add_bias_kv and add_zero_attn"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, batch_first=True, add_bias_kv=True))


def test_mha_applies_dropout_only_in_training_mode():
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, dropout=0.5)
    plain = MultiHeadAttention(16, 4, dropout=0.0)
    plain.load_state_dict(ours.state_dict())
    x = randn(2, 6, 16, seed=1)
    ours.eval()
    assert torch.equal(ours(x), plain(x))
    ours.train()
    torch.manual_seed(7)
    out1, inter = ours(x, return_intermediates=True)
    torch.manual_seed(7)
    out2 = ours(x)
    assert torch.equal(out1, out2)  # reproducible with a fixed seed
    assert not torch.allclose(out1, plain(x))
    assert (inter["weights"] == 0).any()


def test_from_torch_matches_torch_in_training_mode_without_dropout():
    ref = torch_mha().train()
    ours = MultiHeadAttention.from_torch(ref)
    x = randn(2, 6, 16, seed=1)
    assert_close(ours(x), ref(x, x, x)[0], **TOL[torch.float32])


# --------------------------------------------------------------------------------------------
# Intermediates and devices
# --------------------------------------------------------------------------------------------

def all_modules():
    torch.manual_seed(0)
    return [Attention(6, 8, 2), ConcatHeadsAttention(6, 8, 2), MultiHeadAttention(8, 2, kdim=5, vdim=3)]


def module_inputs(module, device="cpu"):
    if isinstance(module, MultiHeadAttention):
        return randn(2, 4, 8, seed=1).to(device), randn(2, 6, 5, seed=2).to(device), randn(2, 6, 3, seed=3).to(device)
    return (randn(2, 4, 6, seed=1).to(device),)


@pytest.mark.parametrize("module", all_modules(), ids=lambda m: type(m).__name__)
def test_intermediates_keys_are_the_module_axes_keys_in_order(module):
    out, inter = module(*module_inputs(module), return_intermediates=True)
    assert list(inter) == list(type(module).AXES)
    assert inter["out"] is out
    for name, t in inter.items():  # every intermediate has one axis name per dimension
        assert t.ndim == len(type(module).AXES[name].split()), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_with_the_same_numbers_as_cpu():
    q, k, v = qkv()
    mask = causal_mask(5, 6, device="cuda")
    out = scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), mask)
    assert out.device.type == "cuda"
    assert_close(out.cpu(), scaled_dot_product_attention(q, k, v, causal_mask(5, 6)), atol=1e-5, rtol=1e-4)
    ref = torch_mha()
    ours = MultiHeadAttention.from_torch(ref.cuda())
    x = randn(2, 6, 16, seed=1).cuda()
    assert_close(ours(x, mask=padding_mask(torch.tensor([6, 3], device="cuda"), 6)).cpu(),
                 ref(x, x, x, key_padding_mask=torch.tensor([[False] * 6, [False] * 3 + [True] * 3], device="cuda"))[0].cpu(),
                 atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------------------------
# Bad inputs: every message names the argument and the shapes or values
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda: Attention(49, 10, num_heads=3),
    lambda: ConcatHeadsAttention(49, 10, num_heads=3),
])
def test_chan_not_divisible_by_num_heads_is_rejected(build):
    with pytest.raises(ValueError, match=r"chan=10 is not divisible by num_heads=3.*try num_heads in \[1, 2, 5, 10\]"):
        build()


def test_the_suggested_head_counts_stop_at_most():
    with pytest.raises(ValueError, match=r"try num_heads in \[1, 2, 4, 8\]\)$"):
        check_heads(64, 3, most=10)
    with pytest.raises(ValueError, match=r"try num_heads in \[1, 2, 4, 8, 16, 32, 64\]\)$"):
        check_heads(64, 3)


def test_d_model_not_divisible_by_num_heads_is_rejected():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=4"):
        MultiHeadAttention(10, 4)


def test_split_heads_rejects_width_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match=r"x.shape\[-1\]=10 \(x has shape \[2, 5, 10\]\) is not divisible by num_heads=3"):
        split_heads(randn(2, 5, 10), 3)


@pytest.mark.parametrize("num_heads", [0, -2])
@pytest.mark.parametrize("build", [
    lambda h: Attention(49, 64, num_heads=h),
    lambda h: ConcatHeadsAttention(49, 64, num_heads=h),
    lambda h: MultiHeadAttention(64, h),
    lambda h: split_heads(randn(2, 5, 64), h),
])
def test_num_heads_below_one_is_rejected(build, num_heads):
    with pytest.raises(ValueError, match=rf"num_heads must be at least 1, got {num_heads}"):
        build(num_heads)


def test_num_heads_must_be_an_int():
    with pytest.raises(TypeError, match=r"num_heads must be an int, got 2.0 \(float\)"):
        Attention(49, 64, num_heads=2.0)


def test_q_and_k_feature_sizes_must_match():
    """One check of q and k (``check_qk``), so the scores and the whole attention give the same message."""
    q, k, v = randn(2, 5, 8), randn(2, 6, 4), randn(2, 6, 7)
    for attempt in (lambda: scaled_dot_product_attention(q, k, v), lambda: attention_scores(q, k)):
        with pytest.raises(ValueError, match=r"q has shape \[2, 5, 8\] \(d_k=8\), k has shape \[2, 6, 4\] \(d_k=4\)"):
            attempt()


def test_k_and_v_lengths_must_match():
    q, k, v = randn(2, 5, 8), randn(2, 6, 8), randn(2, 4, 7)
    with pytest.raises(ValueError, match=r"k has shape \[2, 6, 8\] \(N_k=6\), v has shape \[2, 4, 7\] \(N_k=4\)"):
        scaled_dot_product_attention(q, k, v)


def test_batch_dims_that_do_not_broadcast_are_rejected():
    q, k, v = randn(2, 5, 8), randn(3, 6, 8), randn(3, 6, 7)
    with pytest.raises(ValueError, match=r"batch dimensions of q \[2, 5, 8\], k \[3, 6, 8\] and v \[3, 6, 7\] do not broadcast"):
        scaled_dot_product_attention(q, k, v)


def test_q_k_v_must_share_a_dtype():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=r"q, k and v must share one dtype, got torch.float32, torch.float64 and torch.float32"):
        scaled_dot_product_attention(q, k.double(), v)


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_integer_inputs_are_rejected(name):
    tensors = dict(zip("qkv", qkv()))
    tensors[name] = tensors[name].long()
    with pytest.raises(TypeError, match=rf"{name} must be a floating-point tensor .* got dtype torch.int64 with shape"):
        scaled_dot_product_attention(**tensors)


def test_non_tensor_input_is_rejected():
    _, k, v = qkv()
    with pytest.raises(TypeError, match=r"q must be a torch.Tensor, got list"):
        scaled_dot_product_attention([[1.0]], k, v)


@pytest.mark.parametrize("module", all_modules(), ids=lambda m: type(m).__name__)
def test_integer_module_input_is_rejected(module):
    inputs = module_inputs(module)
    name = "query" if isinstance(module, MultiHeadAttention) else "x"
    with pytest.raises(TypeError, match=rf"{name} must be a floating-point tensor .*torch.int64 with shape \[2, 4, \d+\]"):
        module(inputs[0].long(), *inputs[1:])


@pytest.mark.parametrize("module", all_modules(), ids=lambda m: type(m).__name__)
def test_module_input_with_wrong_ndim_is_rejected(module):
    inputs = module_inputs(module)
    name = "query" if isinstance(module, MultiHeadAttention) else "x"
    with pytest.raises(ValueError, match=rf"{name} must have 3 dimensions, got shape \[4, \d+\] \(2 dimensions\)"):
        module(inputs[0][0], *inputs[1:])


@pytest.mark.parametrize("module", all_modules()[:2], ids=lambda m: type(m).__name__)
def test_module_input_with_wrong_width_is_rejected(module):
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, dim=6\), got \[2, 4, 7\]"):
        module(randn(2, 4, 7))


def test_mha_rejects_wrong_widths_and_mismatched_key_value():
    mha = MultiHeadAttention(8, 2, kdim=5, vdim=3)
    query, key, value = module_inputs(mha)
    with pytest.raises(ValueError, match=r"key must have shape \(B, N, kdim=5\), got \[2, 6, 8\]"):
        mha(query, randn(2, 6, 8), value)
    with pytest.raises(ValueError, match=r"key has shape \[2, 6, 5\], value has shape \[2, 4, 3\]"):
        mha(query, key, randn(2, 4, 3))
    with pytest.raises(ValueError, match=r"query \[3, 4, 8\], key \[2, 6, 5\]"):
        mha(randn(3, 4, 8), key, value)
    with pytest.raises(ValueError, match=r"key must have 3 dimensions, got shape \[6, 5\]"):
        mha(query, key[0], value)


def test_mask_that_cannot_broadcast_to_the_scores_is_rejected():
    q, k, v = qkv(b=(2, 3), n_q=5, n_k=6)
    # a (B, N_k) key-padding mask is not silently broadcast against (B, H, N_q, N_k) scores
    with pytest.raises(ValueError, match=r"mask of shape \[2, 6\] cannot broadcast to the scores' shape \[2, 3, 5, 6\]"):
        scaled_dot_product_attention(q, k, v, torch.ones(2, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask of shape \[5, 5\] cannot broadcast to the scores' shape \[2, 3, 5, 6\]"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 5, dtype=torch.bool))
    # a mask must not grow the output either
    with pytest.raises(ValueError, match=r"mask of shape \[4, 2, 3, 5, 6\] cannot broadcast"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 2, 3, 5, 6, dtype=torch.bool))


@pytest.mark.parametrize("module", all_modules(), ids=lambda m: type(m).__name__)
def test_module_rejects_a_b_by_n_mask(module):
    # torch's key_padding_mask shape (B, N_k) is not a mask here: use padding_mask(lengths, N_k)
    with pytest.raises(ValueError, match=r"mask of shape \[2, 6\] cannot broadcast to the scores' shape \[2, 2, 4, \d\]"):
        module(*module_inputs(module), mask=torch.ones(2, 6, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_integer_mask_is_rejected(dtype):
    q, k, v = qkv()
    with pytest.raises(TypeError, match=rf"mask must be boolean .* got dtype {dtype} with shape \[5, 6\]; .*mask.bool\(\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 6, dtype=dtype))


def test_mask_must_be_a_tensor():
    with pytest.raises(TypeError, match=r"mask must be a torch.Tensor or None, got list"):
        scaled_dot_product_attention(*qkv(), [[True]])


@pytest.mark.parametrize(("lengths", "message"), [
    ([3, 7], r"lengths must lie in \[0, n=6\], got \[3, 7\]"),
    ([-1, 2], r"lengths must lie in \[0, n=6\], got \[-1, 2\]"),
    (torch.tensor([2.0, 3.0]), r"lengths must be a 1-D integer tensor \(B,\), got dtype torch.float32 shape \[2\]"),
    (torch.tensor([[2, 3]]), r"lengths must be a 1-D integer tensor \(B,\), got dtype torch.int64 shape \[1, 2\]"),
])
def test_padding_mask_rejects_bad_lengths(lengths, message):
    with pytest.raises(ValueError, match=message):
        padding_mask(lengths, 6)


def test_causal_mask_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match=r"n_q must be at least 1, got 0"):
        causal_mask(0)
    with pytest.raises(TypeError, match=r"n_k must be an int, got 2.5"):
        causal_mask(2, 2.5)


@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, 1.5])
def test_dropout_p_out_of_range_is_rejected(dropout_p):
    with pytest.raises(ValueError, match=rf"dropout_p must lie in \[0, 1\), got {dropout_p}"):
        scaled_dot_product_attention(*qkv(), dropout_p=dropout_p)
    with pytest.raises(ValueError, match=rf"dropout must lie in \[0, 1\), got {dropout_p}"):
        MultiHeadAttention(16, 4, dropout=dropout_p)


def test_mask_conversions_reject_float_masks():
    with pytest.raises(TypeError, match=r"mask must be a boolean tensor, got torch.float32"):
        blocked_to_keep(torch.zeros(2, 2))
    with pytest.raises(TypeError, match=r"mask must be a boolean tensor, got torch.float32; an additive mask"):
        mask_to_additive(torch.zeros(2, 2))


def test_from_attention_rejects_other_modules():
    with pytest.raises(TypeError, match=r"module must be an attn_helpers.Attention, got MultiHeadAttention"):
        ConcatHeadsAttention.from_attention(MultiHeadAttention(8, 2))
