"""Lesson 08's static pictures of training runs (and lesson 14's loss and scores while its circuit forms): they
draw a finished run's records (:class:`attn_helpers.lab.TrainingRun`) and compute nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .arrays import to_numpy
from .colours import HEAD_COLOURS, WEIGHTS_CMAP
from .display import describe_axes, describe_figure, lines_sentence, number
from .heatmaps import Cells, heatmap
from .labels import _axes_points, _fit_fontsize

__all__ = ["plot_learning_curves", "plot_snapshots", "weights_panel", "head_name", "runs_by_name",
           "plot_circuit_forming"]

READABLE_PX = 8.5  # pixels of the picture: the browser check asks 8 as displayed

RUN_RECORDS = ("task", "config", "steps", "train_loss", "held_out_accuracy", "pattern_match", "probe_weights")


def head_name(layer: int, head: int, num_layers: int) -> str:
    """``"layer 1 head 0"``, or ``"head 0"`` for a one-layer model."""
    return f"layer {layer} head {head}" if num_layers > 1 else f"head {head}"


def readable_labels(labels: Sequence[str], ax: Axes, css_dpi: float | None = None) -> tuple[list[str], float]:
    """Token labels for a square heatmap on ``ax`` and their font size (points): at least :data:`READABLE_PX` pixels
    as the page shows them (``css_dpi``: the page's pixels per inch, default the figure's dpi); where that many do
    not fit beside the axes, every second (third, ...) label is kept and the others are ``""``."""
    n = len(labels)
    side = min(_axes_points(ax))  # points
    readable = READABLE_PX * 72.0 / (css_dpi or ax.figure.dpi)  # points
    fontsize = _fit_fontsize(n, side)
    every = 1
    if fontsize < readable:
        fontsize = readable
        every = math.ceil(n * readable / (0.8 * side))  # a label keeps 80% of its slot, as _fit_fontsize allows
    return [str(label) if i % every == 0 else "" for i, label in enumerate(labels)], fontsize


def weights_panel(values: Any, labels: Sequence[str], ax: Axes, *, title: str, xlabel: str, ylabel: str,
                  x_ticks: bool = True, y_ticks: bool = True, css_dpi: float | None = None) -> Cells:
    """One attention heatmap ``(N, N)`` in [0, 1], token labels (:func:`readable_labels`) on the axes that carry
    ticks, as text: ticks cost most of the drawing time. Returns its cells."""
    shown, fontsize = readable_labels(labels, ax, css_dpi)
    return heatmap(values, shown, shown, ax=ax, title=title, xlabel=xlabel, ylabel=ylabel, cmap=WEIGHTS_CMAP,
                   vmin=0.0, vmax=1.0, annotate=False, colorbar=False, fontsize=fontsize, x_ticks=x_ticks,
                   y_ticks=y_ticks, text_labels=True)


def runs_by_name(runs: Mapping[str, Any] | Any) -> dict[str, Any]:
    """``{name: run}`` from one training run (named after its task) or a non-empty mapping of them (a run: anything
    with the records :data:`RUN_RECORDS`)."""
    if not isinstance(runs, Mapping):
        if not all(hasattr(runs, record) for record in RUN_RECORDS):
            raise TypeError(f"runs must be a TrainingRun or a non-empty mapping name -> TrainingRun, "
                            f"got {type(runs).__name__}")
        runs = {runs.task.name: runs}
    if not runs:
        raise TypeError("runs must be a TrainingRun or a non-empty mapping name -> TrainingRun")
    for name, run in runs.items():
        if not all(hasattr(run, record) for record in RUN_RECORDS):
            raise TypeError(f"runs[{name!r}] must be a TrainingRun, got {type(run).__name__}")
    return dict(runs)


def plot_learning_curves(runs: Mapping[str, Any] | Any) -> Figure:
    """Lesson 08: Three panels over training steps, one colour per run (``runs``: one or ``{name: run}``): the
    training loss (log scale), the held-out accuracy (a dotted line at 0.99), and the pattern match of
    each run's best head (the closest to the ideal at the end, named in the legend). Returns the figure.

    Two panels a row, the legend in the fourth place: at its natural size the figure is about 920 px
    wide, which a notebook on a 1366-px laptop screen shows unshrunk (three in a row were 1,330 px, shown
    at 70 %, their smallest text under 8 px)."""
    runs = runs_by_name(runs)
    figure = plt.figure(figsize=(9.2, 5.8))
    grid = figure.add_gridspec(2, 2)
    axes = [figure.add_subplot(grid[0, 0]), figure.add_subplot(grid[0, 1]), figure.add_subplot(grid[1, 0])]
    for i, (name, run) in enumerate(runs.items()):
        colour = HEAD_COLOURS[i % len(HEAD_COLOURS)]
        layer, head = run.best_head()
        axes[0].plot(np.arange(1, run.config.steps + 1), to_numpy(run.train_loss), color=colour, lw=1.0, label=name)
        axes[1].plot(run.steps, to_numpy(run.held_out_accuracy), color=colour, label=name)
        axes[2].plot(run.steps, to_numpy(run.pattern_match[:, layer, head]), color=colour,
                     label=f"{name}\n(best: {head_name(layer, head, run.pattern_match.shape[1])})")
    axes[0].set(yscale="log", title="training loss", xlabel="training step")
    axes[1].set(ylim=(0.0, 1.03), title="held-out accuracy", xlabel="training step")
    axes[2].set(ylim=(0.0, 1.03), title="pattern match of the best head", xlabel="training step")
    axes[1].axhline(0.99, color="0.5", lw=0.8, ls=":")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        describe_axes(ax, lambda ax=ax: lines_sentence(ax, "Curves"))
    figure.tight_layout(h_pad=1.5)
    # the legend where a fourth panel would be, beside the pattern match it explains
    figure.legend(*axes[2].get_legend_handles_labels(), loc="center left",
                  bbox_to_anchor=(grid[1, 1].get_position(figure).x0, axes[2].get_position().y0
                                  + axes[2].get_position().height / 2),
                  fontsize=9, frameon=False, labelspacing=0.9)
    return figure


def plot_snapshots(run: Any, steps: Sequence[int]) -> Figure:
    """Lesson 08: Every head's attention on the run's probe sequence at each of ``steps`` (each head's panels in order,
    three panels a row), and the ideal pattern after the first head's last step.

    ``steps``: steps the run recorded. Each panel's title gives the step and that head's pattern match there.
    Returns the figure.

    Three panels a row keep the figure about 870 px wide, which a notebook on a 1366-px laptop screen shows
    unshrunk (six in one row were 1,530 px, shown at 61 %)."""
    if not steps:
        raise ValueError("steps must name at least one recorded step, got none")
    per_row = 3
    indices = [run.snapshot(step) for step in steps]
    L, H = run.pattern_match.shape[1:]
    slots = len(steps) + 1  # each head's steps, then the ideal (the first head) or nothing
    wraps = -(-slots // per_row)
    rows, cols = L * H * wraps, min(per_row, slots)
    panel = 1.9
    # 0.8 in above the panels: the figure's title (0.1 in from the top), then the top panels' titles below it
    width, height = 1.3 + cols * panel + (cols - 1) * 0.35 + 1.0, 1.15 + rows * panel + (rows - 1) * 0.8
    figure = plt.figure(figsize=(width, height))
    grid = figure.add_gridspec(rows, cols, left=0.75 / width, right=1.0 - 1.1 / width, bottom=0.55 / height,
                               top=1.0 - 0.8 / height, wspace=0.35 / panel, hspace=0.8 / panel)
    labels = run.probe_labels
    panels = []
    for h in range(L * H):
        layer, head = divmod(h, H)
        for i, (step, index) in enumerate(zip(steps, indices)):
            r, c = h * wraps + i // per_row, i % per_row
            lowest = h == L * H - 1 and i + per_row >= (slots if h == 0 else len(steps))  # nothing drawn below it
            ax = figure.add_subplot(grid[r, c])
            weights_panel(run.probe_weights[index, layer, head], labels, ax,
                          title=f"step {step}: match {run.pattern_match[index, layer, head].item():.2f}",
                          xlabel="key" if lowest else "",
                          ylabel=f"{head_name(layer, head, L)}\nquery" if c == 0 else "",
                          x_ticks=lowest, y_ticks=c == 0)
            panels.append(ax)
    ax = figure.add_subplot(grid[(slots - 1) // per_row, (slots - 1) % per_row])
    image = weights_panel(run.probe_ideal, labels, ax, title="ideal", xlabel="key", ylabel="",
                          y_ticks=(slots - 1) % per_row == 0)
    panels.append(ax)
    for ax in panels:
        describe_axes(ax, "")  # the figure's one sentence, below, says what every panel shows
    matches = [f"{head_name(layer, head, L)}: " + ", ".join(
        f"{number(run.pattern_match[index, layer, head].item())} at step {step}" for step, index in zip(steps, indices))
        for layer in range(L) for head in range(H)]
    describe_figure(figure, f"Attention weights on the {len(labels)}-token probe sequence at steps "
                              f"{', '.join(str(s) for s in steps)}, beside the ideal pattern; the match with the "
                              f"ideal (1 = identical) of {'; '.join(matches)}.")
    cax = figure.add_axes((1.0 - 0.85 / width, 0.55 / height, 0.12 / width, 1.0 - 1.35 / height))
    figure.colorbar(image, cax=cax, label="attention weight")
    figure.suptitle(f"{run.task.name}: every head over training", fontsize=11, y=1.0 - 0.1 / height, va="top")
    return figure


def plot_circuit_forming(steps: Sequence[int], loss: Any, previous: Any, induction: Any, *, guessing: float,
                         drop_step: int | None = None) -> Figure:
    """Lesson 14: a run's loss on the repeated part ``(S,)`` (left, with the uniform guess ``guessing`` and a line
    at 1 nat) and the best previous-token match ``(S,)`` and best induction match ``(S,)`` (right),
    over the snapshot ``steps``; ``drop_step`` marked on both. Returns the figure."""
    steps = np.asarray(steps)
    figure, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6), layout="constrained")
    left.plot(steps, to_numpy(loss), color=HEAD_COLOURS[0], label="loss on the repeated part")
    left.axhline(guessing, color="0.4", ls="--", lw=1.0, label=f"uniform guess ({guessing:.2f})")
    left.axhline(1.0, color="0.4", ls=":", lw=1.0, label="1 nat")
    left.set(xlabel="training step", ylabel="loss (nats)", ylim=(0.0, guessing * 1.15), title="held-out loss")
    right.plot(steps, to_numpy(previous), color=HEAD_COLOURS[1], label="best layer-0 previous-token match")
    right.plot(steps, to_numpy(induction), color=HEAD_COLOURS[2], ls="--", label="best layer-1 induction match")
    right.set(xlabel="training step", ylabel="pattern match", ylim=(0.0, 1.03), title="the two heads' matches")
    for ax in (left, right):
        if drop_step is not None:
            ax.axvline(drop_step, color="#b35806", lw=1.5, label=f"loss below 1 (step {drop_step})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
        describe_axes(ax, lambda ax=ax: lines_sentence(ax, "Curves"))
    return figure
