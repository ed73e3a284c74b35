"""views.Cells, the mesh every heatmap is drawn as: the same picture as imshow's nearest cells, and set_data's rules."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attn_helpers.views import SIGNED_CMAP, WEIGHTS_CMAP, Cells, cells


AXES = (0.1, 0.1, 0.8, 0.8)  # left, bottom, width, height: the panel, symmetric so rows are measured from either side


def _pixels(draw, size, dpi) -> np.ndarray:
    figure = Figure(figsize=size, dpi=dpi)
    canvas = FigureCanvasAgg(figure)
    draw(figure.add_axes(AXES))
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].astype(int)


def _near_an_edge(shape, height, width) -> np.ndarray:
    """Which pixels of a ``height`` x ``width`` picture have their centres within one pixel of a cell edge (the
    panel's frame included)."""
    left, top = AXES[0] * width, AXES[1] * height
    columns = left + np.arange(shape[1] + 1) * AXES[2] * width / shape[1]  # x of every vertical edge
    rows = top + np.arange(shape[0] + 1) * AXES[3] * height / shape[0]  # y of every horizontal edge, from the top
    x = np.abs(np.arange(width)[:, None] + 0.5 - columns).min(axis=1) <= 1.0  # (width,)
    y = np.abs(np.arange(height)[:, None] + 0.5 - rows).min(axis=1) <= 1.0  # (height,)
    return y[:, None] | x[None, :]  # (height, width)


@pytest.mark.parametrize("shape, size, dpi, cmap, bounds", [
    ((8, 8), (3.8, 3.8), 160, WEIGHTS_CMAP, (0.0, 1.0)),  # an explorer's panel at pixel density 2
    ((5, 7), (3.1, 2.3), 100, SIGNED_CMAP, (-2.0, 2.0)),  # a static figure, cells not square
    ((64, 256), (6.0, 3.0), 100, SIGNED_CMAP, (-2.0, 2.0)),  # a weight matrix: cells about 2 pixels wide
])
def test_cells_draw_the_pixels_imshow_draws(shape, size, dpi, cmap, bounds):
    values = np.random.default_rng(0).uniform(*bounds, size=shape)
    low, high = bounds
    image = _pixels(lambda ax: ax.imshow(values, cmap=cmap, vmin=low, vmax=high, aspect="auto",
                                         interpolation="nearest"), size, dpi)
    mesh = _pixels(lambda ax: cells(ax, values, cmap=cmap, vmin=low, vmax=high), size, dpi)
    assert image.shape == mesh.shape
    differ = np.abs(image - mesh).max(axis=-1) > 1  # more than colour rounding
    # imshow rounds a cell edge to a pixel its own way (matplotlib 3.10 and 3.11 differ); inside the cells and
    # outside the panel, the two pictures are the same
    assert not (differ & ~_near_an_edge(shape, *differ.shape)).any()


def test_cells_sit_where_imshow_puts_them():
    figure = Figure()
    ax = figure.add_subplot()
    mesh = cells(ax, np.zeros((3, 5)), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0)
    assert isinstance(mesh, Cells) and mesh.shape == (3, 5)
    assert ax.get_xlim() == (-0.5, 4.5) and ax.get_ylim() == (2.5, -0.5)  # row 0 at the top


def test_set_data_takes_the_same_shape_or_a_smaller_one_and_refuses_a_larger_one():
    figure = Figure()
    mesh = cells(figure.add_subplot(), np.zeros((2, 4)), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0)
    mesh.set_data(np.full((2, 4), 0.5))
    assert np.allclose(mesh.get_array(), 0.5)
    mesh.set_data([[0.1, 0.2], [0.3, 0.4]])  # the first columns; the rest blank
    shown = np.ma.filled(np.ma.asarray(mesh.get_array(), dtype=float), np.nan)
    assert np.allclose(shown[:, :2], [[0.1, 0.2], [0.3, 0.4]]) and np.isnan(shown[:, 2:]).all()
    with pytest.raises(ValueError, match=r"at most the cells' shape \[2, 4\], got \[2, 5\]"):
        mesh.set_data(np.zeros((2, 5)))
