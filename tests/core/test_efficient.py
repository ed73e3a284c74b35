"""attn_helpers.core.efficient (lesson 09) against PyTorch: online softmax, tiled attention, the KV cache,
grouped-query attention, and the measuring tools; plus plotting.growth_plot.

The tiled-attention tests run on the lesson's readable loop and on the tuned one of
benchmarks/tuned_tiled.py (loaded by its path: benchmarks/ is a folder of scripts, not a package)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import (
    KVCache,
    MultiHeadAttention,
    TensorMemoryTracker,
    cached_attention_step,
    causal_mask,
    fastest_seconds,
    grouped_query_attention,
    growth_exponent,
    kv_cache_bytes,
    mask_to_additive,
    measure_peak_memory,
    online_softmax,
    online_softmax_update,
    padding_mask,
    repeat_kv_heads,
    scaled_dot_product_attention,
    tiled_attention,
)

SETTINGS = settings(max_examples=40, deadline=None)


def _load_tuned():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tuned_tiled.py"
    spec = importlib.util.spec_from_file_location("tuned_tiled", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tuned_tiled_attention


tuned_tiled_attention = _load_tuned()
# Every correctness test of tiled attention runs on both loops.
BOTH_LOOPS = pytest.mark.parametrize("tiled", [tiled_attention, tuned_tiled_attention], ids=["readable", "tuned"])


def _qkv(seed: int, batch: tuple[int, ...], n_q: int, n_k: int, d_k: int, d_v: int, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, n_q, d_k, generator=g, dtype=dtype)
    k = torch.randn(*batch, n_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(*batch, n_k, d_v, generator=g, dtype=dtype)
    return q, k, v


# ------------------------------------------------------------------------------ online softmax


@SETTINGS
@given(rows=st.integers(1, 4), n=st.integers(1, 60), block=st.integers(1, 70), seed=st.integers(0, 2 ** 16))
def test_online_softmax_equals_softmax_for_any_block_size(rows, n, block, seed):
    x = 5 * torch.randn(rows, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    torch.testing.assert_close(online_softmax(x, block_size=block), torch.softmax(x, dim=-1))


def test_online_softmax_handles_minus_infinity_and_fully_blocked_rows():
    x = torch.tensor([[0.0, float("-inf"), 2.0, 1.0], [float("-inf")] * 4, [float("-inf"), float("-inf"), 3.0, 0.0]])
    out = online_softmax(x, block_size=2)  # row 2's first block is all -inf
    torch.testing.assert_close(out[[0, 2]], torch.softmax(x[[0, 2]], dim=-1))
    assert torch.equal(out[1], torch.zeros(4))


def test_online_softmax_update_rescales_the_old_sum():
    m, l = torch.tensor(2.0), torch.tensor(1.5)
    block = torch.tensor([0.5, 3.0, 1.0])
    new_m, new_l = online_softmax_update(m, l, block)
    assert new_m.item() == 3.0
    expected = 1.5 * math.exp(2.0 - 3.0) + sum(math.exp(b - 3.0) for b in (0.5, 3.0, 1.0))
    assert new_l.item() == pytest.approx(expected, rel=1e-6)


def test_online_softmax_update_names_mismatched_shapes():
    with pytest.raises(ValueError, match=r"running_max.*\[2\].*block \[3, 4\]"):
        online_softmax_update(torch.zeros(2), torch.zeros(3), torch.zeros(3, 4))


def test_online_softmax_rejects_a_bad_block_size():
    with pytest.raises(ValueError, match="block_size must be at least 1"):
        online_softmax(torch.zeros(3), block_size=0)


# ------------------------------------------------------------------------------ tiled attention

MASK_KINDS = ("none", "bool", "additive", "causal_flag", "causal_mask", "padding", "bool_and_causal_flag")


@BOTH_LOOPS
@SETTINGS
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
    n_q=st.integers(1, 40), n_k=st.integers(1, 40), d_k=st.integers(1, 8), d_v=st.integers(1, 8),
    block=st.integers(1, 17), kind=st.sampled_from(MASK_KINDS), seed=st.integers(0, 2 ** 16),
)
def test_tiled_attention_equals_pytorch_sdpa(tiled, batch, n_q, n_k, d_k, d_v, block, kind, seed):
    q, k, v = _qkv(seed, batch, n_q, n_k, d_k, d_v)
    g = torch.Generator().manual_seed(seed + 1)
    mask, is_causal, ref_mask = None, False, None
    if kind == "bool":
        mask = ref_mask = torch.rand(*batch, n_q, n_k, generator=g) > 0.4
    elif kind == "additive":
        mask = ref_mask = torch.randn(n_q, n_k, generator=g, dtype=torch.float64)
    elif kind == "causal_flag":
        is_causal, ref_mask = True, causal_mask(n_q, n_k)
    elif kind == "causal_mask":
        mask = ref_mask = causal_mask(n_q, n_k)
    elif kind == "padding":
        lengths = torch.randint(0, n_k + 1, (batch[0] if batch else 1,), generator=g)
        mask = ref_mask = padding_mask(lengths, n_k)[:, None] if len(batch) == 2 else padding_mask(lengths, n_k)[0]
    elif kind == "bool_and_causal_flag":
        mask = torch.rand(n_q, n_k, generator=g) > 0.3
        is_causal, ref_mask = True, mask & causal_mask(n_q, n_k)
    out = tiled(q, k, v, mask, block_size=block, is_causal=is_causal)
    # Our reference math gives zeros on fully blocked rows; PyTorch's SDPA does too on this version, and both are checked.
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, ref_mask))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask))


@BOTH_LOOPS
@pytest.mark.parametrize("n, block", [(300, 128), (256, 64), (97, 10), (5, 128)])
def test_float32_tiled_attention_is_within_1e_5_of_pytorch_with_and_without_causal_mask(tiled, n, block):
    q, k, v = _qkv(0, (2, 4), n, n, 32, 16, dtype=torch.float32)
    assert (tiled(q, k, v, block_size=block) - F.scaled_dot_product_attention(q, k, v)).abs().max() < 1e-5
    causal = tiled(q, k, v, block_size=block, is_causal=True)
    assert (causal - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() < 1e-5
    torch.testing.assert_close(causal, tiled(q, k, v, causal_mask(n), block_size=block))


@BOTH_LOOPS
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_running_max_moves_when_a_later_block_scores_far_higher(tiled, dtype):
    """Scores that jump by hundreds (base 2) in later key blocks: without moving the running max, exp2 of
    them would be inf. Rows also jump at different blocks, and some later blocks score far lower."""
    q, k, v = _qkv(7, (2, 3), 12, 20, 8, 5, dtype=dtype)
    growth = torch.tensor([1.0, 1.0, 1.0, 1.0, 60.0, 60.0, 60.0, 60.0, 0.01, 0.01, 0.01, 0.01,
                           200.0, 200.0, 200.0, 200.0, 3.0, 3.0, 3.0, 3.0], dtype=dtype)  # (N_k,), by block of 4
    k = k * growth[:, None]  # (2, 3, 20, 8): key block 1 scores ~60x higher, block 3 ~200x
    out = tiled(q, k, v, block_size=4)
    assert out.isfinite().all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(tiled(q, k, v, block_size=4, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True))


@BOTH_LOOPS
def test_a_row_that_first_sees_a_key_late_gets_its_own_max_even_far_below_the_others(tiled):
    """Row 0 may attend only to the last key block, where its scores are about -3200 (natural units):
    the loop must take that row's max from those scores, not from a stand-in, or exp2 underflows to 0."""
    q, k, v = _qkv(8, (2,), 6, 12, 4, 3, dtype=torch.float32)
    q[:, 0] = 40.0
    k[:, 8:] = -40.0  # row 0's scores on the last block: 4 * 40 * -40 / 2 = -3200
    keep = torch.ones(6, 12, dtype=torch.bool)
    keep[0, :8] = False
    for mask in (keep, mask_to_additive(keep, dtype=torch.float32)):
        out = tiled(q, k, v, mask, block_size=4)
        assert out.isfinite().all() and out[:, 0].abs().sum() > 0
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_tuned_query_blocks_have_block_size_rows_per_math_thread():
    """Two threads: query blocks of 2 x block_size rows (one block_size-square tile per thread), the same
    output; the peak holds one more tile of scores than at one thread."""
    q, k, v = _qkv(9, (1, 4), 300, 300, 16, 16, dtype=torch.float32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out_1 = tuned_tiled_attention(q, k, v, block_size=64)
        peak_1 = measure_peak_memory(tuned_tiled_attention, q, k, v, block_size=64)
        torch.set_num_threads(2)
        out_2 = tuned_tiled_attention(q, k, v, block_size=64)
        peak_2 = measure_peak_memory(tuned_tiled_attention, q, k, v, block_size=64)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(out_2, out_1)
    assert (out_2 - F.scaled_dot_product_attention(q, k, v)).abs().max() < 1e-5
    tile = 4 * 64 * 64 * 4  # bytes of one (heads 4, 64, 64) float32 tile of scores
    assert tile <= peak_2 - peak_1 < 2 * tile, (peak_1, peak_2)


@BOTH_LOOPS
def test_fully_masked_rows_give_zeros_with_every_mask_convention(tiled):
    q, k, v = _qkv(1, (2,), 6, 9, 4, 3)
    keep = torch.ones(6, 9, dtype=torch.bool)
    keep[2] = False
    for mask in (keep, mask_to_additive(keep, dtype=torch.float64)):
        out = tiled(q, k, v, mask, block_size=4)
        assert torch.equal(out[:, 2], torch.zeros(2, 3))
        assert not out.isnan().any()
        torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask))


@BOTH_LOOPS
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_minus_1e9_mask_gives_uniform_weights_on_a_blocked_row_like_the_plain_version(tiled, dtype):
    """As in the plain version, -1e9 is added to the row's scores. In float64 that is a constant shift (the
    row's weights are its own softmax); in float32, -1e9 + score rounds to the same number for every key
    (neighbours are 64 apart there), so the row averages the values: every tile must see that, not only the first."""
    q, k, v = _qkv(2, (2,), 4, 40, 4, 2, dtype=dtype)
    mask = torch.zeros(4, 40, dtype=dtype)
    mask[1] = -1e9
    out = tiled(q, k, v, mask, block_size=3)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask))
    if dtype == torch.float32:
        torch.testing.assert_close(out[:, 1], v.mean(dim=-2))


@BOTH_LOOPS
def test_scale_zero_is_used_as_given(tiled):
    q, k, v = _qkv(3, (1,), 5, 8, 4, 2)
    out = tiled(q, k, v, scale=0.0, block_size=3)
    torch.testing.assert_close(out, v.mean(dim=-2, keepdim=True).expand_as(out))
    torch.testing.assert_close(tiled(q, k, v, scale=0.3, block_size=3),
                               F.scaled_dot_product_attention(q, k, v, scale=0.3))


@BOTH_LOOPS
def test_broadcast_batch_dimensions_like_the_plain_version(tiled):
    q, _, _ = _qkv(4, (2, 3), 5, 5, 4, 4)
    _, k, v = _qkv(5, (1, 3), 5, 7, 4, 6)
    torch.testing.assert_close(tiled(q, k, v, block_size=2), scaled_dot_product_attention(q, k, v))


@BOTH_LOOPS
def test_tiled_attention_errors_name_the_argument_and_the_shapes(tiled):
    q, k, v = _qkv(6, (1,), 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"q and k must have the same feature size.*\[1, 4, 8\].*\[1, 4, 3\]"):
        tiled(q, k[..., :3], v)
    with pytest.raises(ValueError, match="block_size must be at least 1, got 0"):
        tiled(q, k, v, block_size=0)
    with pytest.raises(TypeError, match="block_size must be an int"):
        tiled(q, k, v, block_size=2.5)
    with pytest.raises(ValueError, match=r"mask of shape \[3, 4\] cannot broadcast"):
        tiled(q, k, v, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        tiled(q, k, v, is_causal=1)
    with pytest.raises(TypeError, match="mask must be boolean"):
        tiled(q, k, v, torch.ones(4, 4, dtype=torch.int64))


def test_readable_loop_passes_gradients_like_pytorch():
    q, k, v = _qkv(6, (2,), 9, 7, 4, 3)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    reference = [t.clone().requires_grad_() for t in (q, k, v)]
    tiled_attention(*inputs, block_size=3, is_causal=True).sum().backward()
    F.scaled_dot_product_attention(*reference, is_causal=True).sum().backward()
    for ours, theirs in zip(inputs, reference):
        torch.testing.assert_close(ours.grad, theirs.grad)


def test_tuned_loop_refuses_inputs_that_need_gradients_and_says_what_to_do():
    q, k, v = _qkv(6, (2,), 5, 5, 4, 4)
    with pytest.raises(ValueError, match=r"without gradients.*but q, v require grad.*torch.no_grad\(\)"):
        tuned_tiled_attention(q.requires_grad_(), k, v.requires_grad_())
    with torch.no_grad():  # the same inputs without autograd: the forward pass the lesson times
        torch.testing.assert_close(tuned_tiled_attention(q, k, v, block_size=2), scaled_dot_product_attention(q, k, v))


def test_tuned_loop_reuses_its_buffers_and_leaves_its_inputs_alone():
    """Every tile is written into the same scratch memory: later tiles must not change earlier outputs
    (the last tiles are narrower than the buffers), and the inputs stay as they were."""
    q, k, v = _qkv(7, (2, 3), 23, 17, 8, 5)
    before = [t.clone() for t in (q, k, v)]
    out = tuned_tiled_attention(q, k, v, block_size=6)  # 4 x 3 tiles, the last ones 5 and 5 wide
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v))
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v)))  # pure copies: exact


@BOTH_LOOPS
def test_tiled_memory_beyond_the_output_does_not_grow_with_n_and_stays_far_below_plain(tiled):
    extra, ratios = [], []
    for n in (256, 512, 1024):
        q, k, v = _qkv(7, (1, 2), n, n, 16, 16, dtype=torch.float32)
        out_bytes = q.numel() * 4
        peak = measure_peak_memory(tiled, q, k, v, block_size=64)
        plain = measure_peak_memory(scaled_dot_product_attention, q, k, v)
        extra.append(peak - out_bytes)
        ratios.append(peak / plain)
        assert plain >= 2 * n * n * 4  # at least the scores and the weights, (1, 2, n, n) floats
    assert len(set(extra)) == 1, extra  # a constant working set: one block of scores and its companions
    assert ratios[-1] < 0.1


# ------------------------------------------------------------------------------ KV cache


@SETTINGS
@given(n=st.integers(1, 16), cuts=st.lists(st.integers(1, 15), max_size=4), seed=st.integers(0, 2 ** 16))
def test_decoding_with_a_kv_cache_equals_full_causal_attention(n, cuts, seed):
    torch.manual_seed(seed)
    layer = MultiHeadAttention(12, 3).double().eval()
    x = torch.randn(2, n, 12, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x, mask=causal_mask(n))
        edges = sorted({0, n, *[c for c in cuts if c < n]})  # chunks of any size, including one token at a time
        cache = KVCache(n)
        steps = [cached_attention_step(layer, x[:, a:b], cache) for a, b in zip(edges, edges[1:])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.length == n


def test_one_token_at_a_time_equals_full_causal_attention_in_float32():
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 20, 32)
    with torch.no_grad():
        cache = KVCache(20)
        steps = torch.cat([cached_attention_step(layer, x[:, t:t + 1], cache) for t in range(20)], dim=1)
        assert (steps - layer(x, mask=causal_mask(20))).abs().max() < 1e-5


def test_kv_cache_returns_what_was_stored_and_counts_its_bytes():
    cache = KVCache(max_tokens=5)
    assert cache.nbytes == 0 and "empty" in repr(cache)
    k1, v1 = torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 6)
    k2, v2 = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 6)
    cache.append(k1, v1)
    k_all, v_all = cache.append(k2, v2)
    assert torch.equal(k_all, torch.cat([k1, k2], dim=2)) and torch.equal(v_all, torch.cat([v1, v2], dim=2))
    assert cache.length == 3
    assert cache.nbytes == 2 * 3 * 5 * (4 + 6) * 4


def test_kv_cache_bytes_matches_a_real_cache():
    layers, B, G, N, d = 3, 2, 4, 10, 8
    caches = [KVCache(N) for _ in range(layers)]
    for cache in caches:
        cache.append(torch.zeros(B, G, N, d, dtype=torch.float16), torch.zeros(B, G, N, d, dtype=torch.float16))
    assert sum(c.nbytes for c in caches) == kv_cache_bytes(num_layers=layers, num_kv_heads=G, head_dim=d,
                                                           seq_len=N, batch=B, dtype_bytes=2)


def test_kv_cache_errors_name_the_problem():
    cache = KVCache(3)
    cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"max_tokens=3.*has 2.*adds 2"):
        cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"k_new must have shape \[1, 2, 'n_new', 4\].*k_new \[1, 3, 1, 4\]"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(ValueError, match=r"k_new and v_new must agree.*\[1, 2, 1, 4\].*\[1, 2, 2, 4\]"):
        cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        KVCache(0)
    with pytest.raises(ValueError, match=r"x_new must have shape \(B, N, d_model=8\)"):
        cached_attention_step(MultiHeadAttention(8, 2), torch.zeros(1, 1, 6), KVCache(2))
    with pytest.raises(TypeError, match="layer must be an attn_helpers.MultiHeadAttention"):
        cached_attention_step(torch.nn.Linear(2, 2), torch.zeros(1, 1, 2), KVCache(2))


def test_kv_cache_bytes_formula_and_errors():
    assert kv_cache_bytes(num_layers=80, num_kv_heads=8, head_dim=128, seq_len=4096) == 2 * 80 * 8 * 4096 * 128 * 2
    with pytest.raises(ValueError, match="num_kv_heads must be at least 1, got 0"):
        kv_cache_bytes(num_layers=1, num_kv_heads=0, head_dim=1, seq_len=1)
    with pytest.raises(TypeError, match="seq_len must be an int"):
        kv_cache_bytes(num_layers=1, num_kv_heads=1, head_dim=1, seq_len=2.0)


# ------------------------------------------------------------------------------ grouped-query attention


@SETTINGS
@given(
    groups=st.sampled_from([(1, 1), (4, 1), (4, 2), (6, 3), (6, 6), (8, 2)]),
    n_q=st.integers(1, 12), n_k=st.integers(1, 12), d=st.integers(1, 6),
    kind=st.sampled_from(("none", "bool", "additive", "per_head")), seed=st.integers(0, 2 ** 16),
)
def test_grouped_query_attention_equals_pytorch_and_repeated_heads(groups, n_q, n_k, d, kind, seed):
    H, G = groups
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, H, n_q, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, G, n_k, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, G, n_k, d + 1, generator=g, dtype=torch.float64)
    mask = {"none": None, "bool": torch.rand(n_q, n_k, generator=g) > 0.3,
            "additive": torch.randn(n_q, n_k, generator=g, dtype=torch.float64),
            "per_head": torch.rand(2, H, n_q, n_k, generator=g) > 0.3}[kind]
    out = grouped_query_attention(q, k, v, mask)
    repeated = scaled_dot_product_attention(q, repeat_kv_heads(k, H), repeat_kv_heads(v, H), mask)
    torch.testing.assert_close(out, repeated)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))


def test_grouped_query_attention_makes_no_copy_of_k_or_v():
    q, k, v = torch.randn(3, 8, 20, 4), torch.randn(3, 2, 20, 4), torch.randn(3, 2, 20, 4)
    q_rows = q.reshape(3, 2, 4 * 20, 4)  # (B, G, H/G * N, d): the query heads of a group stacked as rows
    assert measure_peak_memory(grouped_query_attention, q, k, v) == measure_peak_memory(
        scaled_dot_product_attention, q_rows, k, v)  # the same tensors as one product per group


def test_repeat_kv_heads_keeps_the_copies_of_a_head_together():
    k = torch.arange(2.0).reshape(1, 2, 1, 1)  # heads 0 and 1
    assert repeat_kv_heads(k, 6).flatten().tolist() == [0, 0, 0, 1, 1, 1]


def test_grouped_query_errors_name_the_heads():
    with pytest.raises(ValueError, match=r"num_heads=6 query heads cannot be shared out evenly over 4.*\[1, 2, 3, 6\]"):
        repeat_kv_heads(torch.zeros(1, 4, 3, 2), 6)
    with pytest.raises(ValueError, match=r"num_heads=4.*over 3 key/value heads.*q has shape \[1, 4, 2, 2\]"):
        grouped_query_attention(torch.zeros(1, 4, 2, 2), torch.zeros(1, 3, 2, 2), torch.zeros(1, 3, 2, 2))
    with pytest.raises(ValueError, match=r"k and v must have the same number of key/value heads"):
        grouped_query_attention(torch.zeros(1, 4, 2, 2), torch.zeros(1, 2, 2, 2), torch.zeros(1, 1, 2, 2))


# ------------------------------------------------------------------------------ measuring


def test_tracker_counts_new_tensors_once_and_not_the_inputs_or_views():
    x = torch.zeros(1000)  # made before: not counted
    with TensorMemoryTracker() as tracker:
        y = x + 1  # 4000 bytes
        view = y[10:]  # a view: no new bytes
        z = torch.empty(500, dtype=torch.float64)  # 4000 bytes
        assert tracker.current == 8000
        del y, view
        assert tracker.current == 4000  # y's storage freed once its last view is gone
        del z
    assert tracker.peak == 8000 and tracker.current == 0


def test_measure_peak_memory_sees_the_n_by_n_matrices_of_plain_attention():
    q = torch.randn(1, 1, 64, 8)
    assert measure_peak_memory(scaled_dot_product_attention, q, q, q) >= 2 * 64 * 64 * 4
    assert measure_peak_memory(lambda: torch.empty(10, dtype=torch.float16)) == 20


def test_fastest_seconds_and_growth_exponent():
    calls = []
    assert fastest_seconds(lambda: calls.append(1), repeats=3, warmup=2) >= 0.0
    assert len(calls) == 5
    assert growth_exponent([1, 2, 4, 8], [3, 12, 48, 192]) == pytest.approx(2.0)
    assert growth_exponent([10, 100], [5, 50]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least two different sizes"):
        growth_exponent([4], [1])
    with pytest.raises(ValueError, match="must be positive"):
        growth_exponent([1, 2], [0, 1])
    with pytest.raises(ValueError, match="same length"):
        growth_exponent([1, 2], [1])
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        fastest_seconds(lambda: None, repeats=0)


def test_growth_plot_labels_each_line_with_its_slope():
    import matplotlib.pyplot as plt

    from attn_helpers.views import growth_plot

    artists = growth_plot([128, 256, 512], {"plain": [1, 4, 16], "tiled": [3, 6, 12]}, ylabel="bytes")
    assert artists["slopes"]["plain"] == pytest.approx(2.0) and artists["slopes"]["tiled"] == pytest.approx(1.0)
    assert artists["lines"]["plain"].get_label() == "plain (slope 2.00)"
    with pytest.raises(ValueError, match=r"series\['x'\] must hold 3 positive values"):
        growth_plot([1, 2, 3], {"x": [1, 2]})
    plt.close("all")


def test_matmul_flop_counter_agrees_with_pytorchs_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    from attn_helpers import count_matmul_flops

    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 9, 16)
    lin = torch.nn.Linear(7, 5)
    a, b = torch.randn(3, 4, 7), torch.randn(3, 7, 2)

    def work():
        layer(x, mask=causal_mask(9))
        lin(a)
        torch.baddbmm(torch.zeros(3, 4, 2), a, b)
        torch.addmm(torch.zeros(4, 2), a[0], b[0])

    with torch.no_grad(), FlopCounterMode(display=False) as reference:
        work()
    assert count_matmul_flops(work) == reference.get_total_flops() > 0


def test_flop_counter_counts_products_written_into_out_and_tiled_does_plains_products():
    from attn_helpers import count_matmul_flops

    a, b = torch.randn(3, 4, 7), torch.randn(3, 7, 2)
    assert count_matmul_flops(lambda: torch.bmm(a, b, out=torch.empty(3, 4, 2))) == 2 * 3 * 4 * 7 * 2
    q, k, v = _qkv(3, (2, 3), 10, 11, 4, 5, dtype=torch.float32)
    plain = 2 * 6 * (10 * 11 * 4 + 10 * 11 * 5)  # scores, then weights @ values
    assert count_matmul_flops(scaled_dot_product_attention, q, k, v) == plain
    assert count_matmul_flops(tiled_attention, q, k, v, block_size=3) == plain  # 4 x 4 tiles, the same work


def test_a_cached_step_does_one_row_of_the_work_of_rerunning_the_layer():
    from attn_helpers import count_matmul_flops

    layer = MultiHeadAttention(16, 4).eval()
    t = 20
    x = torch.randn(1, t, 16)
    cache = KVCache(t)
    with torch.no_grad():
        cached_attention_step(layer, x[:, :-1], cache)
    step = count_matmul_flops(cached_attention_step, layer, x[:, -1:], cache)
    assert count_matmul_flops(layer, x, mask=causal_mask(t)) == t * step


def test_fastest_seconds_picks_the_shortest_timed_run(monkeypatch):
    import attn_helpers.lab.measure as measure
    from attn_helpers import fastest_seconds

    durations = iter([0.5, 3.0, 1.0, 2.0])  # warm-up run untimed; then runs of 3, 1 and 2 seconds
    clock = {"now": 0.0}

    def fake_perf_counter():
        return clock["now"]

    def work():
        clock["now"] += next(durations)

    monkeypatch.setattr(measure.time, "perf_counter", fake_perf_counter)
    assert fastest_seconds(work, repeats=3, warmup=1) == 1.0
    with pytest.raises(ValueError, match="warmup must be an int >= 0"):
        fastest_seconds(work, warmup=-1)
    with pytest.raises(TypeError, match="fn must be callable"):
        fastest_seconds(3)

