"""The Explorer machinery every widget shares, driven through a tiny explorer made for the test."""

from __future__ import annotations

import ipywidgets as W
import pytest
from matplotlib.figure import Figure

from attn_helpers.widgets import Explorer, InvalidCombination


class Tiny(Explorer):
    """Two integer sliders and one line; a = 0 is impossible, a = 7 breaks update, b = 9 redraws."""

    def __init__(self, *, a: int = 1, b: int = 2, fail_draw: bool = False) -> None:
        self.draws = 0
        self.updates = 0
        self.fail_draw = fail_draw
        controls = {"a": W.IntSlider(value=a, min=0, max=10), "b": W.IntSlider(value=b, min=0, max=10),
                    "t": W.FloatSlider(value=0.5, min=0.0, max=1.0)}
        super().__init__(controls, figsize=(2.0, 1.5), dpi=40)

    def draw(self, figure: Figure) -> None:
        self.draws += 1
        if self.fail_draw and self.draws > 1:
            raise KeyError("no such panel")
        ax = figure.add_subplot()
        (self.line,) = ax.plot([0, 1], [0, 0])
        ax.set_ylim(0, 20)
        self.dynamic([self.line])

    def update(self, a: int, b: int, t: float) -> str:
        self.updates += 1
        if a == 0:
            raise InvalidCombination("a must not be zero")
        if a == 7:
            raise RuntimeError("boom")
        self.line.set_ydata([a, b])
        return f"sum={a + b}"

    def table(self, a: int, b: int, t: float) -> str:
        return f"<p>{a} and {b}</p>"

    def needs_redraw(self, a: int, b: int, t: float) -> bool:
        return b == 9


def test_a_new_explorer_draws_once_and_shows_its_values():
    tiny = Tiny()
    assert (tiny.draws, tiny.updates) == (1, 1)
    assert tiny.valid
    assert tiny.last_status == "a=1 b=2 t=0.5 | sum=3"
    assert tiny.table_html.value == "<p>1 and 2</p>"
    assert bytes(tiny.image.value).startswith(b"\x89PNG")
    assert tiny.render_png().startswith(b"\x89PNG")


def test_set_moves_several_controls_with_one_refresh():
    tiny = Tiny()
    tiny.set(a=3, b=4, t=0.25)
    assert tiny.updates == 2
    assert tiny.last_status == "a=3 b=4 t=0.25 | sum=7"
    assert tiny.values == {"a": 3, "b": 4, "t": 0.25}


def test_moving_one_control_refreshes_once():
    tiny = Tiny()
    before = tiny.image.value
    tiny.controls["b"].value = 5
    assert tiny.updates == 2
    assert tiny.last_status == "a=1 b=5 t=0.5 | sum=6"
    assert tiny.image.value != before


def test_an_unknown_control_name_raises_value_error_naming_it_and_changes_nothing():
    tiny = Tiny()
    with pytest.raises(ValueError, match=r"unknown control 'c'; this explorer has \['a', 'b', 't'\]"):
        tiny.set(a=2, c=1)
    assert tiny.values["a"] == 1 and tiny.updates == 1


def test_an_exception_inside_update_shows_could_not_draw_this_and_never_raises():
    tiny = Tiny()
    tiny.set(a=7)  # must not raise
    assert not tiny.valid
    assert tiny.last_status == "a=7 b=2 t=0.5 | could not draw this: RuntimeError: boom"
    assert tiny.image.layout.visibility == "hidden"
    assert "could not draw this" in tiny.status.value
    assert repr(tiny) == "Tiny(a=7 b=2 t=0.5 | could not draw this: RuntimeError: boom)"


def test_an_exception_while_redrawing_the_layout_is_caught_too():
    tiny = Tiny(fail_draw=True)
    tiny.set(b=9)
    assert not tiny.valid
    assert "could not draw this: KeyError: 'no such panel'" in tiny.last_status


def test_an_invalid_combination_is_explained_in_words_and_recovers():
    tiny = Tiny()
    tiny.set(a=0)
    assert not tiny.valid
    assert tiny.last_status == "a=0 b=2 t=0.5 | not possible: a must not be zero"
    assert "#b35806" in tiny.status.value  # shown in the warning colour
    tiny.set(a=2)
    assert tiny.valid
    assert tiny.last_status == "a=2 b=2 t=0.5 | sum=4"
    assert tiny.image.layout.visibility == "visible"


def test_the_layout_is_rebuilt_only_when_needs_redraw_says_so():
    tiny = Tiny()
    tiny.set(b=3)
    assert tiny.draws == 1
    tiny.set(b=9)
    assert tiny.draws == 2
    assert len(tiny.figure.axes) == 1  # cleared before drawing again


def test_status_text_is_html_escaped():
    tiny = Tiny()
    tiny._show_status("<b>x & y</b>", ok=True)
    assert "&lt;b&gt;x &amp; y&lt;/b&gt;" in tiny.status.value
    assert tiny.last_status == "<b>x & y</b>"


def test_repr_is_one_line_and_the_mimebundle_carries_it_as_text_plain():
    tiny = Tiny()
    assert repr(tiny) == "Tiny(a=1 b=2 t=0.5 | sum=3)"
    bundle = tiny._repr_mimebundle_()
    assert bundle["text/plain"] == repr(tiny)
    assert "application/vnd.jupyter.widget-view+json" in bundle


class _Ipywidgets7Box:
    """What an ipywidgets 7 widget offers for display: no ``_repr_mimebundle_``, a model id."""

    _view_name = "VBoxView"
    model_id = "abc123"

    def __init__(self) -> None:
        self.displayed = 0

    def _handle_displayed(self, **kwargs) -> None:
        self.displayed += 1


def test_the_bundle_of_an_ipywidgets_7_widget_is_built_as_ipywidgets_7_displays_it():
    from attn_helpers.widgets._display import WIDGET_VIEW_MIME, widget_bundle

    box = _Ipywidgets7Box()
    bundle = widget_bundle(box, "Tiny(a=1)")
    assert bundle == {WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": "abc123"},
                      "text/plain": "Tiny(a=1)"}
    assert box.displayed == 1  # display callbacks run, as ipywidgets 7's _ipython_display_ runs them


def test_the_bundle_of_an_ipywidgets_8_widget_is_its_own_with_our_text():
    from attn_helpers.widgets._display import WIDGET_VIEW_MIME, widget_bundle

    box = W.VBox([])
    bundle = widget_bundle(box, "Tiny(a=1)")
    assert bundle["text/plain"] == "Tiny(a=1)"
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == box.model_id


def test_an_explorer_whose_draw_registers_nothing_dynamic_is_refused_at_once():
    class Frozen(Tiny):
        def draw(self, figure: Figure) -> None:
            figure.add_subplot().plot([0, 1], [0, 0])  # nothing registered: every move would show this picture

    with pytest.raises(TypeError, match=r"Frozen.draw must register the artists update changes with self.dynamic"):
        Frozen()


def test_a_move_redraws_only_the_dynamic_artists_onto_the_kept_picture():
    tiny = Tiny()
    kept = tiny._background
    tiny.set(a=5)
    assert tiny._background is kept and tiny.line.get_animated()  # same kept picture, the line drawn on top
    tiny.set(b=9)  # a layout change draws the figure anew
    assert tiny._background is not kept and tiny._dynamic == [tiny.line]
