"""The series' running example (attn_helpers.lab.example) and show_source (attn_helpers.views.source)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import SENTENCE, VOCAB, embed, embedding_table, show_source
from attn_helpers.views.source import source_text


def test_equal_words_get_equal_rows_and_different_words_different_rows():
    x = embed(SENTENCE, 49)
    assert x.shape == (len(SENTENCE), 49)
    assert torch.equal(x[0], x[4])  # the two "the"
    assert not torch.equal(x[0], x[1])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=12), st.integers(1, 64), st.integers(0, 3))
def test_embed_is_a_lookup_in_the_table(tokens, dim, seed):
    table = embedding_table(dim, seed=seed)
    x = embed(tokens, dim, seed=seed)
    assert x.shape == (len(tokens), dim)
    for row, token in zip(x, tokens):
        assert torch.equal(row, table[VOCAB.index(token)])


def test_the_same_word_is_the_same_vector_in_every_sentence():
    assert torch.equal(embed(["cat"], 8)[0], embed(["the", "mat", "cat"], 8)[2])


def test_the_table_leaves_the_global_random_state_alone():
    state = torch.random.get_rng_state()
    embedding_table(16)
    assert torch.equal(state, torch.random.get_rng_state())


def test_seeds_give_different_tables():
    assert not torch.equal(embedding_table(8, seed=0), embedding_table(8, seed=1))


@pytest.mark.parametrize("dim", [0, -3, 2.5, True])
def test_bad_dim_is_named(dim):
    with pytest.raises(ValueError, match="dim must be a positive int"):
        embedding_table(dim)


def test_unknown_words_are_named_with_the_vocabulary():
    with pytest.raises(ValueError, match=r"\['zebra'\] are not in the example's vocabulary"):
        embed(["the", "zebra"], 4)


def test_show_source_prints_the_code_without_the_docstring(capsys):
    show_source(embed)
    printed = capsys.readouterr().out
    assert printed.startswith("def embed(") and "table[token_ids(tokens)]" in printed
    assert "look every token up" not in printed
    assert "look every token up" in source_text(embed, docstring=True)


def test_source_text_of_a_function_without_a_docstring():
    def plain(x):
        return x + 1

    assert source_text(plain) == "def plain(x):\n    return x + 1"


def test_show_source_rejects_what_is_not_code():
    with pytest.raises(TypeError, match="fn must be a function or class"):
        source_text(42)


def test_sentence_intermediates_cut_the_same_q_k_v_into_heads_with_equal_words_equal_rows():
    from attn_helpers.lab import sentence_intermediates

    two = sentence_intermediates(SENTENCE[:4], SENTENCE, 2, 16, 8, seed=0)
    four = sentence_intermediates(SENTENCE[:4], SENTENCE, 4, 16, 8, seed=0)
    assert list(two["weights"].shape) == [1, 2, 4, 4] and list(four["weights"].shape) == [1, 4, 4, 4]
    torch.testing.assert_close(two["qkv"], four["qkv"])  # the weights depend on chan, not on num_heads
    assert all(torch.equal(two[name], sentence_intermediates(SENTENCE[:4], SENTENCE, 2, 16, 8, seed=0)[name])
               for name in two)
    x = sentence_intermediates(SENTENCE, SENTENCE, 1, 4, 400, seed=0, std=2.5)["x"]
    assert torch.equal(x[0, 0], x[0, 4]) and not torch.equal(x[0, 0], x[0, 1])
    assert 2.2 < float(x[0, :4].std()) < 2.8
