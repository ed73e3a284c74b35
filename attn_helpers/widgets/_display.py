"""How an object that wraps a widget shows itself, with ipywidgets 7 (Colab) and 8 alike.

An explorer is a plain Python object holding an ipywidgets box. Making it a cell's last line must
show the box (and print one stable text line, which strict notebook validation compares). The two
ipywidgets generations display differently:

* ipywidgets 8 widgets have ``_repr_mimebundle_``: IPython asks for the bundle and shows it.
* ipywidgets 7 (what Colab ships, because its front end cannot draw 8) widgets have only
  ``_ipython_display_``, which calls ``display`` itself; there is no bundle to forward to.

:func:`widget_bundle` builds the same bundle for both, so the wrapper can offer one
``_repr_mimebundle_`` that works under either.

**A picture without a kernel.** The bundle may also carry a static ``image/png`` of what the widget
shows at display time. Every front end picks *one* MIME type of a bundle to show:

* JupyterLab 4 and Notebook 7 rank renderers: the widget view's renderer (rank -10, registered by
  ipywidgets' manager) before ``image/png`` (rank 90) before ``text/plain`` (rank 120). A trusted
  output (one just computed) shows the live widget; the widget renderer is not "safe", so an
  untrusted output (a saved notebook opened before Run All) shows the first safe type: the picture.
* The classic Notebook 6 (ipywidgets 7's ``widgetsnbextension``) registers the widget view at index 0
  of its display order, not safe: the same choice, live widget when trusted, picture when not. Colab's
  front end (closed source) draws the widget view while its kernel holds the widget; what it shows
  for a saved output before a run is not checked here.
* nbconvert's HTML exporter (``WidgetsDataTypeFilter``) skips the widget view when the notebook's
  metadata holds no state for its model and takes the next type of ``display_data_priority``:
  ``image/png`` before ``text/plain``. The hosting service's notebook view, which draws no widgets,
  shows the picture too; so does nbviewer without saved widget state.
* ipywidgets' own fallback (the widget state saved in the notebook's metadata, drawn by the HTML
  widget manager loaded from a CDN) needs JavaScript and the network; the picture needs neither.

Strict nbval does not compare ``image/png`` (nbval 0.11's ``skip_compare`` drops it, and the widget
view, unless run with ``--nbdime``): it compares the ``text/plain`` line, so the picture adds bytes
to the saved notebook but no flakiness to the comparison.
"""

from __future__ import annotations

import base64
from collections.abc import Collection
from typing import Any

import ipywidgets as W

__all__ = ["PNG_MIME", "WIDGET_VIEW_MIME", "widget_bundle"]

# The MIME type a Jupyter front end renders as a live widget view; protocol 2.0 is spoken by
# ipywidgets 7 and 8 kernels alike (the front end asks the model for its own version).
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
PNG_MIME = "image/png"


def _wanted(mime: str, include: Collection[str] | None, exclude: Collection[str] | None) -> bool:
    """Whether IPython's ``include``/``exclude`` (the arguments of ``_repr_mimebundle_``) ask for ``mime``."""
    return (not include or mime in include) and not (exclude and mime in exclude)


def widget_bundle(widget: W.Widget, text: str, *, picture: bytes | None = None, **kwargs: Any) -> dict[str, Any]:
    """The display bundle of ``widget`` with ``text`` as its ``text/plain`` form.

    ``picture``: PNG bytes of what the widget shows now; added (base64, as in a saved notebook) as
    ``image/png``, which front ends without a widget manager show instead of the widget (see the
    module's docstring). ``None`` or empty: no picture.
    ``kwargs`` are what IPython passes to ``_repr_mimebundle_`` (``include``, ``exclude``).
    """
    if hasattr(widget, "_repr_mimebundle_"):  # ipywidgets 8
        bundle = widget._repr_mimebundle_(**kwargs) or {}
    else:  # ipywidgets 7: the bundle its _ipython_display_ would send (every widget shown here is a box with a view)
        bundle = {WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}}
    if picture is not None and not bytes(picture).startswith(b"\x89PNG\r\n\x1a\n") and len(picture):
        raise ValueError(f"picture must be PNG bytes (b'\\x89PNG...'), got {bytes(picture)[:8]!r} "
                         f"({len(picture)} bytes)")
    if picture and _wanted(PNG_MIME, kwargs.get("include"), kwargs.get("exclude")):
        bundle[PNG_MIME] = base64.b64encode(bytes(picture)).decode("ascii")
    bundle["text/plain"] = text
    return bundle
