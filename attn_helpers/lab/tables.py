"""Lessons 08, 10, 11 and 14: the text tables, all through :func:`text_table`; rounded so every run prints the same,
except :func:`timing_table`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import Tensor

from .bert import PATTERNS
from .experiments import HeadKnockout
from .induction import Circuit
from .tasks import LETTERS
from .training import TrainingRun

__all__ = ["text_table", "results_table", "timing_table", "pattern_match_table", "steps_table", "knockout_table",
           "knockout_summary", "accuracy_table", "shares_by_layer_table", "circuit_table"]


def text_table(rows: Sequence[Sequence[object]], specs: Sequence[str]) -> str:
    """Lessons 08, 10, 11 and 14: ``rows`` of cells as lines, cell ``j`` formatted with ``specs[j]`` (``"<12"``,
    ``">8"``, ``""``; a bare ``"<"`` or ``">"``: as wide as the column's widest cell), joined by two spaces."""
    for i, row in enumerate(rows):
        if len(row) > len(specs):
            raise ValueError(f"rows[{i}] has {len(row)} cells, but specs gives only {len(specs)} columns")
    specs = [spec + str(max(len(str(row[j])) for row in rows if len(row) > j)) if spec in ("<", ">") else spec
             for j, spec in enumerate(specs)]
    return "\n".join("  ".join(format(cell, spec) for cell, spec in zip(row, specs)) for row in rows)


# --- Training runs (lesson 08) ---

def _steps_text(step: int | None) -> str:
    return "never" if step is None else str(step)


def results_table(runs: Mapping[str, TrainingRun], *, accuracies: Sequence[float] = (0.9, 0.99)) -> str:
    """Lesson 08: one line per run: held-out accuracy and loss at the end, the first snapshot step with at least each
    of ``accuracies`` held-out accuracy (``never`` if not within the run), and the final pattern match of every head
    (``H1``: head 1; ``L0H1``: layer 0, head 1, when there are several layers)."""
    specs = ["<", ">8", ">6", *[">7"] * len(accuracies), ""]
    rows = [["run", "accuracy", "loss", *[f"to {a:.0%}" for a in accuracies],
             "pattern match per head (end; L0H1 = layer 0, head 1)"]]
    for name, run in runs.items():
        L, H = run.pattern_match.shape[1:]
        heads = ", ".join(f"{f'L{l}' if L > 1 else ''}H{h}: {run.pattern_match[-1, l, h].item():.2f}"
                          for l in range(L) for h in range(H))
        rows.append([name, f"{run.final_accuracy:.3f}", f"{run.final_loss:.3f}",
                     *[_steps_text(run.steps_to(a)) for a in accuracies], heads])
    return text_table(rows, specs)


def timing_table(runs: Mapping[str, TrainingRun]) -> str:
    """Lessons 08, 10 and 14: wall-clock training time of each run and in total (differs from run to run: print it
    apart)."""
    rows = [[name, f"{run.config.steps} steps", f"{run.seconds:.1f} s",
             f"({1000 * run.seconds / run.config.steps:.1f} ms per step)"] for name, run in runs.items()]
    rows.append(["total", f"{sum(r.config.steps for r in runs.values())} steps",
                 f"{sum(r.seconds for r in runs.values()):.1f} s"])
    return text_table(rows, ["<", ">10", ">7", ""])


def pattern_match_table(run: TrainingRun, *, every: int | None = None) -> str:
    """Lesson 08: held-out accuracy and every head's pattern match over training, one line per snapshot (every
    ``every`` steps; default: the run's snapshots)."""
    L, H = run.pattern_match.shape[1:]
    names = [f"{f'L{l} ' if L > 1 else ''}head {h}" for l in range(L) for h in range(H)]
    rows = [["step", "accuracy", *names]]
    for i, step in enumerate(run.steps):
        if every is not None and step % every and step != run.steps[-1]:
            continue
        values = [f"{v:.2f}" for v in run.pattern_match[i].reshape(-1).tolist()]  # (L*H,)
        rows.append([str(step), f"{run.held_out_accuracy[i].item():.3f}", *values])
    return text_table(rows, [">5", ">8", *[">7"] * len(names)])


def steps_table(runs: Mapping[str, Mapping[int, TrainingRun]], *, accuracies: Sequence[float] = (0.9, 0.99)) -> str:
    """Lesson 08: steps to each of ``accuracies`` held-out accuracy of ``runs[name][seed]``: one line per name, one
    column per seed, cells like ``60/90`` (``never``: not within the run's steps)."""
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    if not seeds:
        raise ValueError("runs must map at least one name to at least one seed's TrainingRun, got none")
    cells = {name: {seed: "/".join(_steps_text(run.steps_to(a)) for a in accuracies) for seed, run in by_seed.items()}
             for name, by_seed in runs.items()}
    column = max([len(c) for row in cells.values() for c in row.values()] + [len(f"seed {seeds[-1]}")])
    rows = [["run", *[f"seed {seed}" for seed in seeds]]]
    rows += [[name, *[row.get(seed, "-") for seed in seeds]] for name, row in cells.items()]
    return text_table(rows, ["<", *[f">{column}"] * len(seeds)])


# --- Knocking heads out (lesson 08) ---

def _check_knockouts(results: object) -> HeadKnockout:
    """The first of ``results``, after checking them."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty mapping, e.g. seed -> HeadKnockout")
    for key, result in results.items():
        if not isinstance(result, HeadKnockout):
            raise TypeError(f"results[{key!r}] must be a HeadKnockout (from head_knockout), got {type(result).__name__}")
    return next(iter(results.values()))


def knockout_table(results: Mapping[object, HeadKnockout], *, key_name: str = "seed") -> str:
    """Lesson 08: :func:`head_knockout`'s accuracies as text: per result (e.g. per seed) one line with nothing knocked
    out and one per head knocked out; columns: all questions, then each letter."""
    letters = [LETTERS[c].upper() for c in range(_check_knockouts(results).by_letter.shape[1])]
    rows = [[key_name, "knocked out", "all", *letters]]
    for name, result in results.items():
        for i, text in enumerate(result.labels):
            rows.append([str(name) if i == 0 else "", text, f"{result.accuracy[i].item():.3f}",
                         *[f"{v:.2f}" for v in result.by_letter[i].tolist()]])
    return text_table(rows, [">", "<", ">5", *[">4"] * len(letters)])


def knockout_summary(results: Mapping[object, HeadKnockout], *, key_name: str = "seed", small: float = 0.1,
                     large: float = 0.3) -> str:
    """Lesson 08: per result: the accuracy with each head knocked out; the letters *one head answers alone* (knocking
    that head out costs at least ``large``, knocking out any other head less than ``small``); and how many letters
    *need every head* (knocking out any one head costs at least ``small``)."""
    heads = _check_knockouts(results).labels[1:]
    head_cols = [f"without {h}" for h in heads]
    rows = [[key_name, *head_cols, "every head needed", "one head answers alone"]]
    for name, result in results.items():
        cost = result.cost()  # (K-1, letters)
        alone = []
        for c in range(cost.shape[1]):
            big = (cost[:, c] >= large).nonzero().flatten().tolist()
            others_small = [h for h in big if all(cost[o, c] < small for o in range(cost.shape[0]) if o != h)]
            alone += [f"{LETTERS[c].upper()} ({heads[h]})" for h in others_small]
        needed = int((cost >= small).all(dim=0).sum())
        rows.append([str(name), *[f"{result.accuracy[i + 1].item():.3f}" for i in range(len(head_cols))],
                     f"{needed} of {cost.shape[1]}", ", ".join(alone) if alone else "none"])
    return text_table(rows, [">", *[">"] * len(head_cols), ">17", ""])


# --- Accuracy at any length (lesson 10) and what the heads of a pretrained model look at (lesson 11) ---

def accuracy_table(results: Mapping[str, Mapping[int, float | None]], *, digits: int = 2,
                   reference: Mapping[int, float] | None = None, reference_name: str = "") -> str:
    """Lessons 10 and 12: :func:`accuracy_by_length`'s results as text: one row per run, one column per length (``no
    row`` where the model has no position vector); optionally a ``reference`` row."""
    lengths = list(next(iter(results.values())))
    named = dict(results)
    if reference is not None:
        named[reference_name or "reference"] = dict(reference)
    width = max(len(name) for name in named)
    rows = [["N =", *[str(n) for n in lengths]]]
    rows += [[name, *["no row" if values[n] is None else f"{values[n]:.{digits}f}" for n in lengths]]
             for name, values in named.items()]
    return text_table(rows, [f"<{width}", *[">6"] * len(lengths)])


def shares_by_layer_table(shares: Tensor) -> str:
    """Lesson 11: a text table: each layer's average share per pattern over its heads, and each layer's largest
    single-head share per pattern (2 digits). ``shares``: ``(L, H, 5)`` from
    :func:`attn_helpers.lab.attention_shares`."""
    if shares.ndim != 3 or shares.shape[-1] != len(PATTERNS):
        raise ValueError(f"shares must have shape (L, H, {len(PATTERNS)}), got {list(shares.shape)}")
    rows = [["layer", *PATTERNS, " (mean over heads / largest head)"]]
    for layer in range(shares.shape[0]):
        rows.append([str(layer), *[f"{shares[layer, :, p].mean():.2f}/{shares[layer, :, p].max():.2f}"
                                   for p in range(len(PATTERNS))]])
    return text_table(rows, [">5", *[">9"] * len(PATTERNS), ""])


# --- The induction circuit (lesson 14) ---

def _heads_text(heads: list[tuple[int, int]], scores: Tensor) -> str:
    return ", ".join(f"L{layer}H{head} {scores[layer, head].item():.2f}" for layer, head in heads) or "none"


def circuit_table(circuits: Mapping[object, Circuit], drop_steps: Mapping[object, int | None] | None = None, *,
                  key_name: str = "seed", knockouts: bool = True) -> str:
    """Lesson 14: one line per circuit (e.g. per seed): the previous-token heads and induction heads with their scores
    (``L0H1 0.99``: layer 0, head 1), the best score of each kind, the loss drop step (if given), the repeated part's
    loss and, unless ``knockouts=False`` (the lesson holds them back until its knockout exercise has a prediction),
    the loss with each group knocked out, in nats."""
    def loss(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    drop = drop_steps or {}
    rows = [[key_name, "previous-token heads", "induction heads", "best prev", "best ind", "drop at", "loss",
             "w/o prev", "w/o ind"]]
    for key, c in circuits.items():
        rows.append([str(key), _heads_text(c.previous_heads, c.previous), _heads_text(c.induction_heads, c.induction),
                     f"{c.previous[0].max().item():.2f}", f"{c.induction[1:].max().item():.2f}",
                     _steps_text(drop.get(key)), loss(c.loss), loss(c.loss_without_previous),
                     loss(c.loss_without_induction)])
    formats = [">", "<", "<", ">9", ">8", ">7", ">5", ">8", ">7"]
    if not knockouts:
        rows, formats = [row[:-2] for row in rows], formats[:-2]
    return text_table(rows, formats)
