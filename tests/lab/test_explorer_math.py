"""attn_helpers/lab/explorer_math.py: the math the explorers draw (mask types and conventions, weighted values,
scaled logits, the projected sentence, the heads explorer's forward pass), checked without any widget."""

from __future__ import annotations

import pytest
import torch

from attn_helpers.core import Attention, attention_scores, causal_mask, scaled_dot_product_attention
from attn_helpers.lab import (AttentionStack, MASK_CONVENTIONS, MASK_TYPES, keep_mask, masked_weights, projected_qkv, scaled_logits,
                              seeded_attention, seeded_stack, sentence_embeddings, sentence_intermediates,
                              weights_and_outputs, word_vectors)

SENTENCE = ("the", "cat", "sat", "on", "the", "mat")


# -- lesson 03: mask types and conventions ---------------------------------------------------------

def test_keep_mask_of_every_type():
    n, length = 5, 3
    assert keep_mask("none", n, length).all()
    assert torch.equal(keep_mask("causal", n, length), causal_mask(n))
    padding = keep_mask("padding", n, length)
    assert padding[:, :length].all() and not padding[:, length:].any()
    assert torch.equal(keep_mask("causal+padding", n, length), causal_mask(n) & padding)
    both = keep_mask("padding (queries too)", n, length)
    assert not both[length:].any() and both[:length, :length].all()
    assert set(MASK_TYPES) == {"none", "causal", "padding", "causal+padding", "padding (queries too)"}
    with pytest.raises(ValueError, match="kind must be one of"):
        keep_mask("diagonal", n, length)


def test_masked_weights_match_attn_helpers_and_differ_only_on_dead_rows():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(6, 4, generator=g) for _ in range(3))
    scores = attention_scores(q, k)
    keep = keep_mask("padding (queries too)", 6, 4)
    _, reference = scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    weights = {value: masked_weights(scores, keep, value) for value in MASK_CONVENTIONS}
    torch.testing.assert_close(weights["keep"], reference)
    for w in weights.values():
        torch.testing.assert_close(w[:4], reference[:4])
    assert weights["blocked"][4:].isnan().all()
    torch.testing.assert_close(weights["-1e9"][4:], torch.full((2, 6), 1 / 6))
    assert (weights["keep"][4:] == 0).all()
    with pytest.raises(ValueError, match="convention must be one of"):
        masked_weights(scores, keep, "additive")


def test_masked_weights_temperature_divides_the_scores():
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    keep = torch.ones(1, 3, dtype=torch.bool)
    torch.testing.assert_close(masked_weights(scores, keep, "keep", 0.5), torch.softmax(scores / 0.5, dim=-1))


# -- lesson 04: weighted values --------------------------------------------------------------------

def test_weights_and_outputs():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(4, 4, generator=g)
    v = torch.randn(4, 3, generator=g)
    weights, out = weights_and_outputs(scores, v, temperature=2.0, mask="causal")
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(4))
    assert (weights.triu(1) == 0).all()
    torch.testing.assert_close(out, weights @ v)
    torch.testing.assert_close(weights_and_outputs(scores, v)[0], torch.softmax(scores, dim=-1))
    with pytest.raises(ValueError, match="temperature must be positive"):
        weights_and_outputs(scores, v, temperature=0.0)
    with pytest.raises(ValueError, match="mask must be one of"):
        weights_and_outputs(scores, v, mask="padding")


# -- lesson 02: scaled logits ----------------------------------------------------------------------

def test_scaled_logits():
    q, k = torch.ones(2, 4), torch.ones(3, 4)
    assert scaled_logits(q, k).tolist() == [[2.0] * 3] * 2  # 4 / sqrt(4)
    assert scaled_logits(q, k, scaled=False, temperature=2.0).tolist() == [[2.0] * 3] * 2
    with pytest.raises(ValueError, match="temperature must be greater than 0"):
        scaled_logits(q, k, temperature=0.0)
    with pytest.raises(ValueError, match="share d_k"):
        scaled_logits(q, torch.ones(3, 5))


# -- lesson 01: the projected sentence -------------------------------------------------------------

def test_equal_words_get_equal_vectors():
    x = sentence_embeddings(SENTENCE, 7)
    assert x.shape == (1, len(SENTENCE), 7)
    assert torch.equal(x[0, 0], x[0, 4]) and not torch.equal(x[0, 0], x[0, 1])


def test_running_example_words_use_the_series_embedding_table():
    from attn_helpers import embed

    assert torch.equal(sentence_embeddings(SENTENCE, 7)[0], embed(SENTENCE, 7))


def test_seeded_attention_draws_pytorchs_default_ranges_from_its_seed_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    layer = seeded_attention(49, 64, 4, qkv_bias=True, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert isinstance(layer, Attention) and (layer.dim, layer.chan, layer.num_heads) == (49, 64, 4)
    again, other = seeded_attention(49, 64, 4, qkv_bias=True, seed=1), seeded_attention(49, 64, 4, qkv_bias=True, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(layer.parameters(), again.parameters()))
    assert not torch.equal(layer.qkv.weight, other.qkv.weight)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        built = Attention(49, 64, num_heads=4, qkv_bias=True)  # what a notebook builds after torch.manual_seed(1)
    assert all(torch.equal(a, b) for a, b in zip(layer.parameters(), built.parameters()))
    for linear in (layer.qkv, layer.proj):  # nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)), weight and bias
        bound = linear.in_features ** -0.5
        for p in (linear.weight, linear.bias):
            assert p.abs().max() <= bound and p.abs().max() > 0.9 * bound and torch.isfinite(p).all()


def test_projected_qkv_is_the_layers_fused_projection_cut_in_three():
    t = projected_qkv(SENTENCE, 10, 12, num_heads=3, qkv_bias=True, seed=1)
    layer = seeded_attention(10, 12, 3, qkv_bias=True, seed=1)
    torch.testing.assert_close(t["qkv"], layer.qkv(t["x"]).detach())
    assert [list(t[name].shape) for name in ("x", "qkv", "q", "k", "v")] == [[1, 6, 10], [1, 6, 36]] + [[1, 6, 12]] * 3
    torch.testing.assert_close(torch.cat([t["q"], t["k"], t["v"]], dim=-1), t["qkv"])
    assert int(t["params"]) == 36 * 10 + 36


# -- lesson 05: the heads explorer's forward pass --------------------------------------------------

def test_word_vectors_give_equal_words_equal_rows_of_the_chosen_spread():
    x = word_vectors(SENTENCE, SENTENCE, 400, seed=0, std=2.5)
    assert x.shape == (1, 6, 400)
    assert torch.equal(x[0, 0], x[0, 4]) and not torch.equal(x[0, 0], x[0, 1])
    assert 2.2 < float(x[0, :4].std()) < 2.8


def test_sentence_intermediates_cut_the_same_q_k_v_into_heads():
    two = sentence_intermediates(SENTENCE[:4], SENTENCE, 2, 16, 8, seed=0)
    four = sentence_intermediates(SENTENCE[:4], SENTENCE, 4, 16, 8, seed=0)
    assert list(two["weights"].shape) == [1, 2, 4, 4] and list(four["weights"].shape) == [1, 4, 4, 4]
    torch.testing.assert_close(two["qkv"], four["qkv"])  # the weights depend on chan, not on num_heads
    again = sentence_intermediates(SENTENCE[:4], SENTENCE, 2, 16, 8, seed=0)
    assert all(torch.equal(two[name], again[name]) for name in two)


# -- lesson 06: the skip explorer's stacks ---------------------------------------------------------

def test_seeded_stack_layer_0_is_the_same_for_every_depth_and_w_v_is_scaled():
    state = torch.get_rng_state()
    full, x_full = seeded_stack(4, 49, 16, 2, seed=3)
    short, x_short = seeded_stack(1, 49, 16, 2, seed=3, v_scale=2.0, tail=seeded_stack(4, 16, 16, 2, seed=3)[0])
    assert torch.equal(torch.get_rng_state(), state)
    assert full.layers[0].qkv.weight.dtype == torch.float64 and len(short.layers) == 4
    assert x_full.shape == x_short.shape == (2, 8, 49) and x_full.dtype == torch.float64
    torch.testing.assert_close(short.layers[0].qkv.weight[:32], full.layers[0].qkv.weight[:32], rtol=0, atol=0)
    torch.testing.assert_close(short.layers[0].qkv.weight[32:], 2.0 * full.layers[0].qkv.weight[32:])
    torch.testing.assert_close(short.layers[0].proj.weight, full.layers[0].proj.weight, rtol=0, atol=0)


def test_seeded_stack_draws_what_lesson_06_draws_for_the_same_seed():
    """The explorer's "random seed k" is lesson 06's seed k: the cells' manual_seed, stack, .double(), input."""
    with torch.random.fork_rng():
        torch.manual_seed(5)
        lesson = AttentionStack(32, 64, 64, 4).double()
        x_lesson = torch.randn(2, 8, 64, dtype=torch.float64)
    ours, x_ours = seeded_stack(32, 64, 64, 4, seed=5)
    torch.testing.assert_close(x_ours, x_lesson, rtol=0, atol=0)
    for a, b in zip(ours.parameters(), lesson.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)