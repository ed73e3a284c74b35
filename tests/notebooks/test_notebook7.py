"""The lessons in Notebook 7 (``jupyter notebook``), the other front end learners open them in, in headless Chromium.

Lessons 00 and 01 (two explorers, a selection slider and number sliders) are opened in Notebook 7 at 1366 x 768
and device scale 2 (a high-density laptop screen): what the browser console shows while the page loads, Run All
without an error or stderr, every explorer drawn, every picture sharp at that scale and described. Each explorer's
caption is read in the page and the keys it names are pressed on each of its sliders.
Then the first explorer of each is driven the ways that work there, each change checked (status line, then
picture): keys on a focused slider handle that no notebook shortcut takes (End, Home, Page Up, Page Down), a value
typed into a number slider's readout, and every slider dragged with the mouse. The arrow keys are tried too:
Notebook 7 gives them to the notebook (it moves between cells; ``tools/notebook7.py`` says why), which lesson 00
tells learners, naming jupyter/notebook#7716; if they start reaching the slider, the lesson is out of date.

The run goes in the background from the moment the tests are collected (``BACKGROUND_JOBS``, started by
``conftest.py``), alongside the unit tests; these tests report on it, last. Without Chromium or Notebook 7 they
skip (on CI they fail).
"""

from __future__ import annotations

import os

import pytest

from attn_helpers.widgets.heads import CHAN_MAX, CHAN_MIN, CHAN_STEP
from tools import background
from tools.browser_support import HIGH_DENSITY, chromium_missing_reason, find_chromium, picture_problems
from tools.notebook7 import (
    HANDLE_KEYS,
    KNOWN_LOAD_ERRORS,
    NOTEBOOK7_LESSONS,
    Notebook7Observation,
    keys_named,
    lesson_text,
    notebook7_missing_reason,
    run_notebook7,
)

pytestmark = pytest.mark.browser

ON_CI = os.environ.get("CI", "").lower() == "true"
MISSING = chromium_missing_reason() if find_chromium() is None else notebook7_missing_reason()
if MISSING is not None:
    if ON_CI:
        pytest.fail(f"the Notebook 7 tests need it on CI: {MISSING}", pytrace=False)
    pytest.skip(MISSING, allow_module_level=True)

ISSUE = "jupyter/notebook#7716"  # Notebook 7 takes the arrow keys from a widget that has focus (open)
# The steps of tools.notebook7.observe_lesson, in order: a failed step fails its test and every later one.
STEPS = ("opening", "Run All", "pictures", "captions", "arrow keys", "Home, End, Page Up and Page Down",
         "typing into a readout", "dragging", "the other explorers' keys")


def _run() -> dict[str, Notebook7Observation]:
    return run_notebook7(find_chromium())


BACKGROUND_JOBS = {"notebook7": _run}


@pytest.fixture(scope="module")
def notebook7() -> dict[str, Notebook7Observation]:
    return background.result("notebook7", _run)


def observation(notebook7: dict[str, Notebook7Observation], name: str, step: str) -> Notebook7Observation:
    """The lesson's observation, once every step up to ``step`` went through (else the test fails with why)."""
    seen = notebook7.get(name)
    assert seen is not None, f"Notebook 7 did not get to {name} (server or browser failed): {sorted(notebook7)}"
    if seen.failed_step is not None:
        assert seen.failed_step not in STEPS[:STEPS.index(step) + 1], f"{name} in Notebook 7: {seen.error}"
    return seen


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_console_on_load_has_only_known_errors(notebook7, name: str):
    seen = observation(notebook7, name, "opening")
    print(f"{name}: console errors on load: {seen.load_errors}")
    known = "\n".join(f"  {text!r}: {why}" for text, why in KNOWN_LOAD_ERRORS.items())
    assert not seen.unexplained_load_errors, (
        f"{name}: Notebook 7 logged on load:\n  " + "\n  ".join(seen.unexplained_load_errors)
        + f"\n(known and harmless:\n{known})")


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_run_all_shows_every_explorer(notebook7, name: str):
    seen = observation(notebook7, name, "Run All")
    print(f"{name}: Run All took {seen.run_seconds:.1f} s in Notebook 7")
    assert not seen.problems, f"{name}: outputs a learner must not see after Run All:\n" + "\n".join(seen.problems)
    assert not seen.unexecuted, f"{name}: code cells Run All did not execute:\n" + "\n".join(seen.unexecuted)
    assert len(seen.explorers) == len(seen.committed_explorers) > 0, (
        f"{name}: {len(seen.explorers)} explorers drawn, the committed notebook shows {seen.committed_explorers}")
    for state in seen.explorers:
        assert state.valid and state.visible and state.natural_width > 0, (
            f"{name}: an explorer without a picture: {state}")
        assert state.shown_width <= state.natural_width + 0.5, f"{name}: picture scaled up: {state}"


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_every_picture_is_described_and_sharp_at_device_scale_2(notebook7, name: str):
    """Notebook 7 at device scale 2: every static figure and every explorer's picture has two pixels for each CSS
    pixel it is shown at, each figure its alt and each explorer its "The picture in words"."""
    seen = observation(notebook7, name, "pictures")
    for row in seen.pictures:
        print(f"{name}: {row['kind']} {row['naturalWidth']} px shown {row['shownWidth']:.0f} CSS px, "
              f"described in {len(row['description'])} characters")
    assert seen.device_scale == HIGH_DENSITY, f"the page ran at device scale {seen.device_scale}"
    kinds = [row["kind"] for row in seen.pictures]
    assert kinds.count("explorer") == len(seen.committed_explorers) > 0, kinds
    assert "figure" in kinds, f"{name}: no static figure found in Notebook 7"
    problems = picture_problems(seen.pictures)
    assert not problems, f"{name} in Notebook 7 at device scale 2:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_every_caption_names_keys_that_move_its_sliders_here(notebook7, name: str):
    """Each explorer's caption, read in the page, names the keys to press on a slider's handle; in Notebook 7 each key
    it names moves each of the explorer's sliders (pressed where it can move it; the status line and picture follow,
    checked by ExplorerView), and it says that the arrow keys do not (test_arrow_keys_go_to_the_notebook...)."""
    seen = observation(notebook7, name, "the other explorers' keys")
    assert len(seen.captions) == len(seen.explorers) == len(seen.caption_moves), (seen.captions, seen.caption_moves)
    for i, (caption, sliders, moves) in enumerate(zip(seen.captions, seen.sliders, seen.caption_moves)):
        print(f"{name} explorer {i}: {caption!r}\n  " + "\n  ".join(f"{k} on {s}: {a} -> {b}" for s, k, a, b in moves))
        if not sliders:
            continue
        named = keys_named(caption)
        assert named, f"{name} explorer {i}: its caption names no key that moves a slider: {caption!r}"
        assert {key for _, key, _, _ in moves} == set(named), (
            f"{name} explorer {i}: the caption names {named}, these moved a slider: {moves}")
        assert "Notebook 7" in caption and "arrow keys" in caption, (
            f"{name} explorer {i}: the caption does not say what the arrow keys do in Notebook 7: {caption!r}")


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_arrow_keys_go_to_the_notebook_as_lesson_00_says(notebook7, name: str):
    """Clicked, a slider handle has focus, but Notebook 7 runs its cell shortcuts on the arrow keys: the slider
    stays, and the focus goes to a cell. Lesson 00 says so; this fails when that stops being true."""
    seen = observation(notebook7, name, "arrow keys")
    for tried in seen.arrow_keys:
        print(f"{name}: {tried}")
    assert [t.key for t in seen.arrow_keys] == ["ArrowRight", "ArrowLeft"], seen.arrow_keys
    moved = [t.key for t in seen.arrow_keys if t.moved]
    assert not moved, (f"{name}: in Notebook 7 {', '.join(moved)} on a slider handle now move the slider: lesson 00's "
                       f"sentence on Notebook 7 ({ISSUE}) is out of date")
    assert all("noUi-handle" not in t.focus_after for t in seen.arrow_keys), seen.arrow_keys
    assert ISSUE in lesson_text("00_orientation.ipynb"), f"lesson 00 does not tell learners about {ISSUE}"


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_keys_on_the_handle_and_a_typed_value_move_the_explorer(notebook7, name: str):
    """End, Home, Page Up and Page Down on each slider's focused handle, then a value typed into a number slider's
    readout: each moves the slider, and the status line and the picture follow (checked by ExplorerView)."""
    seen = observation(notebook7, name, "typing into a readout")
    print(f"{name}:\n  " + "\n  ".join(seen.keyboard + seen.readout))
    pressed = {key for _, key, _, _ in seen.key_moves}
    assert pressed == set(HANDLE_KEYS), f"{name}: keys pressed {sorted(pressed)}"
    assert len(seen.readout) == 1, seen.readout


def test_lesson_00s_keys_in_notebook7_do_what_it_says(notebook7):
    """Lesson 00: in Notebook 7 a clicked handle "takes Home and End (to either end) and Page Up and Page Down
    (five steps)". Its heads explorer's chan slider, from its first value: End, Home, then Page Up from the
    minimum, Page Down back (the order of tools.notebook7.HANDLE_KEYS)."""
    seen = observation(notebook7, "00_orientation.ipynb", "Home, End, Page Up and Page Down")
    chan = [(key, before, after) for slider, key, before, after in seen.key_moves if slider == "chan"]
    print(chan)
    assert chan == [("End", "64", f"{CHAN_MAX}"), ("Home", f"{CHAN_MAX}", f"{CHAN_MIN}"),
                    ("PageUp", f"{CHAN_MIN}", f"{CHAN_MIN + 5 * CHAN_STEP}"),
                    ("PageDown", f"{CHAN_MIN + 5 * CHAN_STEP}", f"{CHAN_MIN}")], chan


@pytest.mark.parametrize("name", NOTEBOOK7_LESSONS)
def test_dragging_every_slider_moves_the_explorer(notebook7, name: str):
    seen = observation(notebook7, name, "dragging")
    print(f"{name}:\n  " + "\n  ".join(seen.mouse))
    assert seen.mouse, f"{name}: no slider was dragged"
    assert not seen.problems_after, f"{name}: after driving the explorer:\n" + "\n".join(seen.problems_after)
