"""attn_helpers.lab.generation (lesson 09): the tiny causal character model, its KV-cache step, and greedy
decoding with and without the cache (same tokens; logits equal within float rounding)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import KVCache, causal_mask
from attn_helpers.lab.generation import GENERATION_TEXT, CharVocab, TinyCausalLM, generate_greedy, train_char_model


@pytest.fixture(scope="module")
def trained():
    return train_char_model(steps=60)


def _random_model(seed: int = 0, vocab: int = 11) -> TinyCausalLM:
    torch.manual_seed(seed)
    return TinyCausalLM(vocab, d_model=16, num_heads=2).eval()


def test_vocab_round_trips_and_names_unknown_characters():
    vocab = CharVocab(GENERATION_TEXT)
    ids = vocab.encode("a cat sat")
    assert ids.dtype == torch.long and ids.shape == (9,)
    assert vocab.decode(ids) == "a cat sat"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        vocab.encode("a cow")
    with pytest.raises(ValueError, match="non-empty string"):
        CharVocab("")


def test_forward_is_causal_a_later_token_never_changes_an_earlier_position():
    model = _random_model()
    tokens = torch.randint(0, 11, (2, 9))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[:, :6], model(changed)[:, :6])


def test_forward_uses_the_causal_mask_of_multi_head_attention():
    model = _random_model(1)
    tokens = torch.randint(0, 11, (1, 7))
    with torch.no_grad():
        x = model.embed(tokens)
        h = x + model.attn(x, mask=causal_mask(7))
        expected = model.readout(h + model.mlp(h))
        torch.testing.assert_close(model(tokens), expected)


def test_cached_decoding_logits_equal_a_model_built_on_torch_multihead_attention():
    """The reference: the same model with PyTorch's nn.MultiheadAttention under its own causal mask."""
    model = _random_model(3)
    torch_attn = model.attn.to_torch().eval()
    tokens = torch.randint(0, 11, (2, 10), generator=torch.Generator().manual_seed(3))
    blocked = torch.nn.Transformer.generate_square_subsequent_mask(10)  # (N, N): -inf above the diagonal
    cache = KVCache(max_tokens=10)
    with torch.no_grad():
        x = model.embed(tokens)
        h = x + torch_attn(x, x, x, attn_mask=blocked, need_weights=False)[0]
        expected = model.readout(h + model.mlp(h))  # (2, 10, V)
        stepwise = torch.cat([model.step(tokens[:, :4], cache)] +
                             [model.step(tokens[:, i:i + 1], cache) for i in range(4, 10)], dim=1)
    torch.testing.assert_close(stepwise, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 12), split=st.integers(0, 12), batch=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_step_by_step_logits_equal_the_full_forward_pass(n, split, batch, seed):
    """Prefill with the first ``split`` tokens, then one token at a time: the rows of forward()."""
    split = min(split, n - 1) if n > 1 else 0
    model = _random_model(seed % 7)
    tokens = torch.randint(0, 11, (batch, n), generator=torch.Generator().manual_seed(seed))
    cache = KVCache(max_tokens=n)
    with torch.no_grad():
        full = model(tokens)  # (batch, n, V)
        pieces = [model.step(tokens[:, :split], cache)] if split else []
        pieces += [model.step(tokens[:, i:i + 1], cache) for i in range(split, n)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == n


def test_cached_and_uncached_greedy_decoding_give_identical_tokens(trained):
    model, vocab, losses = trained
    prompt = vocab.encode("a c")[None]
    plain = generate_greedy(model, prompt, 60, use_cache=False)
    cached = generate_greedy(model, prompt, 60, use_cache=True)
    assert plain.shape == (1, 63) and torch.equal(plain[:, :3], prompt)
    assert torch.equal(plain, cached)  # integer token ids: exact


def test_greedy_decoding_agrees_for_a_batch_of_random_models():
    for seed in range(3):
        model = _random_model(seed)
        prompt = torch.randint(0, 11, (3, 4), generator=torch.Generator().manual_seed(seed))
        assert torch.equal(generate_greedy(model, prompt, 20, use_cache=False),
                           generate_greedy(model, prompt, 20, use_cache=True))


def test_greedy_picks_the_largest_logit_of_the_last_position():
    model = _random_model(2)
    prompt = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        expected = model(prompt)[0, -1].argmax()
    assert generate_greedy(model, prompt, 1, use_cache=False)[0, -1] == expected


def test_training_learns_the_text_and_is_repeatable(trained):
    model, vocab, losses = trained
    assert len(losses) == 60 and losses[-1] < 0.6 * losses[0]
    again = train_char_model(steps=60)[0]
    for p, q in zip(model.parameters(), again.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)  # seeded, one process: identical


def test_step_seconds_records_one_time_per_new_token():
    model = _random_model()
    seconds: list[float] = []
    generate_greedy(model, torch.tensor([[0, 1]]), 5, use_cache=True, step_seconds=seconds)
    assert len(seconds) == 5 and all(s > 0 for s in seconds)


def test_bad_inputs_name_the_argument():
    model = _random_model()
    with pytest.raises(TypeError, match=r"tokens must hold integer ids, got dtype torch.float32 with shape \[1, 3\]"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"tokens must have shape \(B, N\), got shape \[3\]"):
        model(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"tokens must be ids in \[0, 11\)"):
        model(torch.tensor([[0, 11]]))
    with pytest.raises(TypeError, match="tokens must be a torch.Tensor"):
        model([[0, 1]])
    with pytest.raises(ValueError, match="prompt must hold at least one token"):
        generate_greedy(model, torch.zeros(1, 0, dtype=torch.long), 3, use_cache=True)
    with pytest.raises(TypeError, match="use_cache must be True or False"):
        generate_greedy(model, torch.tensor([[0]]), 3, use_cache=1)
    with pytest.raises(TypeError, match="model must be"):
        generate_greedy(torch.nn.Linear(2, 2), torch.tensor([[0]]), 3, use_cache=True)
    with pytest.raises(ValueError, match="num_new must be at least 1"):
        generate_greedy(model, torch.tensor([[0]]), 0, use_cache=True)

