"""Lesson 08's widgets driven without a browser: the snapshot explorer's slider and dropdown change the
picture and the status line, a step a run did not record is explained in words, the progress bar
counts every step of every run, and the static pictures draw."""

import matplotlib.pyplot as plt
import pytest

from attn_helpers import views, widgets
from attn_helpers.lab import LookupTask, PreviousTokenTask, TrainConfig, train_many
from widget_support import png_pixels

CONFIG = TrainConfig(steps=20, snapshot_every=5, held_out=32)
JOBS = {
    "previous token": (PreviousTokenTask(), CONFIG.replace(steps=10)),
    "lookup": (LookupTask(), CONFIG),
    "lookup, 2 layers": (LookupTask(), CONFIG.replace(num_layers=2)),
}


@pytest.fixture(scope="module")
def runs():
    return train_many(JOBS)


@pytest.fixture
def explorer(runs):
    return widgets.AttentionSnapshotExplorer(runs, run="lookup", step=10)


def test_starts_valid_with_a_stable_one_line_repr(explorer, runs):
    assert explorer.valid
    run = runs["lookup"]
    i = run.snapshot(10)
    expected = (f"run=lookup step=10 | held-out accuracy {run.held_out_accuracy[i].item():.3f}, pattern match: "
                f"head 0 {run.pattern_match[i, 0, 0].item():.2f}, head 1 {run.pattern_match[i, 0, 1].item():.2f}")
    assert explorer.last_status == expected
    assert repr(explorer) == f"AttentionSnapshotExplorer({expected})"
    assert "\n" not in repr(explorer)


def test_default_step_is_the_last(runs):
    assert widgets.AttentionSnapshotExplorer(runs).last_status.startswith("run=previous token step=10 |")


def test_step_slider_changes_picture_status_and_marker(explorer):
    before, status = explorer.image.value, explorer.last_status
    explorer.set(step=15)
    assert explorer.valid and explorer.image.value != before
    assert explorer.last_status.startswith("run=lookup step=15 |") and explorer.last_status != status
    assert list(explorer.marker.get_xdata()) == [15, 15]
    assert explorer.titles[0].get_text().startswith("head 0: match ")


def test_run_dropdown_redraws_for_the_runs_heads(explorer, runs):
    before = explorer.image.value
    explorer.set(run="lookup, 2 layers")
    assert explorer.valid and explorer.image.value != before
    assert len(explorer.images) == 4 and "layer 1 head 1" in explorer.last_status
    explorer.canvas.draw()  # no two titles overlap (lesson 14's one-line titles ran into each other)
    renderer = explorer.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in (*explorer.titles, explorer.figure.texts[-1])]
    overlapping = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert not overlapping and explorer.titles[0].get_text().startswith("layer 0 head 0\nmatch "), overlapping
    explorer.set(run="previous token")
    assert explorer.valid and len(explorer.images) == 2
    assert explorer.last_status.startswith("run=previous token step=10 |")


def test_switching_runs_draws_no_figure_and_shows_what_a_new_explorer_shows(runs):
    explorer = widgets.AttentionSnapshotExplorer(runs, run="lookup", step=10)
    draws = []
    explorer.draw = lambda figure: draws.append(figure)  # a run switch must not lay a figure out
    for run in ("lookup, 2 layers", "previous token", "lookup"):
        explorer.set(run=run, step=10)
        fresh = widgets.AttentionSnapshotExplorer(runs, run=run, step=10)
        assert explorer.last_status == fresh.last_status
        assert png_pixels(explorer.image.value).shape == png_pixels(fresh.image.value).shape
        assert (png_pixels(explorer.image.value) != png_pixels(fresh.image.value)).mean() == 0, run
    assert draws == []


def test_the_picture_leaves_room_for_the_controls_on_a_laptop_screen(explorer):
    """Lesson 08's explorer (controls, status line, picture) must fit the notebook's visible height in JupyterLab
    on a 1366 x 768 screen: 647 px on a 768-px page with the file browser open, less under a browser's own bars
    (benchmarks/browser_latency.py measures it). A 400-px picture leaves about 100 px for the controls and the
    status line within 500 px; the old 448-px one left about 50 px."""
    for run in ("lookup", "lookup, 2 layers"):
        explorer.set(run=run)
        assert explorer.canvas.get_width_height()[1] / explorer.pixel_density <= 400  # CSS px


def test_a_step_the_run_did_not_reach_is_explained(explorer):
    explorer.set(run="previous token", step=20)
    assert not explorer.valid
    assert "not possible: the run 'previous token' trained for 10 steps" in explorer.last_status
    assert "Traceback" not in explorer.last_status and explorer.image.layout.visibility == "hidden"
    explorer.set(step=5)
    assert explorer.valid and explorer.image.layout.visibility == "visible"


def test_a_step_between_snapshots_is_explained(runs):
    explorer = widgets.AttentionSnapshotExplorer(
        {"every 5": runs["lookup"], "every 10": train_many({"x": (LookupTask(), CONFIG.replace(snapshot_every=10))})["x"]},
        run="every 10", step=10)
    assert explorer.controls["step"].step == 5
    explorer.set(step=15)
    assert not explorer.valid and "kept a snapshot every 10 steps" in explorer.last_status


def test_bad_arguments(runs):
    with pytest.raises(ValueError, match="run must be one of"):
        widgets.AttentionSnapshotExplorer(runs, run="nope")
    with pytest.raises(ValueError, match=r"step must be a multiple of 5 in \[0, 20\]"):
        widgets.AttentionSnapshotExplorer(runs, step=7)
    with pytest.raises(TypeError, match="TrainingRun"):
        widgets.AttentionSnapshotExplorer({"x": 1})


def test_progress_bar_counts_every_step_of_every_run():
    bar = widgets.TrainingProgress(JOBS)
    assert bar.total == 50 and bar.bar.max == 50 and repr(bar) == "TrainingProgress(0 of 50 steps)"
    bar("lookup", 5, 20)
    assert bar.bar.value == 15 and bar.label.value == "lookup: step 5 of 20"
    bar("lookup, 2 layers", 20, 20)
    assert bar.bar.value == 50 and bar.bar.bar_style == "success" and bar.label.value == "done: 50 steps"
    assert "text/plain" in bar._repr_mimebundle_()
    with pytest.raises(ValueError, match="unknown run"):
        bar("other", 1, 2)


def test_progress_bar_follows_a_real_training_run():
    bar = widgets.TrainingProgress({"a": JOBS["previous token"]})
    train_many({"a": JOBS["previous token"]}, progress=bar)
    assert bar.bar.value == bar.total == 10


def test_static_pictures(runs):
    figure = views.plot_learning_curves(runs)
    assert len(figure.axes) == 3 and len(figure.axes[1].lines) == 3 + 1  # one per run + the 99% line
    plt.close(figure)
    figure = views.plot_snapshots(runs["lookup, 2 layers"], [0, 10, 20])
    assert len(figure.axes) == 4 * 3 + 1 + 1  # 4 heads x 3 steps, the ideal, the colour bar
    assert figure.axes[0].get_title() == f"step 0: match {runs['lookup, 2 layers'].pattern_match[0, 0, 0].item():.2f}"
    plt.close(figure)
    for steps in ([0, 10, 20], [0, 5, 10, 15, 20]):  # the figure's title clear of the top panels' (lesson 08 overlapped)
        figure = views.plot_snapshots(runs["lookup"], steps)
        renderer = figure.canvas.get_renderer()
        top = figure.texts[-1].get_window_extent(renderer)
        assert figure.texts[-1].get_text().endswith("every head over training")
        touching = [ax.get_title() for ax in figure.axes if ax.get_title()
                    and ax.title.get_window_extent(renderer).y1 >= top.y0]
        assert not touching, f"the title overlaps the panels' titles {touching}"
        plt.close(figure)
    with pytest.raises(ValueError, match="no snapshot at step 3"):
        views.plot_snapshots(runs["lookup"], [3])
