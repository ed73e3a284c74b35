"""attn_helpers.lab.tables: every text table goes through one formatter, text_table, and prints byte for byte
what it printed before (notebooks 08, 10 and 11 print them, and strict nbval compares the text).

EXPECTED was printed by the table functions as they were before the formatter (commit 342eddf), on the
inputs below: hand-made runs, knockouts and shares, no training, so the test takes milliseconds.
"""

from __future__ import annotations

import pytest
import torch

from attn_helpers import lab
from attn_helpers.lab import text_table


def _run(task, config, accuracy, match, seconds):
    """A TrainingRun with given held-out accuracies (S,) and pattern matches (S, L, H); no training."""
    S = len(accuracy)
    steps = [min(i * config.snapshot_every, config.steps) for i in range(S)]
    n = task.seq_len
    return lab.TrainingRun(
        task=task, config=config, steps=steps, train_loss=torch.linspace(2.0, 0.1, config.steps, dtype=torch.float64),
        held_out_loss=torch.linspace(2.5, 0.05, S, dtype=torch.float64),
        held_out_accuracy=torch.tensor(accuracy, dtype=torch.float64), pattern_match=torch.tensor(match, dtype=torch.float64),
        probe_tokens=torch.zeros(n, dtype=torch.long), probe_labels=["a"] * n, probe_ideal=torch.zeros(n, n),
        probe_weights=torch.zeros(S, *torch.tensor(match).shape[1:], n, n), held_out_tokens=torch.zeros(4, n, dtype=torch.long),
        held_out_targets=torch.zeros(4, n, dtype=torch.long), held_out_seen_in_training=0, seconds=seconds, model=None)


def _inputs():
    prev = lab.PreviousTokenTask(seq_len=8, vocab_size=16)
    look = lab.LookupTask()
    cfg = lab.TrainConfig(steps=40, snapshot_every=10)
    runs = {
        "previous token": _run(prev, cfg, [0.06, 0.5, 0.93, 0.995, 1.0], [[[0.1, 0.2]], [[0.3, 0.5]], [[0.6, 0.9]], [[0.7, 0.95]], [[0.71, 0.987]]], 3.14159),
        "lookup, two layers": _run(look, cfg.replace(num_layers=2, num_heads=1), [0.1, 0.2, 0.3, 0.4, 0.45], [[[0.1], [0.2]]] * 4 + [[[0.25], [0.5]]], 12.5),
        "x": _run(look, cfg.replace(steps=1000, snapshot_every=250), [0.1, 0.95, 0.99, 0.999, 1.0], [[[0.5, 0.25]]] * 5, 123.456),
    }
    by_seed = {0: runs["previous token"], 7: runs["x"], 11: runs["lookup, two layers"]}
    g = torch.Generator().manual_seed(5)
    ko = {}
    for seed, K in ((0, 3), (12, 3)):
        ko[seed] = lab.HeadKnockout(["nothing"] + [f"head {h}" for h in range(K - 1)], torch.rand(K, generator=g, dtype=torch.float64),
                                    torch.rand(K, 8, generator=g, dtype=torch.float64), torch.arange(8) + 20)
    ko[12].by_letter[1, 2] = 0.0  # knocking head 0 out costs letter C everything: one head answers it alone
    ko[12].by_letter[0, 2] = 1.0
    ko[12].by_letter[2, 2] = 0.99
    ko2 = {"a model with a long name": lab.HeadKnockout(["nothing", "layer 0 head 0", "layer 1 head 0"],
                                                         torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64),
                                                         torch.tensor([[1.0, 0.5], [0.0, 0.5], [1.0, 0.0]], dtype=torch.float64), torch.tensor([3, 0]))}
    acc = {"learned": {4: 1.0, 8: 0.987654, 16: None}, "rope positions": {4: 0.5, 8: 0.25, 16: 0.0}}
    shares = torch.rand(3, 4, 5, generator=g, dtype=torch.float64)
    return runs, by_seed, ko, ko2, acc, shares


def _tables() -> dict[str, str]:
    runs, by_seed, ko, ko2, acc, shares = _inputs()
    return {
        "results_table": lab.results_table(runs),
        "results_table, three accuracies": lab.results_table(runs, accuracies=(0.5, 0.9, 0.999)),
        "timing_table": lab.timing_table(runs),
        "pattern_match_table": lab.pattern_match_table(runs["previous token"]),
        "pattern_match_table, two layers, every 20": lab.pattern_match_table(runs["lookup, two layers"], every=20),
        "steps_table": lab.steps_table({"baseline": by_seed, "one head": {7: runs["x"]}}),
        "knockout_table": lab.knockout_table(ko),
        "knockout_table, key name": lab.knockout_table(ko2, key_name="model"),
        "knockout_summary": lab.knockout_summary(ko),
        "knockout_summary, no head alone": lab.knockout_summary(ko, large=2.0),
        "knockout_summary, key name": lab.knockout_summary(ko2, key_name="model", small=0.2, large=0.4),
        "accuracy_table": lab.accuracy_table(acc),
        "accuracy_table, reference": lab.accuracy_table(acc, digits=3, reference={4: 0.5, 8: 0.25, 16: 0.125},
                                                        reference_name="best order-blind guess"),
        "shares_by_layer_table": lab.shares_by_layer_table(shares),
    }


EXPECTED = {
    'results_table': (
        'run                 accuracy    loss   to 90%   to 99%  pattern match per head (end; L0H1 = layer 0, head 1)\n'
        'previous token         1.000   0.050       20       30  H0: 0.71, H1: 0.99\n'
        'lookup, two layers     0.450   0.050    never    never  L0H0: 0.25, L1H0: 0.50\n'
        'x                      1.000   0.050      250      500  H0: 0.50, H1: 0.25'
    ),
    'results_table, three accuracies': (
        'run                 accuracy    loss   to 50%   to 90%  to 100%  pattern match per head (end; L0H1 = layer 0, head 1)\n'
        'previous token         1.000   0.050       10       20       40  H0: 0.71, H1: 0.99\n'
        'lookup, two layers     0.450   0.050    never    never    never  L0H0: 0.25, L1H0: 0.50\n'
        'x                      1.000   0.050      250      250      750  H0: 0.50, H1: 0.25'
    ),
    'timing_table': (
        'previous token        40 steps    3.1 s  (78.5 ms per step)\n'
        'lookup, two layers    40 steps   12.5 s  (312.5 ms per step)\n'
        'x                   1000 steps  123.5 s  (123.5 ms per step)\n'
        'total               1080 steps  139.1 s'
    ),
    'pattern_match_table': (
        ' step  accuracy   head 0   head 1\n'
        '    0     0.060     0.10     0.20\n'
        '   10     0.500     0.30     0.50\n'
        '   20     0.930     0.60     0.90\n'
        '   30     0.995     0.70     0.95\n'
        '   40     1.000     0.71     0.99'
    ),
    'pattern_match_table, two layers, every 20': (
        ' step  accuracy  L0 head 0  L1 head 0\n'
        '    0     0.100     0.10     0.20\n'
        '   20     0.300     0.10     0.20\n'
        '   40     0.450     0.25     0.50'
    ),
    'steps_table': (
        'run            seed 0       seed 7      seed 11\n'
        'baseline        20/30      250/500  never/never\n'
        'one head            -      250/500            -'
    ),
    'knockout_table': (
        'seed  knocked out    all     A     B     C     D     E     F     G     H\n'
        '   0  nothing      0.642  0.32  0.27  0.85  0.58  0.72  0.85  0.45  0.36\n'
        '      head 0       0.260  0.33  0.80  0.22  0.11  0.33  0.35  0.37  0.76\n'
        '      head 1       0.361  0.51  0.65  0.40  0.04  0.35  0.85  0.25  0.18\n'
        '  12  nothing      0.130  0.78  0.93  1.00  0.45  0.97  0.05  0.36  0.69\n'
        '      head 0       0.544  0.30  0.56  0.00  0.51  0.75  0.79  0.53  0.51\n'
        '      head 1       0.873  0.05  0.04  0.99  0.14  0.71  0.14  0.62  0.20'
    ),
    'knockout_table, key name': (
        '                   model  knocked out       all     A     B\n'
        'a model with a long name  nothing         0.500  1.00  0.50\n'
        '                          layer 0 head 0  0.250  0.00  0.50\n'
        '                          layer 1 head 0  0.125  1.00  0.00'
    ),
    'knockout_summary': (
        'seed  without head 0  without head 1  every head needed  one head answers alone\n'
        '   0           0.260           0.361             3 of 8  F (head 0)\n'
        '  12           0.544           0.873             4 of 8  C (head 0), D (head 1)'
    ),
    'knockout_summary, no head alone': (
        'seed  without head 0  without head 1  every head needed  one head answers alone\n'
        '   0           0.260           0.361             3 of 8  none\n'
        '  12           0.544           0.873             4 of 8  none'
    ),
    'knockout_summary, key name': (
        '                   model  without layer 0 head 0  without layer 1 head 0  every head needed  one head answers alone\n'
        'a model with a long name                   0.250                   0.125             0 of 2  A (layer 0 head 0), B (layer 1 head 0)'
    ),
    'accuracy_table': (
        'N =                  4       8      16\n'
        'learned           1.00    0.99  no row\n'
        'rope positions    0.50    0.25    0.00'
    ),
    'accuracy_table, reference': (
        'N =                          4       8      16\n'
        'learned                  1.000   0.988  no row\n'
        'rope positions           0.500   0.250   0.000\n'
        'best order-blind guess   0.500   0.250   0.125'
    ),
    'shares_by_layer_table': (
        'layer      [CLS]      [SEP]   previous       next       self   (mean over heads / largest head)\n'
        '    0  0.33/0.50  0.61/0.93  0.44/0.78  0.73/0.86  0.46/0.94\n'
        '    1  0.46/0.69  0.34/0.68  0.48/0.75  0.52/0.64  0.57/0.86\n'
        '    2  0.32/0.55  0.69/0.94  0.24/0.38  0.47/0.76  0.36/0.72'
    ),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_table_prints_what_it_printed_before_the_one_formatter(name):
    assert _tables()[name] == EXPECTED[name]


def test_text_table_formats_each_column_with_its_spec_and_joins_with_two_spaces():
    rows = [["name", "value", "note"], ["a", "1.50", "first"], ["longer", "12.25"]]
    assert text_table(rows, ["<6", ">6", ""]).split("\n") == [
        "name     value  note",
        "a         1.50  first",
        "longer   12.25",  # a shorter row stops early: no trailing gap
    ]


def test_text_table_refuses_a_row_longer_than_its_specs():
    with pytest.raises(ValueError, match=r"rows\[1\] has 3 cells, but specs gives only 2 columns"):
        text_table([["a", "b"], ["a", "b", "c"]], ["<3", ">3"])


def test_shares_by_layer_table_names_a_wrong_shape():
    with pytest.raises(ValueError, match=r"shares must have shape \(L, H, 5\), got \[2, 3\]"):
        lab.shares_by_layer_table(torch.zeros(2, 3))
