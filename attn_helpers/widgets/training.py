"""Lesson 08's widgets and pictures: a progress bar for training, and attention snapshots over steps.

- :class:`TrainingProgress`: one ``ipywidgets.IntProgress`` over all the steps of
  :func:`attn_helpers.training.train_many`, with the run's name and step beside it.
- :class:`AttentionSnapshotExplorer`: a slider over training steps (and a dropdown over runs) shows
  every head's attention on one held-out sequence at that step, next to the ideal pattern, with
  each head's pattern match in its title and in the status line; below, the pattern match and the
  held-out accuracy over the whole run, a line marking the step. The snapshots come from the
  training run itself (:class:`attn_helpers.training.TrainingRun`); nothing is recomputed.
- :func:`plot_learning_curves`, :func:`plot_snapshots`: the static pictures of the lesson.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..views.plotting import HEAD_COLOURS, WEIGHTS_CMAP, to_numpy
from ..views.plotting import heatmap
from ..lab.training import Task, TrainConfig, TrainingRun
from ._base import InvalidCombination
from ._display import widget_bundle
from ._blit import BlitExplorer

__all__ = ["TrainingProgress", "AttentionSnapshotExplorer", "plot_learning_curves", "plot_snapshots"]

ACCURACY_COLOUR = "0.2"
LINESTYLES = ("-", "--", ":", "-.")


def _head_name(layer: int, head: int, num_layers: int) -> str:
    return f"layer {layer} head {head}" if num_layers > 1 else f"head {head}"


def _panel(values: Any, labels: Sequence[str], ax: Any, *, title: str, xlabel: str, ylabel: str,
           x_ticks: bool = True, y_ticks: bool = True) -> Any:
    """One attention heatmap ``(N, N)`` in [0, 1] with token labels on the axes that carry ticks."""
    # Inner panels carry no labels, and labels are text rather than ticks: ticks cost most of the drawing time.
    return heatmap(values, labels, labels, ax=ax, title=title, xlabel=xlabel, ylabel=ylabel, cmap=WEIGHTS_CMAP,
                   vmin=0.0, vmax=1.0, annotate=False, colorbar=False, fmt="{:.2f}", fontsize=None,
                   colorbar_label=None, x_ticks=x_ticks, y_ticks=y_ticks, text_labels=True)


def _check_runs(runs: Mapping[str, TrainingRun] | TrainingRun) -> dict[str, TrainingRun]:
    if isinstance(runs, TrainingRun):
        runs = {runs.task.name: runs}
    if not isinstance(runs, Mapping) or not runs:
        raise TypeError("runs must be a TrainingRun or a non-empty mapping name -> TrainingRun")
    for name, run in runs.items():
        if not isinstance(run, TrainingRun):
            raise TypeError(f"runs[{name!r}] must be a TrainingRun, got {type(run).__name__}")
    return dict(runs)


# --------------------------------------------------------------------------------------------
# Progress bar
# --------------------------------------------------------------------------------------------

class TrainingProgress:
    """A progress bar over every step of several training runs: ``progress(name, step, total)``.

    ``TrainingProgress(jobs)`` with the ``name -> (task, config)`` mapping given to
    :func:`attn_helpers.training.train_many`; display it, then pass it as ``progress=``. The bar
    turns green when the last run has finished.
    """

    def __init__(self, jobs: Mapping[str, tuple[Task, TrainConfig]]) -> None:
        self.offsets: dict[str, int] = {}
        total = 0
        for name, (_, config) in jobs.items():
            self.offsets[name] = total
            total += config.steps
        self.total = total
        self.bar = W.IntProgress(value=0, min=0, max=max(total, 1), description="training",
                                 style={"description_width": "initial"})
        self.label = W.Label(value=f"0 of {total} steps")
        self.widget = W.HBox([self.bar, self.label])

    def __call__(self, name: str, step: int, total: int) -> None:
        if name not in self.offsets:
            raise ValueError(f"unknown run {name!r}; this bar counts {list(self.offsets)}")
        done = self.offsets[name] + step
        self.bar.value = done
        self.label.value = f"{name}: step {step} of {total}"
        if done >= self.total:
            self.bar.bar_style = "success"
            self.label.value = f"done: {self.total} steps"

    def __repr__(self) -> str:
        return f"TrainingProgress({self.bar.value} of {self.total} steps)"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return widget_bundle(self.widget, repr(self), **kwargs)


# --------------------------------------------------------------------------------------------
# The explorer
# --------------------------------------------------------------------------------------------

class AttentionSnapshotExplorer(BlitExplorer):
    """Slide over training steps: every head's attention at that step, the ideal, and the match.

    ``AttentionSnapshotExplorer(runs, run=None, step=None)`` with ``runs`` a mapping
    ``name -> TrainingRun`` (or one run); ``run`` picks the first run shown (default: the first),
    ``step`` the first step (default: its last). The slider moves in steps of the runs' snapshot
    interval; a step the chosen run did not record (beyond its last step, or between its
    snapshots) is explained in words.
    """

    def __init__(self, runs: Mapping[str, TrainingRun] | TrainingRun, *, run: str | None = None,
                 step: int | None = None) -> None:
        self.runs = _check_runs(runs)
        run = next(iter(self.runs)) if run is None else run
        if run not in self.runs:
            raise ValueError(f"run must be one of {list(self.runs)}, got {run!r}")
        every = math.gcd(*(r.config.snapshot_every for r in self.runs.values()))
        last = max(r.config.steps for r in self.runs.values())
        step = self.runs[run].steps[-1] if step is None else step
        if not (isinstance(step, int) and 0 <= step <= last and step % every == 0):
            raise ValueError(f"step must be a multiple of {every} in [0, {last}], got {step!r}")
        self._drawn: str | None = None
        style = {"description_width": "initial"}
        controls = {
            "run": W.Dropdown(options=list(self.runs), value=run, description="run", style=style),
            "step": W.IntSlider(value=step, min=0, max=last, step=every, description="training step",
                                style=style, continuous_update=True),
        }
        super().__init__(controls, figsize=self._figsize(self.runs[run]), dpi=80)

    @staticmethod
    def _figsize(run: TrainingRun) -> tuple[float, float]:
        L, H = run.pattern_match.shape[1:]
        return (1.6 + 2.4 * (L * H + 1), 5.6)

    # -- figure ------------------------------------------------------------------------------
    def needs_redraw(self, run: str, step: int) -> bool:
        return run != self._drawn

    def draw(self, figure: Figure) -> None:
        name = self.controls["run"].value
        run = self.runs[name]
        L, H = run.pattern_match.shape[1:]
        figure.set_size_inches(*self._figsize(run))
        n_panels = L * H + 1
        width = figure.get_figwidth()
        grid = figure.add_gridspec(2, n_panels, height_ratios=(1.55, 1.0), left=0.55 / width,
                                   right=1.0 - 1.05 / width, top=0.89, bottom=0.09, hspace=0.6, wspace=0.3)
        labels = run.probe_labels
        self.images, self.titles = [], []
        for index in range(L * H):
            layer, head = divmod(index, H)
            ax = figure.add_subplot(grid[0, index])
            image = _panel(np.zeros((len(labels), len(labels))), labels, ax, title=_head_name(layer, head, L),
                           xlabel="key", ylabel="query" if index == 0 else "", y_ticks=index == 0)
            self.images.append(image)
            self.titles.append(ax.title)
        ax = figure.add_subplot(grid[0, L * H])
        ideal = _panel(run.probe_ideal, labels, ax, title="ideal pattern", xlabel="key", ylabel="", y_ticks=False)
        cax = ax.inset_axes((1.08, 0.0, 0.07, 1.0))
        figure.colorbar(ideal, cax=cax, label="attention weight")
        curves = figure.add_subplot(grid[1, :-1])  # the last column's width holds the legend
        steps = np.asarray(run.steps)
        match = to_numpy(run.pattern_match)  # (S, L, H)
        for layer in range(L):
            for head in range(H):
                curves.plot(steps, match[:, layer, head], LINESTYLES[layer % len(LINESTYLES)],
                            color=HEAD_COLOURS[head % len(HEAD_COLOURS)],
                            label=f"match, {_head_name(layer, head, L)}")
        curves.plot(steps, to_numpy(run.held_out_accuracy), color=ACCURACY_COLOUR, lw=1.0, ls=(0, (1, 1.5)),
                    label="held-out accuracy")
        curves.set(xlim=(0, run.config.steps), ylim=(0.0, 1.03), xlabel="training step")
        curves.grid(True, alpha=0.3)
        curves.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
        self.marker = curves.axvline(0, color="#b35806", lw=1.5)
        figure.suptitle(f"{name}: {run.config.describe()}", fontsize=10)
        self.dynamic([*self.images, *self.titles, self.marker])
        self._drawn = name

    def update(self, run: str, step: int) -> str:
        chosen = self.runs[run]
        if step > chosen.config.steps:
            raise InvalidCombination(f"the run {run!r} trained for {chosen.config.steps} steps, so there is no "
                                     f"step {step}; pick a step from 0 to {chosen.config.steps}")
        if step not in chosen.steps:
            raise InvalidCombination(f"the run {run!r} kept a snapshot every {chosen.config.snapshot_every} steps "
                                     f"(and at its last step {chosen.config.steps}); step {step} was not recorded")
        index = chosen.snapshot(step)
        L, H = chosen.pattern_match.shape[1:]
        weights = to_numpy(chosen.probe_weights[index])  # (L, H, N, N)
        match = chosen.pattern_match[index]  # (L, H)
        parts = []
        for i, (image, title) in enumerate(zip(self.images, self.titles)):
            layer, head = divmod(i, H)
            image.set_data(weights[layer, head])
            title.set_text(f"{_head_name(layer, head, L)}: match {match[layer, head].item():.2f}")
            parts.append(f"{_head_name(layer, head, L)} {match[layer, head].item():.2f}")
        self.marker.set_xdata([step, step])
        accuracy = chosen.held_out_accuracy[index].item()
        return f"held-out accuracy {accuracy:.3f}, pattern match: " + ", ".join(parts)

    def table(self, run: str, step: int) -> str:
        chosen = self.runs[run]
        words = " ".join(html.escape(label) for label in chosen.probe_labels)
        return (f'<div style="font-size:90%">The pictures show one held-out sequence: <code>{words}</code>. '
                f"The pattern match is measured on all {chosen.config.held_out} held-out sequences.</div>")


# --------------------------------------------------------------------------------------------
# Static pictures
# --------------------------------------------------------------------------------------------

def plot_learning_curves(runs: Mapping[str, TrainingRun] | TrainingRun, *, accuracy: float | None = 0.99,
                         figsize: tuple[float, float] = (14.0, 3.4)) -> Figure:
    """Three panels over training steps, one colour per run: the training loss (log scale), the
    held-out accuracy (a dotted line at ``accuracy``), and the pattern match of each run's best head
    (the head closest to the ideal at the end, named in the legend). Returns the figure."""
    runs = _check_runs(runs)
    figure, axes = plt.subplots(1, 3, figsize=figsize)
    for i, (name, run) in enumerate(runs.items()):
        colour = HEAD_COLOURS[i % len(HEAD_COLOURS)]
        layer, head = run.best_head()
        axes[0].plot(np.arange(1, run.config.steps + 1), to_numpy(run.train_loss), color=colour, lw=1.0)
        axes[1].plot(run.steps, to_numpy(run.held_out_accuracy), color=colour)
        axes[2].plot(run.steps, to_numpy(run.pattern_match[:, layer, head]), color=colour,
                     label=f"{name}\n(best: {_head_name(layer, head, run.pattern_match.shape[1])})")
    axes[0].set(yscale="log", title="training loss", xlabel="training step")
    axes[1].set(ylim=(0.0, 1.03), title="held-out accuracy", xlabel="training step")
    axes[2].set(ylim=(0.0, 1.03), title="pattern match of the best head", xlabel="training step")
    if accuracy is not None:
        axes[1].axhline(accuracy, color="0.5", lw=0.8, ls=":")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    figure.tight_layout(rect=(0.0, 0.0, 0.85, 1.0))
    figure.legend(*axes[2].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(0.855, 0.5),
                  fontsize=8, frameon=False, labelspacing=0.9)
    return figure


def plot_snapshots(run: TrainingRun, steps: Sequence[int], *, title: str | None = None) -> Figure:
    """Every head's attention on the run's probe sequence at each of ``steps`` (one row per head,
    one column per step), and the ideal pattern at the top right.

    Each panel's title gives the step and that head's pattern match there. Returns the figure."""
    if not steps:
        raise ValueError("steps must name at least one recorded step, got none")
    indices = [run.snapshot(step) for step in steps]
    L, H = run.pattern_match.shape[1:]
    rows, cols = L * H, len(steps) + 1
    panel = 1.9
    width, height = 1.3 + cols * panel + (cols - 1) * 0.35 + 1.0, 0.9 + rows * panel + (rows - 1) * 0.8
    figure = plt.figure(figsize=(width, height))
    grid = figure.add_gridspec(rows, cols, left=0.75 / width, right=1.0 - 1.1 / width, bottom=0.55 / height,
                               top=1.0 - 0.55 / height, wspace=0.35 / panel, hspace=0.8 / panel)
    labels = run.probe_labels
    for r in range(rows):
        layer, head = divmod(r, H)
        for c, (step, index) in enumerate(zip(steps, indices)):
            ax = figure.add_subplot(grid[r, c])
            _panel(run.probe_weights[index, layer, head], labels, ax,
                   title=f"step {step}: match {run.pattern_match[index, layer, head].item():.2f}",
                   xlabel="key" if r == rows - 1 else "", ylabel=f"{_head_name(layer, head, L)}\nquery" if c == 0 else "",
                   x_ticks=r == rows - 1, y_ticks=c == 0)
    ax = figure.add_subplot(grid[0, cols - 1])
    image = _panel(run.probe_ideal, labels, ax, title="ideal", xlabel="key", ylabel="", y_ticks=False)
    cax = figure.add_axes((1.0 - 0.85 / width, 0.55 / height, 0.12 / width, 1.0 - 1.1 / height))
    figure.colorbar(image, cax=cax, label="attention weight")
    figure.suptitle(title or f"{run.task.name}: every head over training", fontsize=11)
    return figure
