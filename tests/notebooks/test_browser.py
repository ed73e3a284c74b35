"""The series as a learner uses it: real JupyterLab in headless Chromium.

For every notebook (``99_*`` scratch files excluded): open it, Run All, and check that no cell shows
an error or stderr, that every figure of the committed notebook is drawn and every explorer is
there with its picture. Then move every control of every explorer — sliders by arrow keys and by
dragging, every dropdown option, checkboxes and toggles by clicking — and after each change wait
for the status line to show the new value, then check the picture changed (or, for an impossible
combination, that it is hidden and explained). The heads explorer is driven through every head
count on its narrowest width and back.

At a laptop's 1366x768, with JupyterLab's default layout (file browser open), every static figure and
every explorer's picture is measured after Run All: the width it is shown at, and its smallest text as
displayed (from the kernel that drew it, ``tools/figure_sizes.py``), none below 8 px; every explorer's box must
fit in the notebook's visible height. The table goes to the test output and ``build/screenshots/figure_sizes.txt``,
and each lesson's first screen at its first picture to ``build/screenshots/<lesson>__lesson_1366x768.png``.
The same page is then switched to device scale 2 (a high-density laptop screen) and checked again: every picture
has two pixels per CSS pixel it is shown at and a description, no text below 8 CSS px; its first screen at 2x goes
to ``<lesson>__lesson_1366x768@2x.png``. In every notebook with an explorer, JupyterLab is switched to its dark
theme (from the Settings menu) and back: every picture must be opaque and every text an explorer writes at 4.5:1.

Every notebook is also opened untouched, on a server of its own: once its kernel is idle and nothing
ran, closing its tab must not ask to save, and the file must be as committed (the kernelspec the
notebook carries must be the one the kernel reports, or JupyterLab marks it changed and autosaves it).

Then every notebook again with a kernel of the Colab stand-in (Colab's ipywidgets 7.7.1, IPython 7.34,
...) in the classic Notebook, the front end that draws ipywidgets 7: Run All and a slider moved.

The JupyterLab half runs in a thread of its own from the start of the session (``LabRun``, started
by ``conftest.py``), alongside the unit tests and nbval: one JupyterLab server and one Chromium, one
page per notebook, its kernel shut down when the notebook is done. Each test below is a check run on
the notebook's page there; the test reports its verdict. A picture of every explorer and a log of every
change go to ``build/screenshots/``, with a picture of the whole notebook where a check failed (of every
notebook, after Run All and after the widgets, with ``ATTN_SCREENSHOTS=all``).
Without Chromium these tests skip (they fail on CI, ``CI=true``). The machinery is in
``browser_support.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from tools import figure_sizes
from tools.browser_support import (  # noqa: F401 - fixtures are used by name
    ALL_SCREENSHOTS,
    DARK_THEME,
    EXPLORER_BOX,
    HIGH_DENSITY,
    LIGHT_THEME,
    SCREENSHOT_DIR,
    STATIC_PNG,
    STATUS,
    THEME_JS,
    UNTOUCHED_SETTINGS,
    Browser,
    JupyterServer,
    LabCheck,
    LessonPage,
    UntouchedObservation,
    chromium_missing_reason,
    chromium_path,
    contrast_ratio,
    device_screenshot,
    classic_run,
    find_chromium,
    lesson_notebooks,
    open_and_close_untouched,
    picture_problems,
    pictures,
    set_device_scale,
    set_theme,
    theme_problems,
    widget_outputs,
)

pytestmark = pytest.mark.browser

if find_chromium() is None and os.environ.get("CI", "").lower() != "true":
    # One skip line for the whole module (on CI the fixtures fail every test instead).
    pytest.skip(chromium_missing_reason(), allow_module_level=True)

NOTEBOOKS = lesson_notebooks()
WITH_WIDGETS = [p for p in NOTEBOOKS if widget_outputs(p)]
WITH_HEADS = [p for p in NOTEBOOKS if "HeadsExplorer" in widget_outputs(p)]


def on_each(paths: list[Path], report: Callable[[Path], None] | None = None):
    """A check run on each notebook's page in the JupyterLab run; the test (one per notebook) reports it.

    ``conftest.py`` reads the plan (which checks on which notebooks) off the collected tests. ``report(path)``:
    called by the test after the verdict, passed or not (e.g. to print what the check measured).
    """
    def wrap(check: LabCheck):
        @pytest.mark.parametrize("path", paths, ids=[p.name for p in paths])
        def test(lab_run, path: Path) -> None:
            try:
                lab_run.verdict(check, path)
            finally:
                if report is not None:
                    report(path)

        test.lab_check = check
        test.__name__, test.__doc__ = check.__name__, check.__doc__
        return test
    return wrap


def test_server_offers_only_this_environments_python(lab_run):
    """With the temporary home, the only kernel is this environment's own ``python3``."""
    specs = lab_run.wait_server()
    assert specs["default"] == "python3"
    assert set(specs["kernelspecs"]) == {"python3"}, f"unexpected kernelspecs: {sorted(specs['kernelspecs'])}"
    argv = specs["kernelspecs"]["python3"]["spec"]["argv"]
    # jupyter_client starts "python" as the server's own interpreter (sys.executable).
    assert argv[0] in ("python", "python3", sys.executable), argv


@on_each(NOTEBOOKS)
def test_run_all_shows_every_output(lesson: LessonPage, screenshot_dir: Path):
    committed = lesson.committed
    assert committed.n_outputs, (f"{lesson.name} is committed without outputs: nothing to compare the browser "
                                 f"with (produce them with `make notebooks NB=notebooks/{lesson.name}`)")
    problems = lesson.problems()
    assert not problems, f"{lesson.name}: outputs a learner must not see after Run All:\n" + "\n".join(problems)
    unexecuted = lesson.unexecuted_cells()
    assert not unexecuted, f"{lesson.name}: code cells Run All did not execute:\n" + "\n".join(unexecuted)

    figures = lesson.static_images()
    assert len(figures) == committed.n_static_png, (
        f"{lesson.name}: {len(figures)} figures drawn in the browser, the committed notebook has "
        f"{committed.n_static_png} image/png outputs")
    assert all(f["complete"] and f["w"] > 0 for f in figures), f"{lesson.name}: a figure did not load: {figures}"

    explorers = lesson.explorers()
    assert lesson.notebook.locator(STATUS).count() == len(explorers), "a status line outside an explorer's box"
    assert len(explorers) == len(committed.explorers), (
        f"{lesson.name}: {len(explorers)} explorers rendered, the committed notebook shows "
        f"{len(committed.explorers)} ({', '.join(committed.explorers)})")
    for explorer in explorers:
        state = explorer.state()
        assert state.status.strip(), f"{explorer.label}: empty status line"
        assert state.valid, f"{explorer.label}: starts in an impossible state: {state.status!r}"
        assert state.visible and state.natural_width > 0 and (state.src or "").startswith(("blob:", "data:")), (
            f"{explorer.label}: no picture ({state})")
        # never scaled up by the page (a stretched PNG blurs its text); at most shrunk to fit the output area
        assert state.shown_width <= state.natural_width + 0.5, (
            f"{explorer.label}: its {state.natural_width}-px picture is shown {state.shown_width:.0f} px wide")

    # The kernel that ran the notebook is this environment's Python.
    sessions = lesson.server.sessions_for(lesson.name)
    assert len(sessions) == 1, sessions
    commands = lesson.server.kernel_commands()
    kernel_id = sessions[0]["kernel"]["id"]
    if commands:  # Linux: read the kernel's command line from /proc
        assert kernel_id in commands, f"kernel {kernel_id} is not a child of the server: {commands}"
        interpreter = Path(commands[kernel_id][0])
        assert interpreter.parent.resolve() == Path(sys.executable).parent.resolve(), (
            f"the kernel runs {interpreter}, not this environment's {sys.executable}")


@on_each(NOTEBOOKS)
def test_every_figure_is_described_and_sharp(lesson: LessonPage, screenshot_dir: Path):
    """JupyterLab's <img> of every static figure carries the figure's description in ``alt``, and its picture has
    two pixels for every CSS pixel it is shown at (sharp at device scale 2; attn_helpers/views/display.py)."""
    figures = lesson.static_images()
    assert len(figures) == lesson.committed.n_static_png, figures
    undescribed = [f"figure {i}: alt {f['alt']!r}" for i, f in enumerate(figures)
                   if not (f["alt"] or "").strip() or f["alt"].startswith("A figure without a description")]
    assert not undescribed, f"{lesson.name}: figures without a description:\n" + "\n".join(undescribed)
    soft = [f"figure {i}: {f['w']} px shown {f['shownWidth']:.0f} px wide" for i, f in enumerate(figures)
            if f["w"] < 2 * f["shownWidth"] - 1]
    assert not soft, f"{lesson.name}: figures with fewer than 2 pixels per CSS pixel:\n" + "\n".join(soft)


# -- every picture at a laptop's size (issue 31) ----------------------------------------------------
# Before any control moves: each explorer still shows its first picture. The sizes come from the page,
# the smallest text of each picture from the kernel that drew it (tools/figure_sizes.py, figure_probe.py).
EXPLORER_PICTURE = f"{EXPLORER_BOX} > img.widget-image"
FIGURE_TABLE = "figure_sizes.txt"


def report_figures(path: Path) -> None:
    """Print the notebook's rows of the figure table; write this session's table to build/screenshots."""
    figures = figure_sizes.MEASURED.get(path.name)
    if figures:
        print(figure_sizes.table(figures))
    figure_sizes.write_table(SCREENSHOT_DIR / FIGURE_TABLE, [p.name for p in NOTEBOOKS])


@on_each(NOTEBOOKS, report=report_figures)
def test_every_picture_has_readable_text(lesson: LessonPage, screenshot_dir: Path):
    """At 1366x768 with the file browser open: no text of any static figure or explorer below 8 px as displayed.

    Also takes the lesson's screenshot: the first screen at its first figure or explorer, after Run All."""
    figures = figure_sizes.measure(lesson, STATIC_PNG, EXPLORER_PICTURE)
    figure_sizes.keep(lesson.name, figures)
    figure_sizes.screenshot_first_picture(lesson, screenshot_dir / f"{Path(lesson.name).stem}__lesson_1366x768.png",
                                          f"{STATIC_PNG}, {EXPLORER_PICTURE}")
    committed = lesson.committed
    assert len(figures) == committed.n_static_png + len(committed.explorers), (
        f"{lesson.name}: {len(figures)} pictures measured, the committed notebook has {committed.n_static_png} "
        f"figures and {len(committed.explorers)} explorers")
    problems = [p for p in (f.problem() for f in figures) if p]
    assert not problems, "\n".join(problems) + "\n" + figure_sizes.table(figures)


@on_each(NOTEBOOKS)
def test_every_picture_at_device_scale_2(lesson: LessonPage, screenshot_dir: Path):
    """The same page at device scale 2 (most laptops' screens): every static figure and every explorer's picture has
    two pixels for each CSS pixel it is shown at and a description (a figure's alt, an explorer's "The picture in
    words"), and no text below 8 CSS px. Takes the lesson's first screen at 2x too; the page goes back to scale 1."""
    page = lesson.page
    try:
        assert set_device_scale(page, HIGH_DENSITY) == HIGH_DENSITY, "the page did not switch to device scale 2"
        rows = pictures(page)
        committed = lesson.committed
        assert len(rows) == committed.n_static_png + len(committed.explorers), (
            f"{lesson.name}: {len(rows)} pictures at scale 2, the committed notebook has {committed.n_static_png} "
            f"figures and {len(committed.explorers)} explorers")
        problems = picture_problems(rows)
        figures = figure_sizes.measure(lesson, STATIC_PNG, EXPLORER_PICTURE)
        problems += [p for p in (f.problem() for f in figures) if p]
        figure_sizes.screenshot_first_picture(
            lesson, screenshot_dir / f"{Path(lesson.name).stem}__lesson_1366x768@2x.png",
            f"{STATIC_PNG}, {EXPLORER_PICTURE}", shoot=device_screenshot)
    finally:
        set_device_scale(page, 1)
    assert not problems, f"{lesson.name} at device scale 2:\n" + "\n".join(problems)


@on_each(WITH_WIDGETS)
def test_readable_in_the_dark_theme(lesson: LessonPage, screenshot_dir: Path):
    """In JupyterLab Dark (chosen from the Settings menu): every figure and explorer picture is opaque (drawn on its
    own background, not on the dark page), every text an explorer writes in HTML (status line, caption, "The picture
    in words", shape table; and the status line of a state it cannot draw) has contrast 4.5:1 or more on what is
    behind it, the problem state's bar 3:1. The first screen in the dark theme is kept; the theme goes back to light."""
    from attn_helpers.widgets._base import PROBLEM_STYLE

    page = lesson.page
    try:
        set_theme(page, DARK_THEME)
        found = page.evaluate(THEME_JS, [STATIC_PNG, EXPLORER_BOX, PROBLEM_STYLE])
        figure_sizes.screenshot_first_picture(lesson, screenshot_dir / f"{Path(lesson.name).stem}__dark_1366x768.png",
                                              f"{STATIC_PNG}, {EXPLORER_PICTURE}")
    finally:
        set_theme(page, LIGHT_THEME)
    assert found["theme"] == DARK_THEME, found["theme"]
    committed = lesson.committed
    assert len(found["pictures"]) == committed.n_static_png + len(committed.explorers), found["pictures"]
    assert found["texts"] and any(t["bar"] for t in found["texts"]), f"{lesson.name}: no explorer text measured"
    lines = [f"{p['kind']} {p['width']} px: least alpha {p['least']}" for p in found["pictures"]]
    lines += [f"explorer {t['explorer']} <{t['tag']}> {t['text']!r}: {contrast_ratio(t['colour'], t['background']):.1f}:1"
              + ("" if t["bar"] is None else f", bar {contrast_ratio(t['bar'], t['background']):.1f}:1")
              for t in found["texts"]]
    (screenshot_dir / f"{Path(lesson.name).stem}__dark.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems = theme_problems(found)
    assert not problems, f"{lesson.name} in {DARK_THEME}:\n" + "\n".join(problems)


@on_each(WITH_WIDGETS)
def test_every_explorer_fits_the_screen(lesson: LessonPage, screenshot_dir: Path):
    """Each explorer's controls, status line and picture fit in the notebook's visible height at 1366x768."""
    figures = [f for f in figure_sizes.MEASURED.get(lesson.name, []) if f.explorer] or [
        f for f in figure_sizes.measure(lesson, STATIC_PNG, EXPLORER_PICTURE) if f.explorer]
    assert figures, f"{lesson.name}: no explorer measured"
    tall = [f"{f.label}: {f.box_height:.0f} px tall, the notebook shows {f.visible_height:.0f} px"
            for f in figures if not f.fits()]
    assert not tall, f"{lesson.name}: explorers taller than the screen:\n" + "\n".join(tall)


@on_each(WITH_WIDGETS)
def test_every_control_of_every_explorer(lesson: LessonPage, screenshot_dir: Path):
    stem = Path(lesson.name).stem
    failures, log = [], []
    for explorer in lesson.explorers():
        try:
            explorer.exercise()
        except AssertionError as failure:
            failures.append(str(failure))
        finally:
            log += [f"## {explorer.label}", *explorer.steps]
            log += [f"note: {note}" for note in explorer.notes]
            explorer.box.screenshot(path=str(screenshot_dir / f"{stem}__explorer{explorer.index}_{explorer.class_name}.png"))
    log += [f"browser console: {line}" for line in lesson.console_errors]
    (screenshot_dir / f"{stem}__widgets.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    if ALL_SCREENSHOTS:  # on failure LabRun takes the picture (browser_support.ALL_SCREENSHOTS)
        lesson.screenshot(screenshot_dir / f"{stem}__2_after_widgets.png")
    problems = lesson.problems()
    assert not failures, "\n\n".join(failures)
    assert not problems, f"{lesson.name}: after moving the widgets:\n" + "\n".join(problems)


@on_each(WITH_HEADS)
def test_heads_explorer_lays_out_every_head_count(lesson: LessonPage, screenshot_dir: Path):
    """num_heads offers 1, 2, 4 and 8 only (each divides every chan on offer): the narrowest split
    (chan=8 over 8 heads, head_dim 1) is drawn, and the grid is laid out again for each count."""
    heads = [e for e in lesson.explorers() if e.class_name == "HeadsExplorer"]
    assert heads, f"{lesson.name}: no HeadsExplorer rendered"
    for explorer in heads:
        explorer.box.scroll_into_view_if_needed()
        explorer.set_slider("chan", 8)
        state = explorer.set_slider("num_heads", 8)
        assert state.values.get("chan") == "8" and state.values.get("num_heads") == "8", state.status
        assert state.valid and "head_dim = 8 // 8 = 1" in state.status, state.status
        state = explorer.wait_for_image(None)
        assert state.visible and state.natural_width > 0, f"{explorer.label}: no picture for {state.status!r}"
        explorer.box.screenshot(path=str(screenshot_dir / f"{Path(lesson.name).stem}__3_heads_8_by_1.png"))
        for count in (4, 2, 1):  # ArrowLeft visits every count on offer, and nothing in between
            state = explorer.set_slider("num_heads", count)
            assert state.valid and f"head_dim = 8 // {count} = {8 // count}" in state.status, state.status
        state = explorer.set_slider("chan", 64)
        state = explorer.set_slider("num_heads", 4)
        assert state.valid and "head_dim = 64 // 4 = 16" in state.status, state.status
    assert not lesson.problems()


# -- nothing changes on open -----------------------------------------------------------------------
# The metadata every notebook carried before issue 31: JupyterLab, whose kernel reports "Python 3 (ipykernel)",
# marked every notebook changed on opening. One notebook with it is opened too, to show the check sees that.
OLD_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
PLANTED = "99_old_kernelspec.ipynb"


@pytest.fixture(scope="module")
def untouched(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, UntouchedObservation], float]:
    """Every notebook, and the planted one, opened and closed untouched on one JupyterLab server; the seconds it took."""
    base = tmp_path_factory.mktemp("untouched")
    source = base / "source"
    source.mkdir()
    for path in NOTEBOOKS:
        shutil.copy2(path, source / path.name)
    smallest = min(NOTEBOOKS, key=lambda p: p.stat().st_size)
    planted = nbformat.read(smallest, as_version=nbformat.NO_CONVERT)
    planted.metadata["kernelspec"] = dict(OLD_KERNELSPEC)
    nbformat.write(planted, source / PLANTED)
    start = time.perf_counter()
    with JupyterServer(base, source=source, settings=UNTOUCHED_SETTINGS) as server:
        browser = Browser(chromium_path)
        try:
            seen = open_and_close_untouched(server, browser, [server.root / p.name for p in NOTEBOOKS] + [server.root / PLANTED])
        finally:
            browser.close()
    return seen, time.perf_counter() - start


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_opening_and_closing_changes_nothing(untouched, path: Path):
    """Opened in JupyterLab, left until its kernel is idle, closed: no save prompt, the file unchanged."""
    observations, seconds = untouched
    seen = observations[path.name]
    print(f"{seen.name}: kernel idle {seen.open_seconds:.1f} s after opening; "
          f"all {len(observations)} notebooks opened and closed in {seconds:.0f} s")
    problems = seen.problems()
    assert not problems, "\n".join(problems)


def test_untouched_check_sees_an_old_kernelspec(untouched):
    """The same check on a notebook with the old "Python 3" kernelspec reports it (the check can fail)."""
    seen = untouched[0][PLANTED]
    print(f"{PLANTED} (a copy of the smallest notebook with the old kernelspec): {seen.problems()}")
    assert seen.error is None, seen.error
    assert seen.changed_on_disk or seen.dialogs or seen.dirty, (
        f"{PLANTED} carries {OLD_KERNELSPEC} but opening and closing it showed nothing: {seen}")


# -- a kernel with Colab's versions, in the front end of ipywidgets 7 ------------------------------
# The Colab stand-in's kernel (tools/colab_standin.py: ipywidgets 7.7.1, IPython 7.34, ...) served by
# the classic Notebook 6.5.7 with widgetsnbextension 3.6.10 from Colab's own package list: JupyterLab 4
# cannot draw ipywidgets 7 models at all (see ClassicNotebookServer). Run All in every notebook, then a
# slider moved, so ipywidgets 7's messages are shown to reach a real front end and come back. Every
# control of every explorer is moved on those versions in tests/notebooks/test_colab.py, in the kernel.

@pytest.fixture(scope="module")
def classic_results(colab_session, chromium_path: str):
    """What every notebook showed (browser_support.run_classic_lessons, started with the session)."""
    colab_session.start_browser(classic_run(chromium_path))  # already started by conftest.py, normally
    return colab_session.browser()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_on_colab_versions_run_all_and_move_a_slider(path: Path, classic_results, colab_runtime):
    seen = classic_results[path.name]
    print(f"{seen.name}: Run All took {seen.run_seconds:.1f} s on the Colab stand-in's kernel")
    assert seen.error is None, f"{seen.name} on Colab's versions: {seen.error}"
    assert not seen.problems, f"{seen.name} on Colab's versions: after Run All:\n" + "\n".join(seen.problems)
    if seen.kernel is not None:  # Linux: the kernel is the stand-in's Python
        assert Path(seen.kernel) == colab_runtime.python, f"the kernel runs {seen.kernel}, not the Colab stand-in"
    assert len(seen.explorers) == len(seen.committed_explorers), (
        f"{seen.name}: {len(seen.explorers)} explorers rendered, the committed notebook shows {seen.committed_explorers}")
    for i, state in enumerate(seen.explorers):
        assert state["visible"] and state["width"] > 0, f"{seen.name} explorer #{i}: no picture ({state})"
    if seen.explorers:
        assert seen.slider_log and seen.slider_log[-1] == "picture changed", (
            f"{seen.name}: moving the first explorer's first slider did not change the picture:\n  "
            + "\n  ".join(seen.slider_log))
    assert not seen.problems_after_move, "\n".join(seen.problems_after_move)
