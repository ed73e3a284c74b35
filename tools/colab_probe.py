"""Run inside a notebook's kernel after its last cell: move every control of every explorer.

``tests/notebooks/test_colab.py`` appends a cell that runs this file to a copy of each notebook, so it runs
in the same kernel as the lesson (the Colab stand-in's), with everything the lesson built still
alive. Like a learner's slider, each move sets a control's ``value`` (the explorer observes it).

For every explorer it records its class, whether its display bundle holds a widget view, and for
every control the moves made and whether the picture changed; then writes them as JSON to
``PROBE_OUTPUT`` (set by the appended cell). A control passes when at least one move changed the
picture (a slider is stepped like arrow keys until a valid
new picture appears, then moved to its far end); a discrete control that changed nothing is tried again under each option of the
explorer's other choice controls (a mask convention only matters for some masks).
"""

import gc
import json

from attn_helpers.widgets import Explorer
from attn_helpers.widgets._display import WIDGET_VIEW_MIME


def _choices(control):
    """Values to move a control to, other than its current one: every option, or a slider's far end."""
    value = control.value
    if hasattr(control, "_options_values"):  # Dropdown, ToggleButtons, SelectionSlider
        return [v for v in control._options_values if v != value]
    if isinstance(value, bool):  # Checkbox, ToggleButton
        return [not value]
    far = control.min if value - control.min > control.max - value else control.max
    return [far] if far != value else []


def _steps(control, max_steps=12):
    """A slider's values one step at a time, up (down at the top), as arrow keys would move it."""
    step = getattr(control, "step", 1) or 1
    direction = 1 if control.value + step <= control.max else -1
    values = [control.value + direction * step * i for i in range(1, max_steps + 1)]
    return [v for v in values if control.min <= v <= control.max]


def _is_choice(control):
    return hasattr(control, "_options_values") or isinstance(control.value, bool)


def _move(explorer, name, value, log):
    """Set one control; return True when the picture changed to a valid new one."""
    before = bytes(explorer.image.value)
    explorer.controls[name].value = value
    after = bytes(explorer.image.value)
    changed = explorer.valid and after != before
    log.append({"control": name, "value": repr(value), "valid": explorer.valid, "changed": changed,
                "status": explorer.last_status})
    return changed


def _probe(explorer):
    start = explorer.values
    bundle, _ = explorer._repr_mimebundle_()
    report = {"class": type(explorer).__name__, "start_valid": explorer.valid,
              "widget_view": WIDGET_VIEW_MIME in bundle, "text_plain": bundle.get("text/plain", ""),
              "controls": {}, "moves": []}
    for name, control in explorer.controls.items():
        changed = False
        if not _is_choice(control):  # step until a valid new picture (one step may be "not possible")
            for value in _steps(control):
                if _move(explorer, name, value, report["moves"]):
                    changed = True
                    break
            explorer.set(**start)
        for value in _choices(control):
            changed = _move(explorer, name, value, report["moves"]) or changed
        explorer.set(**start)
        if not changed and _is_choice(control):
            for other_name, other in explorer.controls.items():
                if changed or other_name == name or not _is_choice(other):
                    continue
                for other_value in _choices(other):
                    explorer.set(**{other_name: other_value})
                    if explorer.valid:
                        for value in _choices(control):
                            changed = _move(explorer, name, value, report["moves"]) or changed
                    explorer.set(**start)
                    if changed:
                        break
        report["controls"][name] = changed
    explorer.set(**start)
    report["restored"] = explorer.values == start and explorer.valid
    return report


def probe(output_path):
    explorers = [o for o in gc.get_objects() if isinstance(o, Explorer)]
    reports = [_probe(e) for e in explorers]
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(reports, f, indent=1)
    return reports
