"""No helper touches the global random state.

(a) Statically: no module of ``attn_helpers`` (any room) calls a function that seeds or sets a global
generator (torch's, numpy's or Python's), or imports one under another name, except inside a
``with torch.random.fork_rng(...)`` block, which puts the generator's state back when it ends.
(b) At run time: every public function and class of ``attn_helpers.lab`` that a notebook calls leaves
``torch.random.get_rng_state()`` as it was. One exception, by design: a module a notebook builds itself right
after its own ``torch.manual_seed`` (``AttentionStack`` in lesson 06) draws its initial parameters from the
notebook's generator, exactly as ``torch.nn.Linear`` does; here it is built under
:func:`attn_helpers.lab.local_random` and everything the notebook then calls on it is checked.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import attn_helpers
from attn_helpers import lab
from attn_helpers.lab import local_random

PACKAGE = Path(attn_helpers.__file__).parent
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: Calls that seed or set a global generator, by their dotted name.
GLOBAL_SEEDING = {
    "torch.manual_seed", "torch.random.manual_seed", "torch.seed", "torch.random.seed",
    "torch.set_rng_state", "torch.random.set_rng_state", "torch.default_generator.manual_seed",
    "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.set_rng_state",
    "np.random.seed", "numpy.random.seed", "np.random.set_state", "numpy.random.set_state",
    "random.seed", "random.setstate",
}


def _dotted(node: ast.expr) -> str | None:
    """``torch.random.manual_seed`` for the expression ``torch.random.manual_seed``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


#: The context manager that saves the CPU generator's state and puts it back, and the seeding it undoes: inside
#: it, seeding the CPU generator is allowed (``torch.manual_seed`` would seed a GPU's generators too).
FORK = {"torch.random.fork_rng"}
UNDONE_BY_FORK = {"torch.default_generator.manual_seed"}


def _forked(tree: ast.AST) -> set[int]:
    """The ``id`` of every node inside the body of a ``with torch.random.fork_rng(...)`` block."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(isinstance(item.context_expr, ast.Call)
                                              and _dotted(item.context_expr.func) in FORK for item in node.items):
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def global_seeding_calls(source: str, filename: str = "<snippet>") -> list[str]:
    """``file:line name`` of every call in ``source`` that seeds or sets a global generator outside a
    ``torch.random.fork_rng`` block, and of every import that brings such a function in under a bare name
    (``from torch import manual_seed``)."""
    found = []  # (line, name)
    tree = ast.parse(source, filename)
    forked = _forked(tree)
    for node in ast.walk(tree):
        if id(node) in forked and isinstance(node, ast.Call) and _dotted(node.func) in UNDONE_BY_FORK:
            continue
        if isinstance(node, ast.Call) and _dotted(node.func) in GLOBAL_SEEDING:
            found.append((node.lineno, _dotted(node.func)))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if f"{node.module}.{alias.name}" in GLOBAL_SEEDING]
    return [f"{filename}:{line} {name}" for line, name in sorted(found)]


def test_the_scan_finds_a_planted_violation_and_passes_local_generators():
    snippet = (
        "import torch, random\n"
        "import numpy as np\n"
        "from torch import manual_seed\n"
        "g = torch.Generator().manual_seed(0)\n"  # a local generator: fine
        "def f(seed):\n"
        "    torch.manual_seed(seed)\n"
        "    with torch.random.fork_rng(devices=[]):\n"
        "        torch.default_generator.manual_seed(seed)\n"  # fine: fork_rng puts the state back
        "        np.random.seed(1)\n"  # numpy's generator is not forked
        "        torch.manual_seed(seed)\n"  # seeds a GPU's generators too, which fork_rng(devices=[]) leaves
        "    random.seed(2)\n"
        "    g.manual_seed(3)\n"  # fine
        "    torch.random.set_rng_state(torch.random.get_rng_state())\n"
        "    torch.default_generator.manual_seed(4)\n"
    )
    assert global_seeding_calls(snippet, "planted.py") == [
        "planted.py:3 torch.manual_seed",
        "planted.py:6 torch.manual_seed",
        "planted.py:9 np.random.seed",
        "planted.py:10 torch.manual_seed",
        "planted.py:11 random.seed",
        "planted.py:13 torch.random.set_rng_state",
        "planted.py:14 torch.default_generator.manual_seed",
    ]


def test_no_module_of_the_package_seeds_or_sets_a_global_generator():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += global_seeding_calls(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))
    assert not found, "these calls seed or set a global generator; use a local torch.Generator:\n" + "\n".join(found)


# ------------------------------------------------------------------------------- (b) at run time

def _notebook_lab_names() -> set[str]:
    """The names of ``attn_helpers.lab`` the notebooks' code cells use: ``lab.X``, and ``X`` imported from
    ``attn_helpers`` or ``attn_helpers.lab`` when ``X`` is one of lab's names."""
    names: set[str] = set()
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            code = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and node.module in ("attn_helpers", "attn_helpers.lab"):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lab":
                    names.add(node.attr)
    return {name for name in names if name in lab.__all__}


def _tiny_bert() -> lab.PretrainedModel:
    """A two-layer BERT-style model with random weights from a local generator, and no tokenizer."""
    config = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 16,
              "vocab_size": 30, "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12}
    g = torch.Generator().manual_seed(0)
    shapes = lab.pretrained.expected_shapes(config)
    return lab.PretrainedModel(config, {k: torch.randn(s, generator=g) for k, s in shapes.items()}, None, "test")


def _tiny_runs() -> dict[str, lab.TrainingRun]:
    task = lab.LookupTask(num_pairs=2, num_letters=4, num_digits=3)
    return {"a": lab.train(task, lab.TrainConfig(dim=4, steps=2, snapshot_every=1, held_out=8, batch_size=4))}


def _generation() -> None:
    model, vocab, _ = lab.train_char_model("ab ba", d_model=8, num_heads=2, seq_len=4, batch=2, steps=2)
    lab.generate_greedy(model, vocab.encode("ab")[None], 3, use_cache=True)


def _depth_sweep() -> None:
    stack = _module_drawn_by_caller(lambda: lab.AttentionStack(3, 4, 4, 2))
    lab.depth_sweep(stack, torch.ones(1, 3, 4), [1, 3])


def _module_drawn_by_caller(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """A module a notebook builds after ``torch.manual_seed``: built here from a local generator."""
    with local_random(0):
        return build()


def _training_step() -> None:
    task, config = lab.PreviousTokenTask(seq_len=4, vocab_size=3), lab.TrainConfig(dim=4)
    model = lab.initial_model(task, config)
    lab.training_step(model, lab.Adam(model.parameters()), task, lab.batch_generator(config), 2)


def _knockout_tables() -> None:
    task = lab.LookupTask(num_pairs=2, num_letters=4, num_digits=3)
    knockouts = {0: lab.head_knockout(lab.initial_model(task, lab.TrainConfig(dim=4)), task, held_out=8)}
    lab.knockout_table(knockouts), lab.knockout_summary(knockouts)


def _run_tables() -> None:
    runs = _tiny_runs()
    lab.results_table(runs), lab.timing_table(runs), lab.pattern_match_table(runs["a"]), lab.steps_table({"a": runs})


def _lesson_10() -> None:
    task = lab.NoWrapPreviousTokenTask(seq_len=4, vocab_size=3)
    runs = {"rope": lab.train(task, lab.TrainConfig(dim=4, steps=2, held_out=8, position_scheme="rope"))}
    lab.accuracy_table(lab.accuracy_by_length(runs, [3, 5], held_out=8))
    lab.attention_by_offset(runs["rope"].model, lab.NoWrapPreviousTokenTask(5, 3), trained_len=4, held_out=8)
    lab.held_out_accuracy(runs["rope"].model, task, held_out=8)
    lab.order_blind_accuracy(*lab.held_out_sequences(task, 8))


def _bert() -> None:
    model = _tiny_bert()
    encoder = lab.BertEncoder.from_pretrained(model)
    out = encoder(torch.tensor([[1, 2, 3, 4]]))
    shares = lab.attention_shares(out.stacked_attentions().detach())  # (L, H, 5)
    lab.heads_matching(shares), lab.shares_by_layer_table(shares)
    encoder.layers[0](encoder.embed(torch.tensor([[1, 2]])))  # a BertLayer, as lesson 11 runs it
    pytest.importorskip("transformers")
    lab.to_transformers(model)


def _measuring() -> None:
    x = torch.ones(1, 4, 8)
    lab.measure_peak_memory(lambda: x @ x.transpose(1, 2))
    lab.count_matmul_flops(lambda: x @ x.transpose(1, 2))
    with lab.TensorMemoryTracker():
        x + 1
    lab.fastest_seconds(lambda: x + 1, repeats=2)
    lab.growth_exponent([1, 2], [1, 4])
    lab.attention_flops(1, 4, 8, 8, 2), lab.attention_parameters(8, 8), lab.kv_cache_bytes(
        num_layers=1, num_kv_heads=1, head_dim=2, seq_len=3)


def _probes() -> None:
    scores = torch.linspace(-1, 1, 12).reshape(3, 4)
    lab.attention_entropy(torch.softmax(scores, -1)), lab.softmax_grad_norm(scores, scores)
    lab.softmax_statistics(scores, scores)


def _constant() -> None:
    """A constant: nothing to call."""


def _embed() -> None:
    lab.embed(lab.SENTENCE, 4)


def _load_pretrained() -> None:
    if lab.packaged_model_available():  # the registry package; without it the hub would need the network
        lab.load_pretrained()


def _one_thread() -> None:
    with lab.one_thread():
        torch.ones(3).sum()


def _tasks() -> None:
    g = torch.Generator().manual_seed(0)
    for task in (lab.PreviousTokenTask(4, 3), lab.NoWrapPreviousTokenTask(4, 3), lab.LookupTask(2, 4, 3)):
        tokens, _ = task.sample(2, g)
        lab.pattern_match(torch.ones(2, 1, 1, task.seq_len, task.seq_len) / task.seq_len, task.ideal_attention(tokens))
    lab.TinyAttentionModel.for_task(lab.LookupTask(2, 4, 3), lab.TrainConfig(dim=4)).embed_with_positions(
        torch.zeros(1, 4, dtype=torch.long))


def _lesson_12() -> None:
    layer, rotary = lab.reference_layer("mistral", hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                                        head_dim=8, sliding_window=2)
    x = torch.ones(1, 3, 16, dtype=torch.float64)
    lab.reference_forward(layer, rotary, x, torch.ones(3, 3, dtype=torch.bool).tril())
    lab.weights_after_steps(torch.linspace(-1, 1, 9).reshape(3, 3), window=2, softcap=1.0, sink=0.0)
    lab.window_reach(4, 2, 2)
    lab.windowed_kv_cache_bytes(num_layers=2, local_layers=1, window=2, num_kv_heads=1, head_dim=4, seq_len=3)


def _examples() -> None:
    lab.embedding_table(4)
    lab.sentence_intermediates(lab.SENTENCE, lab.VOCAB, 2, 4, 4, seed=0)


def _cache_sizes() -> None:
    for name in lab.MODEL_CACHE_SIZES:
        lab.model_cache_bytes(name, seq_len=3)


def _lesson_14() -> None:
    task = lab.InductionTask(seq_len=8, vocab_size=4, min_repeat=2, max_repeat=3)
    config = lab.INDUCTION_CONFIG.replace(dim=4, steps=2, snapshot_every=1, held_out=4)
    model, run = lab.train_induction_model(seed=0, config=config, task=task)
    lab.train_many({"a": (task, config)}, measures=lab.INDUCTION_MEASURES)
    tokens = lab.induction_task(3, seed=1, task=task)
    lab.repeat_spans(tokens), lab.repeated_part(tokens), lab.induction_pattern(tokens), lab.attention_weights(model, tokens)
    lab.previous_token_scores(model, tokens), lab.induction_scores(model, tokens)
    lab.repeated_loss(model, tokens, [(0, 0)]), lab.layer_weights(model.layers[1], model.embed(tokens),
                                                                 model.embed(tokens))
    lab.circuit_table({0: lab.find_circuit(model, tokens)}, {0: lab.loss_drop_step(run)})
    lab.text_table([["a", "b"]], ["<2", ">2"])


#: Per name a notebook uses, what calls it here (several names share one call). Constants have no call.
CALLS: dict[str, Callable[[], object]] = {
    **dict.fromkeys(["IGNORE", "HELD_OUT_SEED", "MODEL_ATTENTION_SIZES", "GENERATION_TEXT", "PATTERNS"], _constant),
    **dict.fromkeys(["PreviousTokenTask", "NoWrapPreviousTokenTask", "LookupTask", "pattern_match",
                     "TinyAttentionModel", "TrainConfig"], _tasks),
    **dict.fromkeys(["initial_model", "Adam", "batch_generator", "training_step"], _training_step),
    **dict.fromkeys(["train", "train_many", "results_table", "timing_table", "pattern_match_table",
                     "steps_table"], _run_tables),
    **dict.fromkeys(["head_knockout", "knockout_table", "knockout_summary"], _knockout_tables),
    **dict.fromkeys(["held_out_accuracy", "order_blind_accuracy", "accuracy_by_length", "accuracy_table",
                     "attention_by_offset"], _lesson_10),
    **dict.fromkeys(["train_char_model", "generate_greedy", "TinyCausalLM"], _generation),
    **dict.fromkeys(["BertEncoder", "BertLayer", "attention_shares", "heads_matching", "shares_by_layer_table",
                     "to_transformers"], _bert),
    **dict.fromkeys(["TensorMemoryTracker", "measure_peak_memory", "count_matmul_flops", "fastest_seconds",
                     "growth_exponent", "attention_flops", "attention_parameters", "kv_cache_bytes"], _measuring),
    **dict.fromkeys(["attention_entropy", "softmax_grad_norm", "softmax_statistics"], _probes),
    **dict.fromkeys(["AttentionStack", "depth_sweep"], _depth_sweep),
    **dict.fromkeys(["MODEL_CACHE_SIZES", "model_cache_bytes"], _cache_sizes),
    **dict.fromkeys(["WINDOWED_ATTENTION_SIZES", "reference_forward", "reference_layer", "weights_after_steps",
                     "window_reach", "windowed_kv_cache_bytes"], _lesson_12),
    **dict.fromkeys(["embedding_table", "sentence_intermediates"], _examples),
    **dict.fromkeys(["INDUCTION_CONFIG", "INDUCTION_MEASURES", "InductionTask", "attention_weights", "circuit_table",
                     "find_circuit", "induction_pattern", "induction_scores", "induction_task", "layer_weights",
                     "loss_drop_step", "previous_token_scores", "repeat_spans", "repeated_part", "repeated_loss", "text_table",
                     "train_induction_model"], _lesson_14),
    "embed": _embed,
    "one_thread": _one_thread,
    "load_pretrained": _load_pretrained,
}


def test_every_lab_name_a_notebook_uses_has_a_call_here():
    missing = sorted(_notebook_lab_names() - set(CALLS))
    assert not missing, f"add a call for these names the notebooks use: {missing}"


@pytest.mark.parametrize("call", sorted(set(CALLS.values()), key=lambda f: f.__name__), ids=lambda f: f.__name__)
def test_lab_calls_leave_the_global_random_state_alone(call):
    before = torch.random.get_rng_state()
    with lab.one_thread():  # one_thread's own test restores the thread count; keep it here too
        call()
    assert torch.equal(torch.random.get_rng_state(), before), f"{call.__name__} changed the global random state"


def test_local_random_draws_what_manual_seed_would_and_leaves_the_global_state_alone():
    before = torch.random.get_rng_state()
    with local_random(3):
        built = lab.TinyAttentionModel(10, 4, 6, dim=8, position_scheme="rope")
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(3)  # the reference: what the global generator gives after seeding (the test may seed)
    reference = lab.TinyAttentionModel(10, 4, 6, dim=8, position_scheme="rope")
    for (name, got), want in zip(built.named_parameters(), reference.parameters()):
        assert torch.equal(got, want), name
    torch.random.set_rng_state(before)


def test_local_random_refuses_a_seed_that_is_not_an_int():
    with pytest.raises(TypeError, match="seed must be an int, got 1.5"):
        with local_random(1.5):
            pass


def test_a_model_for_a_task_is_seeded_by_its_config():
    task = lab.LookupTask(2, 4, 3)
    a = lab.TinyAttentionModel.for_task(task, lab.TrainConfig(dim=4, seed=1))
    b = lab.TinyAttentionModel.for_task(task, lab.TrainConfig(dim=4, seed=1))
    c = lab.TinyAttentionModel.for_task(task, lab.TrainConfig(dim=4, seed=2))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.embed.weight, c.embed.weight)


@pytest.mark.parametrize("draw", [
    lambda: torch.randn(2, 3), lambda: torch.rand(4), lambda: torch.randint(0, 5, (3,)), lambda: torch.randint(7, (2,)),
    lambda: torch.randperm(5), lambda: torch.empty(3).normal_(), lambda: torch.nn.Linear(3, 2).weight,
    lambda: torch.nn.functional.dropout(torch.ones(8), 0.5),
], ids=["randn", "rand", "randint_low", "randint", "randperm", "normal_", "Linear", "dropout"])
def test_local_random_draws_what_a_manual_seed_would_and_leaves_the_global_generator(draw):
    # every kind of draw (with or without a generator overload, a module's init, dropout) gives manual_seed's numbers
    before = torch.random.get_rng_state()
    with local_random(606):
        mine = draw()
    assert torch.equal(torch.random.get_rng_state(), before)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(606)
        expected = draw()
    assert torch.equal(mine, expected)
