"""The room's colours: colour-blind-safe colormaps and palettes, and NaN made visible.

``viridis`` for weights in [0, 1], the diverging ``RdBu_r`` for signed values (scores, projections: blue
negative, red positive, its two ends equally dark, so equal and opposite values look equally strong, in grey too),
the Okabe-Ito palette for one colour per head or per line.
"""

from __future__ import annotations

from matplotlib.colors import Colormap

__all__ = ["WEIGHTS_CMAP", "SIGNED_CMAP", "NAN_COLOUR", "HEAD_COLOURS", "GROWTH_COLOURS", "cmap_with_nan"]


WEIGHTS_CMAP = "viridis"
SIGNED_CMAP = "RdBu_r"
NAN_COLOUR = "0.82"  # light grey: a NaN weight shows as "no number", not as a dark zero
# Okabe-Ito: a qualitative palette that colour-blind readers can tell apart, one colour per head.
HEAD_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#000000")
GROWTH_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")  # Okabe-Ito, colour-blind safe


def cmap_with_nan(name: str = WEIGHTS_CMAP, nan_colour: str = NAN_COLOUR) -> Colormap:
    """Lessons 03 and 03a: The colormap ``name`` with NaN and infinite cells painted ``nan_colour`` instead of left blank.

    For a matrix that may hold NaN (a fully masked softmax row) or ``-inf`` (an additive mask): the cell is grey,
    its annotation reads ``nan`` or ``-inf``. Values outside ``vmin``-``vmax`` are grey too: give a range that
    covers the finite values.
    """
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad=nan_colour, under=nan_colour, over=nan_colour)
