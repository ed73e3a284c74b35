"""The position switch of lesson 08's tiny model (``position_scheme=`` in TinyAttentionModel and TrainConfig,
lesson 10): the default is lesson 08's learned table, unchanged; "none" makes the model order-blind;
"sinusoidal" adds the paper's table; "rope" rotates q and k in every layer; and the runs learn what
lesson 10 says they learn."""

from __future__ import annotations

import math

import pytest
import torch

from attn_helpers import Attention, RotaryAttention, sinusoidal_encoding
from attn_helpers.core.positions import permute_tokens
from attn_helpers.lab import (
    accuracy_by_length,
    accuracy_table,
    held_out_accuracy,
    HELD_OUT_SEED,
    IGNORE,
    initial_model,
    LookupTask,
    NoWrapPreviousTokenTask,
    order_blind_accuracy,
    POSITION_SCHEMES,
    PreviousTokenTask,
    TinyAttentionModel,
    train,
    TrainConfig,
)

TASK = PreviousTokenTask(seq_len=8, vocab_size=16)


def _tokens(n: int = 8, batch: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 16, (batch, n), generator=torch.Generator().manual_seed(seed))


def test_the_default_is_lesson_08s_learned_table():
    torch.manual_seed(0)
    default = TinyAttentionModel(16, 16, 8)
    torch.manual_seed(0)
    learned = TinyAttentionModel(16, 16, 8, position_scheme="learned")
    assert default.position_scheme == "learned" and TrainConfig().position_scheme == "learned"
    assert [name for name, _ in default.named_parameters()] == [
        "embed.weight", "position.weight", "layers.0.qkv.weight", "layers.0.proj.weight", "layers.0.proj.bias",
        "readout.weight", "readout.bias"]
    for (name, a), (_, b) in zip(default.state_dict().items(), learned.state_dict().items()):
        assert torch.equal(a, b), name
    assert "(position): Embedding(8, 32)" in repr(default)
    assert TrainConfig().describe() == "1 layer, 2 heads of 16, scaled, wiring=identity"  # what lesson 08 prints
    assert TrainConfig(position_scheme="rope").describe() == "1 layer, 2 heads of 16, scaled, wiring=identity, position_scheme=rope"


def test_schemes_start_from_the_same_weights_except_the_position_table():
    config = TrainConfig()
    states = {s: initial_model(TASK, config.replace(position_scheme=s)).state_dict() for s in POSITION_SCHEMES}
    for scheme, state in states.items():
        assert ("position.weight" in state) == (scheme == "learned")
        for name, value in states["learned"].items():
            if name != "position.weight":
                assert torch.equal(state[name], value), (scheme, name)


def test_layers_and_what_each_scheme_adds_to_the_tokens():
    tokens = _tokens()
    for scheme in POSITION_SCHEMES:
        model = initial_model(TASK, TrainConfig(position_scheme=scheme))
        layer = model.layers[0]
        assert isinstance(layer, Attention) and isinstance(layer, RotaryAttention) == (scheme == "rope")
        with torch.no_grad():
            _, layers = model(tokens, return_intermediates=True)
            h0 = layers[0]["x"]  # (B, N, dim): what the first layer sees
            embedded = model.embed(tokens)
        added = {"learned": model.position.weight if scheme == "learned" else None,
                 "sinusoidal": sinusoidal_encoding(8, 32, dtype=torch.float64)}.get(scheme)
        expected = embedded if added is None else embedded + added
        torch.testing.assert_close(h0, expected, rtol=0, atol=1e-12)


def test_without_positions_the_model_is_order_blind():
    """Shuffling the tokens shuffles the logits the same way (float64, to 1e-10)."""
    model = initial_model(TASK, TrainConfig(position_scheme="none"))
    tokens, perm = _tokens(), torch.tensor([3, 0, 7, 1, 6, 2, 5, 4])
    with torch.no_grad():
        torch.testing.assert_close(model(permute_tokens(tokens, perm)), permute_tokens(model(tokens), perm),
                                   rtol=0, atol=1e-10)
        for scheme in ("learned", "sinusoidal", "rope"):
            other = initial_model(TASK, TrainConfig(position_scheme=scheme))
            assert not torch.allclose(other(permute_tokens(tokens, perm)), permute_tokens(other(tokens), perm),
                                      atol=1e-6), scheme


def test_only_the_learned_table_refuses_longer_sequences():
    long = _tokens(n=20)
    for scheme in POSITION_SCHEMES:
        model = initial_model(TASK, TrainConfig(position_scheme=scheme))
        if scheme == "learned":
            with pytest.raises(ValueError, match="N=20 positions but the model has 8 position embeddings"):
                model(long)
        else:
            assert model(long).shape == (5, 20, 16)


def test_unknown_schemes_are_refused():
    with pytest.raises(ValueError, match=r"position_scheme must be one of \['learned', 'none', 'sinusoidal', 'rope', 'alibi'\]"):
        TrainConfig(position_scheme="xpos")
    with pytest.raises(ValueError, match="position_scheme must be one of"):
        TinyAttentionModel(16, 16, 8, position_scheme="absolute")


def test_no_positions_stays_at_the_order_blind_limit_while_the_lookup_still_trains():
    """The lesson's claim, at its sizes: previous token without positions ends near the best order-blind
    guess (never clearly above it), the learned table solves it, and the lookup trains without positions."""
    config = TrainConfig(steps=100, snapshot_every=50)
    blind = train(TASK, config.replace(position_scheme="none"))
    limit = order_blind_accuracy(*TASK.sample(256, torch.Generator().manual_seed(HELD_OUT_SEED)))
    assert 0.15 < blind.final_accuracy <= limit + 0.02
    assert train(TASK, config.replace(position_scheme="learned")).final_accuracy > 0.99
    assert train(LookupTask(), config.replace(position_scheme="none", steps=120)).final_accuracy > 0.95


def test_rope_trained_at_8_still_copies_the_previous_token_at_16():
    task = NoWrapPreviousTokenTask(seq_len=8, vocab_size=16)
    run = train(task, TrainConfig(steps=100, snapshot_every=50, position_scheme="rope"))
    assert held_out_accuracy(run.model, task) == pytest.approx(run.final_accuracy, abs=1e-12)
    results = accuracy_by_length({"rope": run}, [8, 16])
    assert results["rope"][8] > 0.99 and results["rope"][16] > 0.95
    learned = train(task, TrainConfig(steps=20, snapshot_every=10))
    assert accuracy_by_length({"learned": learned}, [8, 16])["learned"][16] is None


def test_training_with_every_scheme_is_thread_invariant_and_reproducible():
    config = TrainConfig(steps=15, snapshot_every=5)
    before = torch.get_num_threads()
    for scheme in ("sinusoidal", "rope"):
        torch.set_num_threads(2)
        try:
            a = train(TASK, config.replace(position_scheme=scheme))
        finally:
            torch.set_num_threads(before)
        b = train(TASK, config.replace(position_scheme=scheme))
        assert torch.equal(a.train_loss, b.train_loss) and torch.equal(a.held_out_accuracy, b.held_out_accuracy)
    assert torch.get_num_threads() == before


# ------------------------------------------------------------------------------ lesson 10's measurements

def test_order_blind_accuracy_is_the_commonest_other_token_by_brute_force():
    tokens, targets = PreviousTokenTask(seq_len=5, vocab_size=3).sample(40, torch.Generator().manual_seed(5))
    expected = []
    for row in tokens.tolist():
        for i in range(5):
            others = row[:i] + row[i + 1:]
            expected.append(max(others.count(t) for t in set(others)) / 4)
    assert math.isclose(order_blind_accuracy(tokens, targets), sum(expected) / len(expected), abs_tol=1e-12)
    distinct = torch.arange(6)[None]  # every token once: 1 / (N - 1)
    assert math.isclose(order_blind_accuracy(distinct, distinct), 1 / 5)
    with pytest.raises(ValueError, match="same shape"):
        order_blind_accuracy(tokens, targets[:, :3])


def test_no_wrap_task_has_no_target_at_the_first_position():
    task = NoWrapPreviousTokenTask(seq_len=6, vocab_size=5)
    tokens, targets = task.sample(10, torch.Generator().manual_seed(6))
    assert (targets[:, 0] == IGNORE).all() and torch.equal(targets[:, 1:], tokens[:, :-1])
    ideal = task.ideal_attention(tokens)
    assert ideal[:, 0].sum() == 0 and torch.equal(ideal[0, 1:], torch.eye(6)[:-1])


def test_accuracy_table_text():
    text = accuracy_table({"learned": {8: 1.0, 16: None}, "rope": {8: 0.996, 16: 0.5}},
                          reference={8: 0.25, 16: 0.2}, reference_name="guess")
    assert text.splitlines() == ["N =           8      16",
                                 "learned    1.00  no row",
                                 "rope       1.00    0.50",
                                 "guess      0.25    0.20"]
