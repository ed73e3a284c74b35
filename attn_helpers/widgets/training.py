"""Lesson 08's widgets: a progress bar for training, and attention snapshots over steps (the lesson's static
pictures of the same runs: :func:`attn_helpers.views.plot_learning_curves` and :func:`~.views.plot_snapshots`).
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping
from typing import Any

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure

from ..lab import Task, TrainConfig, TrainingRun
from ..views import HEAD_COLOURS, head_name, runs_by_name, to_numpy, weights_panel
from ._base import WIDE, Explorer, InvalidCombination, check_choice, int_slider
from ._display import widget_bundle

__all__ = ["TrainingProgress", "AttentionSnapshotExplorer"]

ACCURACY_COLOUR = "0.2"
LINESTYLES = ("-", "--", ":", "-.")


class TrainingProgress:
    """Lessons 08, 10 and 14: A progress bar over every step of several training runs: ``progress(name, step, total)``.

    ``jobs``: the ``name -> (task, config)`` mapping given to :func:`attn_helpers.lab.train_many`; display it, then
    pass it as ``progress=``. The bar turns green when the last run has finished.
    """

    def __init__(self, jobs: Mapping[str, tuple[Task, TrainConfig]]) -> None:
        steps = [config.steps for _, config in jobs.values()]
        self.offsets = dict(zip(jobs, itertools.accumulate([0, *steps])))  # the steps done before each run
        self.total = sum(steps)
        self.bar = W.IntProgress(value=0, min=0, max=max(self.total, 1), description="training", style=WIDE)
        self.label = W.Label(value=f"0 of {self.total} steps")
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


class AttentionSnapshotExplorer(Explorer):
    """Lessons 08 and 14: Slide over training steps: every head's attention at that step, the ideal, and the match.

    ``runs``: ``name -> TrainingRun`` (or one run); ``run`` is shown first (default: the first), at ``step``
    (default: its last). Every head's attention on one held-out sequence beside the ideal pattern, each head's
    pattern match in its title and the status line; below, the match and the held-out accuracy over the run, a
    line at the step. The snapshots come from the run itself: nothing is recomputed. The slider moves in steps of
    the runs' snapshot interval; a step the chosen run did not record is explained in words.
    """

    def __init__(self, runs: Mapping[str, TrainingRun] | TrainingRun, *, run: str | None = None,
                 step: int | None = None) -> None:
        self.runs = runs_by_name(runs)
        run = next(iter(self.runs)) if run is None else run
        check_choice("run", run, self.runs)
        every = math.gcd(*(r.config.snapshot_every for r in self.runs.values()))
        last = max(r.config.steps for r in self.runs.values())
        step = self.runs[run].steps[-1] if step is None else step
        if not (isinstance(step, int) and 0 <= step <= last and step % every == 0):
            raise ValueError(f"step must be a multiple of {every} in [0, {last}], got {step!r}")
        self._drawn: str | None = None
        controls = {
            "run": W.Dropdown(options=list(self.runs), value=run, description="run", style=WIDE),
            "step": int_slider("training step", step, 0, last, every, continuous_update=True),
        }
        super().__init__(controls, figsize=self._figsize(self.runs[run]), dpi=80)
        # Every run's figure drawn now (about a quarter of a second each): switching runs only swaps it in.
        self.prepare_layouts({"run": name} for name in self.runs)

    @staticmethod
    def _figsize(run: TrainingRun) -> tuple[float, float]:
        L, H = run.pattern_match.shape[1:]
        # 400 px tall at 80 dpi: with its controls it fits a laptop screen; at most 920 px wide, the notebook's
        # column on a laptop (wider, the page shrinks the picture and its text with it)
        return (min(1.6 + 2.4 * (L * H + 1), 11.5), 5.0)

    layout_attributes = ("images", "titles", "marker", "_drawn")  # one figure per run, kept

    def layout_key(self, run: str, step: int) -> str:
        return run

    def needs_redraw(self, run: str, step: int) -> bool:
        return run != self._drawn

    def draw(self, figure: Figure) -> None:
        name = self.controls["run"].value
        run = self.runs[name]
        L, H = run.pattern_match.shape[1:]
        figure.set_size_inches(*self._figsize(run))
        n_panels = L * H + 1
        width, height = figure.get_size_inches()  # margins in inches: room for the titles above, the axis label below
        # "layer 1 head 0: match 0.74" is wider than a panel of five: two layers' titles take two lines
        top = 0.62 + (0.2 if L > 1 else 0.0)
        grid = figure.add_gridspec(2, n_panels, height_ratios=(1.6, 1.0), left=0.55 / width,
                                   right=1.0 - 1.05 / width, top=1.0 - top / height, bottom=0.5 / height,
                                   hspace=0.38, wspace=0.3)
        labels = run.probe_labels
        self.images, self.titles = [], []
        for index in range(L * H):
            layer, head = divmod(index, H)
            ax = figure.add_subplot(grid[0, index])
            image = weights_panel(np.zeros((len(labels), len(labels))), labels, ax, title=head_name(layer, head, L),
                                  xlabel="key", ylabel="query" if index == 0 else "", y_ticks=index == 0,
                                  css_dpi=self.css_dpi)
            self.images.append(image)
            self.titles.append(ax.title)
        ax = figure.add_subplot(grid[0, L * H])
        ideal = weights_panel(run.probe_ideal, labels, ax, title="ideal pattern", xlabel="key", ylabel="", y_ticks=False,
                              css_dpi=self.css_dpi)
        cax = ax.inset_axes((1.08, 0.0, 0.07, 1.0))
        figure.colorbar(ideal, cax=cax, label="attention weight")
        curves = figure.add_subplot(grid[1, :-1])  # the last column's width holds the legend
        steps = np.asarray(run.steps)
        match = to_numpy(run.pattern_match)  # (S, L, H)
        for layer, head in np.ndindex(L, H):
            curves.plot(steps, match[:, layer, head], LINESTYLES[layer % len(LINESTYLES)],
                        color=HEAD_COLOURS[head % len(HEAD_COLOURS)], label=f"match, {head_name(layer, head, L)}")
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
        between = "\n" if L > 1 else ": "  # two layers: each title on two lines (draw leaves room)
        parts = []
        for i, (image, title) in enumerate(zip(self.images, self.titles)):
            layer, head = divmod(i, H)
            image.set_data(weights[layer, head])
            title.set_text(f"{head_name(layer, head, L)}{between}match {match[layer, head].item():.2f}")
            parts.append(f"{head_name(layer, head, L)} {match[layer, head].item():.2f}")
        self.marker.set_xdata([step, step])
        accuracy = self._accuracy = chosen.held_out_accuracy[index].item()
        return f"held-out accuracy {accuracy:.3f}, pattern match: " + ", ".join(parts)

    def describe(self, run: str, step: int) -> str:
        chosen = self.runs[run]
        return (f"Run '{run}' at training step {step} of {chosen.config.steps}: heatmaps of each head's attention on "
                f"one held-out sequence ({' '.join(chosen.probe_labels)}) beside the ideal pattern; below, each "
                f"head's pattern match and the held-out accuracy over the run, a line at step {step}. Held-out "
                f"accuracy {self._accuracy:.3f}.")

    def table(self, run: str, step: int) -> str:
        chosen = self.runs[run]
        words = " ".join(html.escape(label) for label in chosen.probe_labels)
        return (f'<div style="font-size:90%">The pictures show one held-out sequence: <code>{words}</code>. '
                f"The pattern match is measured on all {chosen.config.held_out} held-out sequences.</div>")
