"""How an object that wraps a widget shows itself, with ipywidgets 7 (Colab) and 8 alike.

An explorer is a plain Python object holding an ipywidgets box. Making it a cell's last line must
show the box (and print one stable text line, which strict notebook validation compares). The two
ipywidgets generations display differently:

* ipywidgets 8 widgets have ``_repr_mimebundle_``: IPython asks for the bundle and shows it.
* ipywidgets 7 (what Colab ships, because its front end cannot draw 8) widgets have only
  ``_ipython_display_``, which calls ``display`` itself; there is no bundle to forward to.

:func:`widget_bundle` builds the same bundle for both, so the wrapper can offer one
``_repr_mimebundle_`` that works under either.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

__all__ = ["WIDGET_VIEW_MIME", "widget_bundle"]

# The MIME type a Jupyter front end renders as a live widget view; protocol 2.0 is spoken by
# ipywidgets 7 and 8 kernels alike (the front end asks the model for its own version).
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def widget_bundle(widget: W.Widget, text: str, **kwargs: Any) -> dict[str, Any]:
    """The display bundle of ``widget`` with ``text`` as its ``text/plain`` form.

    ``kwargs`` are what IPython passes to ``_repr_mimebundle_`` (``include``, ``exclude``).
    """
    if hasattr(widget, "_repr_mimebundle_"):  # ipywidgets 8
        bundle = widget._repr_mimebundle_(**kwargs) or {}
    else:  # ipywidgets 7: the bundle its _ipython_display_ would send
        bundle = {}
        if widget._view_name is not None:
            bundle[WIDGET_VIEW_MIME] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
            widget._handle_displayed()
    bundle["text/plain"] = text
    return bundle
