"""attn_helpers.lab (lesson 08): the toy tasks agree with their ideal patterns, the pattern match
measures what it says, the model and the hand-written Adam match PyTorch, and training is
reproducible, leaves the global state alone, and actually learns (the lesson's checkers: tests/checks)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attn_helpers import Attention, merge_heads
from attn_helpers.lab import (
    one_thread,
    IGNORE,
    Adam,
    HeadKnockout,
    LookupTask,
    PreviousTokenTask,
    TinyAttentionModel,
    TrainConfig,
    batch_generator,
    head_knockout,
    held_out_accuracy,
    initial_model,
    knockout_summary,
    knockout_table,
    pattern_match,
    pattern_match_table,
    results_table,
    steps_table,
    timing_table,
    train,
    train_many,
    training_step,
)

TASKS = [PreviousTokenTask(), LookupTask(), PreviousTokenTask(seq_len=5, vocab_size=3),
         LookupTask(num_pairs=3, num_letters=5, num_digits=4)]


def _sample(task, batch=64, seed=0):
    return task.sample(batch, torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------ tasks

@pytest.mark.parametrize("task", TASKS, ids=repr)
def test_sample_shapes_and_ranges(task):
    tokens, targets = _sample(task)
    assert tokens.shape == targets.shape == (64, task.seq_len)
    assert tokens.dtype == targets.dtype == torch.int64
    assert 0 <= tokens.min() and tokens.max() < task.vocab_size
    scored = targets[targets != IGNORE]
    assert 0 <= scored.min() and scored.max() < task.n_classes


@pytest.mark.parametrize("task", TASKS, ids=repr)
def test_ideal_pattern_points_at_the_token_that_holds_the_answer(task):
    """Reading the key the ideal row points at gives the target, for every position with a target."""
    tokens, targets = _sample(task)
    ideal = task.ideal_attention(tokens)  # (B, N, N)
    has_target = targets != IGNORE
    assert torch.equal(ideal.sum(-1), has_target.float())  # one-hot rows exactly where there is a target
    source = tokens.gather(1, ideal.argmax(-1))  # (B, N): the token at the ideal key
    if isinstance(task, LookupTask):
        source = source % task.num_digits  # the digit stored in the pair token
    assert torch.equal(source[has_target], targets[has_target])


def test_previous_token_pattern_is_the_shifted_identity_with_wrap_around():
    ideal = PreviousTokenTask(seq_len=4).ideal_attention(torch.zeros(1, 4, dtype=torch.long))[0]
    assert torch.equal(ideal, torch.tensor([[0., 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]))


def test_lookup_layout_and_labels():
    task = LookupTask(num_pairs=4, num_letters=8, num_digits=8)
    tokens, targets = _sample(task, batch=200)
    P = task.num_pairs
    pair_letters = tokens[:, :P] // task.num_digits
    assert all(len(set(row)) == P for row in pair_letters.tolist())  # distinct letters per sequence
    questions = task.question_letters(tokens)
    assert (questions[:, :P] == -1).all()
    assert torch.equal(questions[:, P:].sort(-1).values, pair_letters.sort(-1).values)  # the same letters asked
    assert (targets[:, :P] == IGNORE).all()
    labels = task.token_labels(tokens[0])
    assert all(len(t) == 2 and t[1].isdigit() for t in labels[:P]) and all(t.endswith("?") for t in labels[P:])
    assert {t[0] for t in labels[:P]} == {t[0] for t in labels[P:]}


def test_lookup_answer_moves_with_the_content():
    """Unlike the positional tasks, different sequences need different patterns."""
    task = LookupTask()
    ideal = task.ideal_attention(_sample(task, batch=32)[0])
    assert len({tuple(m.argmax(-1).tolist()) for m in ideal}) > 10


def test_sampling_is_reproducible_and_uses_only_the_generator():
    state = torch.get_rng_state()
    for task in TASKS:
        a, b = _sample(task, seed=3), _sample(task, seed=3)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(torch.get_rng_state(), state)


def test_task_arguments_are_checked():
    with pytest.raises(ValueError, match="num_pairs=5 needs as many different letters"):
        LookupTask(num_pairs=5, num_letters=4)
    with pytest.raises(ValueError, match="vocab_size must be at most 26"):
        PreviousTokenTask(vocab_size=30)
    with pytest.raises(ValueError, match="seq_len must be at least 2"):
        PreviousTokenTask(seq_len=1)
    with pytest.raises(ValueError, match=r"tokens must have shape \(B, N=8\)"):
        PreviousTokenTask().ideal_attention(torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="tokens must hold integer ids"):
        LookupTask().ideal_attention(torch.zeros(2, 8))


# ----------------------------------------------------------------------------------- pattern match

def test_pattern_match_is_one_for_the_ideal_and_one_over_n_for_uniform():
    task = LookupTask()
    tokens, _ = _sample(task)
    ideal = task.ideal_attention(tokens)  # (B, N, N)
    weights = torch.stack([ideal, torch.full_like(ideal, 1 / task.seq_len)], dim=1)  # (B, 2 heads, N, N)
    assert torch.allclose(pattern_match(weights, ideal), torch.tensor([1.0, 1 / task.seq_len]))


def test_pattern_match_leaves_out_rows_without_a_target():
    ideal = torch.zeros(1, 3, 3)
    ideal[0, 2, 0] = 1.0  # only row 2 has a target
    weights = torch.full((1, 1, 3, 3), 1 / 3)
    weights[0, 0, 2] = torch.tensor([0.5, 0.25, 0.25])
    assert pattern_match(weights, ideal).tolist() == [0.5]


def test_pattern_match_keeps_every_head_axis():
    task = PreviousTokenTask()
    tokens, _ = _sample(task, batch=4)
    ideal = task.ideal_attention(tokens)
    weights = torch.softmax(torch.randn(4, 2, 3, 8, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    result = pattern_match(weights, ideal)
    assert result.shape == (2, 3)
    assert torch.allclose(result[1, 2], (weights[:, 1, 2] * ideal).sum(-1).mean())


def test_pattern_match_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"got weights \[2, 1, 8, 8\] and ideal \[3, 8, 8\]"):
        pattern_match(torch.zeros(2, 1, 8, 8), torch.zeros(3, 8, 8))


# ------------------------------------------------------------------------------------------ model

def test_model_shapes_and_intermediates():
    task = LookupTask()
    model = TinyAttentionModel.for_task(task, TrainConfig(num_layers=2, num_heads=4))
    tokens, _ = _sample(task, batch=5)
    logits, weights = model(tokens, return_weights=True)
    assert logits.shape == (5, 8, task.n_classes) and weights.shape == (5, 2, 4, 8, 8)
    assert torch.allclose(weights.sum(-1), torch.ones(5, 2, 4, 8))
    same, layers = model(tokens, return_intermediates=True)
    assert torch.equal(same, logits) and len(layers) == 2
    assert layers[0]["scores"].shape == (5, 4, 8, 8) and layers[1]["hidden"].shape == (5, 8, 32)
    assert torch.equal(model(tokens), logits)


def test_model_is_built_from_the_series_attention_layer():
    model = TinyAttentionModel(10, 4, 6, dim=16, num_heads=2, scaled=False)
    assert all(isinstance(layer, Attention) for layer in model.layers)
    assert model.layers[0].scale == 1.0
    assert TinyAttentionModel(10, 4, 6, dim=16, num_heads=2).layers[0].scale == 8 ** -0.5


@pytest.mark.parametrize("skip", ["identity", "values", "none"])
def test_skip_wiring(skip):
    torch.manual_seed(0)
    model = TinyAttentionModel(10, 4, 6, dim=16, num_heads=2, wiring=skip)
    tokens = torch.randint(0, 10, (3, 6))
    _, layers = model(tokens, return_intermediates=True)
    h0, inter = layers[0]["x"], layers[0]
    expected = {"identity": h0 + inter["projected"], "values": inter["out"], "none": inter["projected"]}[skip]
    assert torch.allclose(inter["hidden"], expected)


def test_model_rejects_bad_tokens_and_arguments():
    model = TinyAttentionModel(10, 4, 6)
    with pytest.raises(TypeError, match="tokens must hold integer ids"):
        model(torch.zeros(2, 6))
    with pytest.raises(ValueError, match="N=7 positions but the model has 6"):
        model(torch.zeros(2, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="wiring must be one of"):
        TinyAttentionModel(10, 4, 6, wiring="residual")


# ----------------------------------------------------------------------------------------- Adam

def test_adam_matches_torch_optim_adam():
    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double()
    theirs.load_state_dict(ours.state_dict())
    opt_ours, opt_theirs = Adam(ours.parameters(), lr=0.05), torch.optim.Adam(theirs.parameters(), lr=0.05)
    x = torch.randn(20, 5, dtype=torch.float64)
    for _ in range(25):
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            (model(x).sin() ** 2).sum().backward()
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_adam_checks_its_arguments():
    with pytest.raises(ValueError, match="lr must be positive"):
        Adam([torch.zeros(2, requires_grad=True)], lr=0.0)
    with pytest.raises(ValueError, match="at least one tensor that requires grad"):
        Adam([torch.zeros(2)])


# -------------------------------------------------------------------------------------- training

SMALL = TrainConfig(steps=20, snapshot_every=5, held_out=32)


def test_config_is_checked_and_described():
    with pytest.raises(ValueError, match="dim=32 is not divisible by num_heads=3"):
        TrainConfig(num_heads=3)
    with pytest.raises(ValueError, match="wiring must be one of"):
        TrainConfig(wiring="x")
    with pytest.raises(ValueError, match="lr must be a positive number"):
        TrainConfig(lr=0)
    assert TrainConfig().describe() == "1 layer, 2 heads of 16, scaled, wiring=identity"
    assert TrainConfig(num_layers=2, num_heads=1, scaled=False).describe() == "2 layers, 1 head of 32, not scaled, wiring=identity"
    assert TrainConfig().replace(num_heads=4).num_heads == 4


def test_initial_weights_do_not_depend_on_heads_scale_or_skip():
    task = PreviousTokenTask()
    reference = initial_model(task, SMALL).state_dict()
    for change in ({"num_heads": 1}, {"num_heads": 4}, {"scaled": False}, {"wiring": "none"}):
        other = initial_model(task, SMALL.replace(**change)).state_dict()
        assert all(torch.equal(reference[k], other[k]) for k in reference), change


def test_training_is_reproducible_and_leaves_global_state_alone():
    torch.manual_seed(123)
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    first = train(LookupTask(), SMALL)
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads
    torch.set_num_threads(2 if threads == 1 else 1)
    try:
        second = train(LookupTask(), SMALL)
    finally:
        torch.set_num_threads(threads)
    for field in ("train_loss", "held_out_loss", "held_out_accuracy", "pattern_match", "probe_weights"):
        assert torch.equal(getattr(first, field), getattr(second, field)), field


def test_run_records_every_snapshot():
    calls = []
    run = train(PreviousTokenTask(), SMALL.replace(steps=12), progress=lambda step, total: calls.append((step, total)))
    assert run.steps == [0, 5, 10, 12]
    assert calls == [(0, 12), (5, 12), (10, 12), (12, 12)]
    S, N = len(run.steps), 8
    assert run.train_loss.shape == (12,)
    assert run.held_out_accuracy.shape == run.held_out_loss.shape == (S,)
    assert run.pattern_match.shape == (S, 1, 2) and run.probe_weights.shape == (S, 1, 2, N, N)
    assert run.held_out_tokens.shape == (32, N) and torch.equal(run.probe_tokens, run.held_out_tokens[0])
    assert torch.equal(run.probe_ideal, PreviousTokenTask().ideal_attention(run.held_out_tokens[:1])[0].double())
    assert run.snapshot(10) == 2
    with pytest.raises(ValueError, match="no snapshot at step 7"):
        run.snapshot(7)


def test_held_out_sequences_are_the_same_for_every_run_of_a_task():
    a = train(LookupTask(), SMALL.replace(steps=1))
    b = train(LookupTask(), SMALL.replace(steps=1, seed=5, num_heads=1))
    assert torch.equal(a.held_out_tokens, b.held_out_tokens)


def test_it_learns_the_previous_token_task():
    run = train(PreviousTokenTask(), TrainConfig(steps=40, snapshot_every=10, held_out=128))
    assert run.final_accuracy > 0.95
    assert run.pattern_match[-1].max() > 0.9 > 0.3 > run.pattern_match[0].max()
    assert run.held_out_seen_in_training == 0
    assert run.steps_to(0.95) is not None and run.steps_to(1.01) is None


def test_tables():
    runs = train_many({"a": (PreviousTokenTask(), SMALL), "b": (LookupTask(), SMALL.replace(num_layers=2))})
    table = results_table(runs, accuracies=(0.5, 0.99)).splitlines()
    assert table[0].split()[:6] == ["run", "accuracy", "loss", "to", "50%", "to"]
    assert table[2].startswith("b ") and "L1H1:" in table[2] and "H1:" in table[1]
    assert "total" in timing_table(runs).splitlines()[-1]
    lines = pattern_match_table(runs["b"], every=10).splitlines()
    assert lines[0].split() == ["step", "accuracy", "L0", "head", "0", "L0", "head", "1", "L1", "head", "0", "L1", "head", "1"]
    assert [line.split()[0] for line in lines[1:]] == ["0", "10", "20"]


def test_training_step_is_the_loop_train_runs():
    """The lesson's loop, written with training_step from initial_model and batch_generator, ends with
    exactly the weights and losses of train()."""
    task, config = LookupTask(), SMALL.replace(steps=12)
    model = initial_model(task, config)
    optimizer, batches = Adam(model.parameters(), lr=config.lr), batch_generator(config)
    with one_thread():
        losses = [training_step(model, optimizer, task, batches, config.batch_size)[1] for _ in range(config.steps)]
    run = train(task, config)
    assert losses == run.train_loss.tolist()
    theirs = run.model.state_dict()
    assert all(torch.equal(value, theirs[name]) for name, value in model.state_dict().items())
    assert math.isclose(held_out_accuracy(model, task, held_out=32), run.final_accuracy)


def test_batch_generator_is_seeded_by_the_config():
    a, b = batch_generator(SMALL), batch_generator(SMALL.replace(seed=1))
    first = LookupTask().sample(4, a)[0]
    assert torch.equal(first, LookupTask().sample(4, batch_generator(SMALL))[0])
    assert not torch.equal(first, LookupTask().sample(4, b)[0])
    with pytest.raises(TypeError, match="TrainConfig"):
        batch_generator(3)


# ------------------------------------------------------------------------------ knocking heads out

@pytest.mark.parametrize("skip", ["identity", "values", "none"])
def test_keep_heads_zeroes_a_head_before_the_projection(skip):
    torch.manual_seed(0)
    model = TinyAttentionModel(10, 4, 6, dim=16, num_heads=2, wiring=skip).double()
    tokens = torch.randint(0, 10, (3, 6))
    assert torch.equal(model(tokens, keep_heads=torch.ones(1, 2)), model(tokens))
    h0 = model.embed(tokens) + model.position.weight  # (B, N, dim)
    _, inter = model.layers[0](h0, return_intermediates=True)
    heads = inter["heads"].clone()
    heads[:, 1] = 0.0
    projected = model.layers[0].proj(merge_heads(heads))
    h1 = {"identity": h0 + projected, "values": projected + inter["skip"], "none": projected}[skip]
    logits, layers = model(tokens, keep_heads=torch.tensor([[1.0, 0.0]]), return_intermediates=True)
    torch.testing.assert_close(logits, model.readout(h1))
    assert torch.equal(layers[0]["heads"][:, 1], torch.zeros_like(heads[:, 1]))
    torch.testing.assert_close(layers[0]["hidden"], h1)


def test_keep_heads_is_checked():
    model = TinyAttentionModel(10, 4, 6, dim=16, num_heads=2, num_layers=2)
    tokens = torch.zeros(2, 6, dtype=torch.long)
    with pytest.raises(ValueError, match=r"keep_heads must be a tensor of shape \(L, H\) = \[2, 2\], got \[1, 2\]"):
        model(tokens, keep_heads=torch.ones(1, 2))
    with pytest.raises(ValueError, match="got list"):
        model(tokens, keep_heads=[[1, 1], [1, 1]])


def _without_head(model, tokens, layer, head, first_only=False):
    """The exercise's solution, as a learner would write it; ``first_only``: the mistake of running every layer on
    the first h (embeddings + positions) instead of the current one."""
    h = first = model.embed(tokens) + model.position.weight  # (B, N, dim)
    for index, attention in enumerate(model.layers):
        _, inter = attention(first if first_only else h, return_intermediates=True)
        heads = inter["heads"].clone()  # (B, H, N, head_dim)
        if index == layer:
            heads[:, head] = 0.0
        h = h + attention.proj(merge_heads(heads))
    return model.readout(h)


@pytest.fixture(scope="module")
def trained_lookup():
    return train(LookupTask(), TrainConfig(steps=60, snapshot_every=20, held_out=64))


def test_head_knockout_measures_each_head(trained_lookup):
    task, model = trained_lookup.task, trained_lookup.model
    result = head_knockout(model, task, held_out=64)
    assert result.labels == ["nothing", "head 0", "head 1"]
    assert result.accuracy.shape == (3,) and result.by_letter.shape == (3, task.num_letters)
    assert math.isclose(result.accuracy[0].item(), held_out_accuracy(model, task, held_out=64))
    assert int(result.questions.sum()) == 64 * task.num_pairs
    weighted = (result.by_letter * result.questions).sum(dim=1) / result.questions.sum()  # (3,)
    torch.testing.assert_close(weighted, result.accuracy)
    tokens, targets = task.sample(64, torch.Generator().manual_seed(20_240))
    with torch.no_grad():
        logits = _without_head(model, tokens, 0, 1)
    scored = targets != IGNORE
    manual = (logits.argmax(-1) == targets)[scored].double().mean().item()
    assert math.isclose(result.accuracy[2].item(), manual)
    torch.testing.assert_close(result.cost(), result.by_letter[:1] - result.by_letter[1:])


def test_head_knockout_names_layers_and_checks_its_arguments():
    model = initial_model(LookupTask(), TrainConfig(num_layers=2, num_heads=1))
    assert head_knockout(model, LookupTask(), held_out=8).labels == ["nothing", "layer 0 head 0", "layer 1 head 0"]
    with pytest.raises(TypeError, match="LookupTask"):
        head_knockout(model, PreviousTokenTask())
    with pytest.raises(TypeError, match="TinyAttentionModel"):
        head_knockout(torch.nn.Linear(2, 2), LookupTask())


def _knockout(by_letter):
    by_letter = torch.tensor(by_letter, dtype=torch.float64)  # (3, 4)
    return HeadKnockout(["nothing", "head 0", "head 1"], by_letter.mean(dim=1), by_letter, torch.full((4,), 10))


def test_knockout_table_and_summary():
    results = {0: _knockout([[1.0, 1.0, 1.0, 1.0],   # A: head 1 alone, B: head 0 alone,
                             [1.0, 0.5, 0.8, 0.95],  # C: needs both, D: neither knockout matters
                             [0.2, 1.0, 0.7, 1.0]]),
               7: _knockout([[1.0] * 4, [0.5] * 4, [0.5] * 4])}
    table = knockout_table(results).splitlines()
    assert table[0].split() == ["seed", "knocked", "out", "all", "A", "B", "C", "D"]
    assert table[1].split()[:3] == ["0", "nothing", "1.000"] and table[2].split()[:4] == ["head", "0", "0.812", "1.00"]
    assert table[4].split()[0] == "7" and len(table) == 7
    summary = knockout_summary(results).splitlines()
    assert "every head needed" in summary[0] and "one head answers alone" in summary[0]
    assert summary[1].split()[:5] == ["0", "0.812", "0.725", "1", "of"]
    assert summary[1].endswith("A (head 1), B (head 0)")
    assert summary[2].endswith("4 of 4  none")


def test_tables_reject_empty_or_wrong_results():
    with pytest.raises(ValueError, match="non-empty mapping"):
        knockout_table({})
    with pytest.raises(TypeError, match=r"results\[0\] must be a HeadKnockout"):
        knockout_summary({0: 1.0})
    with pytest.raises(ValueError, match="at least one seed"):
        steps_table({"a": {}})


def test_steps_table():
    base = train(PreviousTokenTask(), SMALL.replace(steps=10))
    fake = lambda accuracies: dataclasses.replace(base, held_out_accuracy=torch.tensor(accuracies, dtype=torch.float64))
    table = steps_table({"a": {0: fake([0.1, 0.95, 1.0]), 3: fake([0.1, 0.5, 0.6])}, "b": {0: fake([0.1, 0.2, 0.99])}})
    lines = table.splitlines()
    assert lines[0].split() == ["run", "seed", "0", "seed", "3"]
    assert lines[1].split() == ["a", "5/10", "never/never"] and lines[2].split() == ["b", "10/10", "-"]
