"""The data flow of one forward pass (lesson 07): a *flow* ``{name: (the intermediates it is computed from)}``
adds the edges to a module's intermediates (in the order the forward pass makes them, ``AXES``); matplotlib is
imported inside :func:`dataflow_diagram`, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LATE", "traced_flow", "flow_layout", "dataflow_diagram"]

_COLUMN, _HALF = 2.6, 1.1  # data units between columns, and half a box's width (boxes hold about 30 characters)

Flow = Mapping[str, Sequence[str]]

# Intermediates drawn just above the step that uses them rather than just below their input: the skip
# through v is needed only at the end (it could be computed any time after v).
LATE: dict[str, tuple[str, ...]] = {"Attention": ("skip",), "MultiHeadAttention": (), "TransformerBlock": ()}


def _node(t: Any) -> tuple[Any, int] | None:
    """The autograd node that produced ``t`` and ``t``'s place among its outputs (a leaf: its AccumulateGrad)."""
    if t.grad_fn is not None:
        return t.grad_fn, t.output_nr
    if t.requires_grad:  # a leaf: the node that receives its gradient sits behind any view of it
        return t.view_as(t).grad_fn.next_functions[0][0], 0
    return None


def traced_flow(module: Any, *inputs: Any) -> dict[str, tuple[str, ...]]:
    """Lesson 07:
    The flow of one forward pass of ``module(*inputs)``, read from the graph autograd records: from each
    intermediate, walk back through unnamed steps to the named ones (parents in the order they are made).

    ``module``: one of the package's traced modules (``return_intermediates=True``); ``inputs``: floating-point
    tensors (copied). Give ``MultiHeadAttention`` three different tensors: with one tensor for query, key and
    value the three are the same node.
    """
    import torch

    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in inputs):
        raise TypeError(f"inputs must be floating-point tensors, got {[type(t).__name__ for t in inputs]}")
    inputs = tuple(t.detach().clone().requires_grad_(True) for t in inputs)
    with torch.enable_grad():
        _, inter = module(*inputs, return_intermediates=True)
    named: dict[tuple[int, int], str] = {}  # (id of a node, output number) -> the intermediate it made
    alive: list[Any] = []  # every node looked at stays referenced, so no id is reused during the walk
    for name, t in inter.items():
        key = _node(t)
        if key is not None:
            alive.append(key[0])
            named.setdefault((id(key[0]), key[1]), name)
    order = {name: i for i, name in enumerate(inter)}
    flow: dict[str, tuple[str, ...]] = {}
    for name, t in inter.items():
        key = _node(t)
        parents: set[str] = set()
        todo = list(key[0].next_functions) if key is not None and t.grad_fn is not None else []
        seen: set[int] = set()
        while todo:
            fn, nr = todo.pop()
            if fn is None:
                continue
            alive.append(fn)
            if (id(fn), nr) in named:
                parents.add(named[(id(fn), nr)])
            elif id(fn) not in seen:  # an unnamed step (a parameter's node has no inputs): look behind it
                seen.add(id(fn))
                todo.extend(fn.next_functions)
        flow[name] = tuple(sorted(parents, key=order.__getitem__))
    return flow


def _check_steps(steps: Sequence[tuple[str, Sequence[int], str]]) -> None:
    """Each ``(name, shape, axes)`` step names as many axes as its shape has dimensions (and there is one at least)."""
    if not steps:
        raise ValueError("steps must contain at least one (name, shape, axes) triple, got none")
    for name, shape, axes in steps:
        if len(axes.split()) != len(shape):
            raise ValueError(f"step {name!r}: shape {list(shape)} has {len(shape)} dimensions but axes "
                             f"{axes!r} names {len(axes.split())}")


def flow_layout(names: Sequence[str], flow: Flow, *, late: Sequence[str] = ()) -> dict[str, tuple[float, int]]:
    """``{name: (column, row)}`` of ``names`` (inputs before their users): row 0 for inputs, otherwise one below the
    lowest input (``late`` names: one above their first user), so steps that run side by side (``q``, ``k``, ``v``)
    sit side by side; in a row, each box under the mean column of its inputs, boxes at least 1 apart."""
    missing, extra = [n for n in names if n not in flow], [n for n in flow if n not in names]
    if missing or extra:
        raise ValueError(f"the steps and the flow must name the same intermediates: steps {list(names)}, flow "
                         f"{list(flow)} (not in the flow: {missing}; not in the steps: {extra})")
    for name, parents in flow.items():
        unknown = [p for p in parents if p not in flow]
        if unknown:
            raise ValueError(f"flow[{name!r}] = {tuple(parents)} names {unknown}, which the flow does not hold")
    row: dict[str, int] = {}
    for name in names:
        parents = flow[name]
        unmade = [p for p in parents if p not in row]
        if unmade:
            raise ValueError(f"{name!r} is computed from {unmade}, which come after it in the steps")
        row[name] = 1 + max((row[p] for p in parents), default=-1)
    for name in late:
        users = [row[c] for c, parents in flow.items() if name in parents]
        if users:
            row[name] = min(users) - 1
    column: dict[str, float] = {}
    for r in range(max(row.values()) + 1):
        in_row = [n for n in names if row[n] == r]
        wanted = [sum(column[p] for p in flow[n]) / len(flow[n]) if flow[n] else 0.0 for n in in_row]
        order = sorted(range(len(in_row)), key=lambda i: wanted[i])
        placed: list[float] = []
        for i in order:
            placed.append(wanted[i] if not placed else max(wanted[i], placed[-1] + 1.0))
        shift = sum(wanted) / len(wanted) - sum(placed) / len(placed)
        for i, x in zip(order, placed):
            column[in_row[i]] = x + shift
    return {n: (column[n], row[n]) for n in names}


def dataflow_diagram(steps: Sequence[tuple[str, Sequence[int], str]], flow: Flow, *, late: Sequence[str] = (),
                     title: str | None = None, labels: Mapping[str, str] | None = None) -> Any:
    """Lesson 07: Draw a forward pass as boxes (name, shape, named axes) with an arrow from each input to what it feeds.

    ``steps``: ``(name, shape, axes)`` triples in the order of the forward pass (from ``layer.AXES`` and the
    intermediates); ``flow``: e.g. :func:`traced_flow`'s. An arrow that skips rows runs beside the boxes in
    between and enters its box from the side. ``labels``: ``{name: the name a box shows}`` (e.g.
    ``{"q": "q_heads"}``, as :func:`~attn_helpers.views.shape_trace` takes it). Returns the axes.
    """
    import matplotlib.pyplot as plt

    _check_steps(steps)
    where = flow_layout([s[0] for s in steps], flow, late=late)
    rows = max(r for _, r in where.values()) + 1
    xy = {n: (c * _COLUMN, -r) for n, (c, r) in where.items()}
    left, right = min(x for x, _ in xy.values()), max(x for x, _ in xy.values())
    _, ax = plt.subplots(figsize=(1.1 * (right - left + 2 * _HALF + 2.2) + 0.4, 0.85 * rows + 0.5))
    ax.set(xlim=(left - _HALF - 1.2, right + _HALF + 1.2), ylim=(-rows + 0.4, 0.6))
    boxes = {}
    for name, shape, axes in steps:
        x, y = xy[name]
        shown = (labels or {}).get(name, name)
        boxes[name] = ax.text(x, y, f"{shown}: {list(shape)}\n{axes}", ha="center", va="center", fontsize=8,
                              family="monospace", linespacing=1.4, zorder=3,
                              bbox=dict(boxstyle="round,pad=0.3", facecolor="#e8eef7", edgecolor="#5b7fb5"))
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()
    half = {}  # name -> (half width, half height) of its box, in data units
    pad = 0.3 * 8 * ax.figure.dpi / 72 + 1  # the box's padding (0.3 of the font size) and its edge, in pixels
    for name, text in boxes.items():
        (x0, y0), (x1, y1) = to_data.transform(text.get_window_extent(renderer).padded(pad).get_points())
        half[name] = ((x1 - x0) / 2, (y1 - y0) / 2)
    arrow = dict(arrowstyle="-|>", color="#5b7fb5", mutation_scale=10, shrinkA=0, shrinkB=0)
    lanes: dict[int, list[tuple[int, int]]] = {-1: [], 1: []}  # per side: the row ranges of its bent arrows
    centre = (left + right) / 2

    def outermost(name: str, side: int) -> bool:
        x, y = xy[name]
        return all(side * (x - other_x) >= 0 for other_x, other_y in xy.values() if other_y == y)

    for name, parents in flow.items():
        for parent in parents:
            (x0, y0), (x1, y1) = xy[parent], xy[name]
            if y0 - y1 <= 1:  # from the bottom of one box to the top of the next
                ax.annotate("", xy=(x1, y1 + half[name][1]), xytext=(x0, y0 - half[parent][1]), arrowprops=arrow,
                            zorder=2)
                continue
            span = (-y0, -y1)
            busy = {s: sum(1 for a, b in lanes[s] if a <= span[1] and span[0] <= b) for s in (-1, 1)}
            sides = [s for s in (-1, 1) if outermost(parent, s) and outermost(name, s)] or [-1, 1]
            side = min(sides, key=lambda s: (busy[s], -s if (x0 + x1) / 2 >= centre else s))
            between = [x + side * half[n][0] for n, (x, y) in xy.items() if y1 <= y <= y0]
            lane = (max(between) if side > 0 else min(between)) + side * (0.3 + 0.3 * busy[side])
            lanes[side].append(span)
            edge0, edge1 = x0 + side * half[parent][0], x1 + side * half[name][0]
            ax.plot([edge0, lane, lane, edge1 + side * 0.2], [y0, y0, y1, y1], color="#5b7fb5", lw=1.2, zorder=2)
            ax.annotate("", xy=(edge1, y1), xytext=(edge1 + side * 0.25, y1), arrowprops=arrow, zorder=2)
    ax.axis("off")
    if title:
        ax.set_title(title)
    from .display import describe_axes

    named = {name: (labels or {}).get(name, name) for name, _, _ in steps}
    describe_axes(ax, "Diagram of the forward pass, a box per tensor with its shape and axes, in order: " + "; ".join(
        f"{named[name]} {list(shape)} ({axes})"
        + (f" from {' and '.join(named[p] for p in flow[name])}" if flow.get(name) else "")
        for name, shape, axes in steps) + ".")
    return ax
