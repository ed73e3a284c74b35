"""attn_helpers.lab (lesson 14): the induction task puts its copies where it says and scores only the repeated
part, the two ideal patterns and scores measure what they say, and, on training seeds the lesson does not print,
the circuit forms (best previous-token and induction scores at least 0.5), knockouts raise the repeated part's
loss, and without positions no previous-token head forms (the lesson's checkers: tests/checks).

The trained models are cached in one module-scoped fixture (three runs of the lesson's settings)."""

from __future__ import annotations

import math


import pytest
import torch
from torch.nn import functional as F

from attn_helpers.lab import (
    IGNORE,
    INDUCTION_CONFIG,
    InductionTask,
    TrainConfig,
    circuit_table,
    find_circuit,
    induction_pattern,
    induction_scores,
    induction_task,
    initial_model,
    layer_weights,
    loss_drop_step,
    pattern_match,
    previous_token_pattern,
    previous_token_scores,
    repeat_spans,
    repeated_loss,
    repeated_part,
    train_induction_model,
)

UNPRINTED_SEEDS = (5, 6)  # the lesson prints seeds 0-4


@pytest.fixture(scope="module")
def trained():
    """``{name: (model, run)}``: the lesson's settings at two unprinted seeds, and without positions."""
    runs = {f"rope {seed}": train_induction_model(seed=seed) for seed in UNPRINTED_SEEDS}
    runs["none"] = train_induction_model(seed=UNPRINTED_SEEDS[0],
                                         config=INDUCTION_CONFIG.replace(position_scheme="none"))
    return runs


@pytest.fixture(scope="module")
def probe():
    return induction_task(128, seed=2024)


# -- the task --------------------------------------------------------------------------------------

def test_task_repeats_a_segment_and_scores_only_the_repeated_part():
    task = InductionTask()
    tokens, targets = task.sample(400, torch.Generator().manual_seed(1))  # (B, N)
    first, second, length = repeat_spans(tokens)
    assert ((length >= task.min_repeat) & (length <= task.max_repeat)).all()
    assert (second >= first + length).all() and (second + length <= task.seq_len).all()
    for row, f, s, n in zip(tokens, first.tolist(), second.tolist(), length.tolist()):
        assert torch.equal(row[f:f + n], row[s:s + n])
    scored = targets != IGNORE
    assert torch.equal(scored, repeated_part(tokens))
    nxt = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)
    assert torch.equal(targets[scored], nxt[scored])


def test_induction_task_is_seeded_and_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    a, b = induction_task(5, seed=3), induction_task(5, seed=3)
    assert torch.equal(a, b) and a.shape == (5, 32) and a.dtype == torch.int64
    assert torch.equal(state, torch.get_rng_state())
    with pytest.raises(ValueError, match="num_sequences"):
        induction_task(0, seed=1)


def test_bad_task_sizes_are_refused():
    with pytest.raises(ValueError, match="max_repeat"):
        InductionTask(seq_len=10, max_repeat=6)


# -- patterns and scores ---------------------------------------------------------------------------

def test_patterns_by_hand():
    tokens = torch.tensor([[5, 7, 5, 7, 9]])
    assert torch.equal(previous_token_pattern(tokens)[0], torch.ones(4).diag(-1))
    expected = torch.zeros(5, 5)
    expected[2, 1] = 1.0  # token 5 at 2: earlier copy at 0, the token after it at 1
    expected[3, 2] = 1.0  # token 7 at 3: earlier copy at 1 -> key 2
    assert torch.equal(induction_pattern(tokens)[0], expected)


def test_scores_are_the_pattern_match_of_the_weights(probe):
    task = InductionTask()
    model = initial_model(task, INDUCTION_CONFIG).eval()
    with torch.no_grad():
        _, weights = model(probe, return_weights=True)  # (B, L, H, N, N)
    torch.testing.assert_close(induction_scores(model, probe), pattern_match(weights, induction_pattern(probe).double()))
    torch.testing.assert_close(previous_token_scores(model, probe),
                               pattern_match(weights, previous_token_pattern(probe).double()))
    assert induction_scores(model, probe).shape == (2, 2)


def test_layer_weights_with_one_input_are_the_layers_own(probe):
    model = initial_model(InductionTask(), INDUCTION_CONFIG).eval()
    with torch.no_grad():
        _, inter = model(probe, return_intermediates=True)
        h1 = inter[0]["hidden"]
        torch.testing.assert_close(layer_weights(model.layers[1], h1, h1), inter[1]["weights"])


def test_repeated_loss_by_hand(probe):
    model = initial_model(InductionTask(), INDUCTION_CONFIG).eval()
    keep = torch.ones(2, 2)
    keep[1, 0] = 0.0
    with torch.no_grad():
        logits = model(probe, keep_heads=keep)
    scored = repeated_part(probe)
    expected = F.cross_entropy(logits[scored], probe.roll(-1, dims=1)[scored]).item()
    assert repeated_loss(model, probe, [(1, 0)]) == pytest.approx(expected, rel=1e-9)


def test_causal_defaults_leave_lesson_08_unchanged():
    assert TrainConfig().causal is False
    assert TrainConfig().describe() == "1 layer, 2 heads of 16, scaled, wiring=identity"
    assert INDUCTION_CONFIG.describe().endswith("position_scheme=rope, causal")


# -- trained: the circuit, its knockouts, the control ----------------------------------------------

@pytest.mark.parametrize("seed", UNPRINTED_SEEDS)
def test_circuit_forms_and_knockouts_raise_the_loss(trained, probe, seed):
    model, run = trained[f"rope {seed}"]
    circuit = find_circuit(model, probe)
    assert circuit.previous[0].max() >= 0.5
    assert circuit.induction[1].max() >= 0.5
    assert circuit.previous_heads and circuit.induction_heads
    assert circuit.loss < 1.5
    assert circuit.loss_without_previous > circuit.loss + 1.0
    assert circuit.loss_without_induction > circuit.loss + 1.0
    assert loss_drop_step(run) is not None
    # the record of training: previous-token scores at every snapshot, the last one on the held-out sequences
    assert run.measured["previous token"].shape == (len(run.steps), 2, 2)
    torch.testing.assert_close(run.measured["previous token"][-1],
                               previous_token_scores(model, run.held_out_tokens))


def test_k_composition_keys_need_the_previous_token_head(trained, probe):
    model, _ = trained[f"rope {UNPRINTED_SEEDS[0]}"]
    circuit = find_circuit(model, probe)
    keep = torch.ones(2, 2)
    for layer, head in circuit.previous_heads:
        keep[layer, head] = 0.0
    with torch.no_grad():
        _, inter = model(probe, return_intermediates=True)
        _, inter_ko = model(probe, keep_heads=keep, return_intermediates=True)
    h1, h1_ko = inter[0]["hidden"], inter_ko[0]["hidden"]
    ideal = induction_pattern(probe).double()
    full = pattern_match(layer_weights(model.layers[1], h1, h1), ideal).max()
    keys = pattern_match(layer_weights(model.layers[1], h1, h1_ko), ideal).max()
    queries = pattern_match(layer_weights(model.layers[1], h1_ko, h1), ideal).max()
    assert keys < 0.5 * full
    assert queries > keys


def test_without_positions_no_previous_token_head_forms(trained, probe):
    model, run = trained["none"]
    circuit = find_circuit(model, probe)
    assert circuit.previous[0].max() < 0.3
    assert not circuit.previous_heads
    assert circuit.loss > math.log(32) - 0.6


def test_circuit_table_lists_each_row(trained, probe):
    circuits = {seed: find_circuit(trained[f"rope {seed}"][0], probe) for seed in UNPRINTED_SEEDS}
    text = circuit_table(circuits, {seed: loss_drop_step(trained[f"rope {seed}"][1]) for seed in UNPRINTED_SEEDS})
    lines = text.splitlines()
    assert len(lines) == 3 and lines[0].split()[0] == "seed" and "L0H" in lines[1]
    # lesson 14 holds the knockout columns back until Exercise 14.2 has a prediction: they hold its answer
    held_back = circuit_table(circuits, knockouts=False).splitlines()
    assert "w/o prev" in lines[0] and not any("w/o" in line for line in held_back)
    assert [line.split()[:3] for line in held_back] == [line.split()[:3] for line in lines]
    assert all(len(short.split()) == len(full.split()) - 2 for short, full in zip(held_back[1:], lines[1:]))

