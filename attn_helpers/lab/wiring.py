"""Lesson 06: the three skip wirings, how a layer's output joins the hidden state ``x``: ``"identity"``
``x + projected``, ``"values"`` ``projected + v`` (walkthrough 000), ``"none"`` ``projected``.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["SKIP_KINDS", "check_wiring", "next_hidden"]

SKIP_KINDS = ("identity", "values", "none")


def check_wiring(wiring: object, name: str = "wiring") -> str:
    """Lesson 06: ``wiring`` if it is one of :data:`SKIP_KINDS`; otherwise a ``ValueError`` naming the argument
    ``name``."""
    if wiring not in SKIP_KINDS:
        raise ValueError(f"{name} must be one of {list(SKIP_KINDS)}, got {wiring!r}")
    return wiring  # type: ignore[return-value]


def next_hidden(wiring: str, x: Tensor, out: Tensor, projected: Tensor) -> Tensor:
    """Lesson 06: the hidden state after one layer: ``x``, ``out`` and ``projected`` each ``(B, N, chan)`` -> ``(B, N,
    chan)``.

    ``out`` is the layer's output (``projected`` plus the merged values), ``projected`` its output projection.
    """
    check_wiring(wiring)
    if wiring == "identity":
        return x + projected  # (B, N, chan): the usual residual
    if wiring == "values":
        return out  # (B, N, chan): projected + merged v
    return projected  # (B, N, chan): nothing added
