"""Named shape printouts: ``q: [13, 4, 100, 16]  (batch=13, H=4, tokens=100, head_dim=16)``.

Imports torch only. Printing lives here, never in the math.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor, nn

__all__ = ["describe", "show", "shape_rows", "shape_table", "shape_trace"]


def _pairs(axes: str | list[str] | tuple[str, ...], shape: list[int], label: str, subject: str) -> str:
    """``"axis=size, ..."`` for ``shape`` named by ``axes`` (a space-separated string or a list); the error names
    the axes as ``label`` and the tensor as ``subject``."""
    names = axes.split() if isinstance(axes, str) else [str(a) for a in axes]
    if len(names) != len(shape):  # zip would silently drop or mislabel axes
        raise ValueError(f"{label} names {len(names)} dimensions ({' '.join(names)!r}) but {subject} has shape "
                         f"{shape} ({len(shape)} dimensions)")
    return ", ".join(f"{n}={s}" for n, s in zip(names, shape))


def describe(tensor: Tensor | torch.Size | tuple[int, ...], axes: str | list[str] | tuple[str, ...], name: str = "") -> str:
    """Lessons 08 and 14:
    The one-line named shape of ``tensor``; ``axes`` names each dimension (a space-separated string).

    >>> describe(torch.zeros(13, 4, 100, 16), "batch H tokens head_dim", name="q")
    'q: [13, 4, 100, 16]  (batch=13, H=4, tokens=100, head_dim=16)'
    """
    shape = list(tensor.shape) if isinstance(tensor, Tensor) else list(tensor)
    pairs = _pairs(axes, shape, "axes", f"the tensor{' ' + name if name else ''}")
    return f"{name}: {shape}  ({pairs})" if name else f"{shape}  ({pairs})"


def show(tensor: Tensor | torch.Size | tuple[int, ...], axes: str | list[str] | tuple[str, ...], name: str = "") -> None:
    """Lessons 00-14: Print :func:`describe` of ``tensor``."""
    print(describe(tensor, axes, name))


def shape_rows(tensors: Mapping[str, Tensor], axes: Mapping[str, str]) -> list[tuple[str, list[int], str]]:
    """``(name, shape, "axis=size, ...")`` for each tensor, in order (``""`` for a name missing from ``axes``)."""
    return [(name, list(t.shape), _pairs(axes[name], list(t.shape), f"axes[{name!r}]", name) if name in axes else "")
            for name, t in tensors.items()]


def shape_table(tensors: Mapping[str, Tensor], axes: Mapping[str, str]) -> str:
    """Lessons 01, 04-06, 09, 10 and 13: Aligned named shapes of several tensors, one per line, in the mapping's order
    (a name missing from ``axes`` printed unnamed)."""
    width = max((len(n) for n in tensors), default=0)
    return "\n".join(f"{name:>{width}}: {str(shape):<20} ({pairs})" if pairs else f"{name:>{width}}: {shape}"
                     for name, shape, pairs in shape_rows(tensors, axes))


@contextmanager
def shape_trace(module: nn.Module, *, printer=print, labels: Mapping[str, str] | None = None) -> Iterator[list[str]]:
    """Lessons 00, 07 and 11: Print the named shape of every intermediate of each forward pass of ``module``, in order.

    ``module``: one that reports its intermediates (``AXES`` and ``add_observer``, those of :mod:`attn_helpers.core`);
    ``labels``: the name printed for an intermediate (e.g. ``{"q": "q_heads"}``). Yields the printed lines.
    """
    if not hasattr(module, "add_observer") or not hasattr(module, "AXES"):
        raise TypeError(
            f"module must be one of attn_helpers' attention modules (Attention, ConcatHeadsAttention, "
            f"MultiHeadAttention, ...), got {type(module).__name__}"
        )
    lines: list[str] = []

    def observer(mod: nn.Module, inter: Mapping[str, Tensor]) -> None:
        header = f"{type(mod).__name__} forward pass"
        shown = labels or {}
        table = shape_table({shown.get(n, n): t for n, t in inter.items()},
                            {shown.get(n, n): axes for n, axes in mod.AXES.items()})
        for line in (header, *table.splitlines()):
            lines.append(line)
            printer(line)

    with module.add_observer(observer):
        yield lines
