"""Lesson 06: the three skip wirings, how a layer's output joins the hidden state ``x``: ``"identity"``
``x + projected``, ``"values"`` ``projected + v`` (walkthrough 000), ``"none"`` ``projected``; and stacks of layers
joined by them, with what reaches their end (signal and gradient).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..core import Attention, check_positive_int, check_tokens, shape_of
from .seeded import one_thread

__all__ = ["SKIP_KINDS", "check_wiring", "next_hidden", "AttentionStack", "signal_through_stack", "depth_sweep"]

SKIP_KINDS = ("identity", "values", "none")


def check_wiring(wiring: object, name: str = "wiring") -> str:
    """Lesson 06: ``wiring`` if it is one of :data:`SKIP_KINDS`; otherwise a ``ValueError`` naming the argument
    ``name``."""
    if wiring not in SKIP_KINDS:
        raise ValueError(f"{name} must be one of {list(SKIP_KINDS)}, got {wiring!r}")
    return wiring  # type: ignore[return-value]


def next_hidden(wiring: str, x: Tensor, out: Tensor, projected: Tensor) -> Tensor:
    """Lesson 06: the hidden state ``(B, N, chan)`` after one layer, from ``x``, the layer's output ``out``
    (``projected`` plus the merged values) and its output projection ``projected``, each ``(B, N, chan)``."""
    check_wiring(wiring)
    if wiring == "identity":
        return x + projected  # (B, N, chan): the usual residual
    if wiring == "values":
        return out  # (B, N, chan): projected + merged v
    return projected  # (B, N, chan): nothing added


# --- Stacks of attention layers: what the skip connection does to signal and gradient ---

class AttentionStack(nn.Module):
    """Lesson 06: ``depth`` :class:`Attention` layers, ``x (B, N, dim) -> (B, N, chan)``, joined by ``wiring``
    (:func:`next_hidden`: ``"identity"``, ``"values"``, ``"none"``), a plain attribute so one set of weights can be
    compared under all three."""

    def __init__(self, depth: int, dim: int, chan: int, num_heads: int = 1, wiring: str = "identity") -> None:
        super().__init__()
        check_positive_int("depth", depth)
        self.dim = check_positive_int("dim", dim)
        self.chan = check_positive_int("chan", chan)
        self.wiring = check_wiring(wiring)
        self.layers = nn.ModuleList(Attention(dim if i == 0 else chan, chan, num_heads) for i in range(depth))

    def forward(self, x: Tensor, *, depth: int | None = None, return_hidden: bool = False):
        """``x (B, N, dim) -> (B, N, chan)`` through the first ``depth`` layers (default: all); with
        ``return_hidden`` also the list ``[x_0, x_1, ..., x_depth]`` of hidden states."""
        x = check_tokens("x", x, self.dim, "dim")
        wiring = check_wiring(self.wiring)
        depth = len(self.layers) if depth is None else check_positive_int("depth", depth)
        if depth > len(self.layers):
            raise ValueError(f"depth={depth} is more than the stack's {len(self.layers)} layers")
        if wiring == "identity" and self.dim != self.chan:
            raise ValueError(
                f"wiring='identity' adds x to the attention output, so x must be as wide as the output: "
                f"x has shape {shape_of(x)} (dim={self.dim}) but the output has chan={self.chan} features; "
                f"use dim == chan, or wiring='values' or wiring='none'"
            )
        hidden = [x]
        for layer in self.layers[:depth]:
            out, inter = layer(x, return_intermediates=True)  # each (B, N, chan)
            x = next_hidden(wiring, x, out, inter["projected"])  # (B, N, chan): joined by the wiring
            hidden.append(x)
        return (x, hidden) if return_hidden else x

    def extra_repr(self) -> str:
        return f"wiring={self.wiring!r}"


def _size_and_token_std(hidden: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Root mean square and token std (0 below ``1e-12`` times the RMS) of each hidden state, two ``(len(hidden),)``."""
    rms = torch.stack([h.detach().pow(2).mean().sqrt() for h in hidden])
    token_std = torch.stack([h.detach().std(dim=1).mean() for h in hidden])
    return rms, token_std.masked_fill(token_std < 1e-12 * rms, 0.0)


def signal_through_stack(stack: AttentionStack, x: Tensor, *, depth: int | None = None) -> dict[str, Tensor]:
    """Lesson 06: ``"rms"`` and ``"token_std"`` ``(depth + 1,)`` of ``x_0 .. x_depth``, and ``"grad_norm"`` ``(depth,)``,
    the norm of the gradient of ``||x_depth||`` with respect to each layer's parameters (``.grad`` left untouched)."""
    if not isinstance(stack, AttentionStack):
        raise TypeError(f"stack must be an attn_helpers.AttentionStack, got {type(stack).__name__}")
    with torch.enable_grad(), one_thread():
        out, hidden = stack(x, depth=depth, return_hidden=True)
        layers = stack.layers[: len(hidden) - 1]
        params = [list(layer.parameters()) for layer in layers]
        grads = torch.autograd.grad(out.norm(), [p for group in params for p in group])
    rms, token_std = _size_and_token_std(hidden)  # (depth + 1,) each
    grads = iter(grads)  # in the order of params: each layer's group in turn
    norms = [torch.sqrt(sum(next(grads).pow(2).sum() for _ in group)) for group in params]
    return {"rms": rms, "token_std": token_std, "grad_norm": torch.stack(norms)}  # (depth + 1,) x 2, (depth,)


def depth_sweep(stack: AttentionStack, x: Tensor, depths: Sequence[int]) -> dict[str, Tensor]:
    """Lesson 06: for every ``L`` in ``depths``, :func:`signal_through_stack`'s ``"rms"``, ``"token_std"`` of ``x_L`` and
    the first layer's ``"grad_norm"``, each ``(len(depths),)``, from one forward pass on one thread."""
    if not isinstance(stack, AttentionStack):
        raise TypeError(f"stack must be an attn_helpers.AttentionStack, got {type(stack).__name__}")
    depths = [check_positive_int("depths[i]", int(L)) for L in depths]
    if not depths:
        raise ValueError("depths must name at least one depth, got none")
    if max(depths) > len(stack.layers):
        raise ValueError(f"depths {depths} go beyond the stack's {len(stack.layers)} layers")
    first = list(stack.layers[0].parameters())
    with torch.enable_grad(), one_thread():
        _, hidden = stack(x, depth=max(depths), return_hidden=True)  # hidden[L]: (B, N, chan)
        grads = []
        for L in depths:
            g = torch.autograd.grad(hidden[L].norm(), first, retain_graph=True)
            grads.append(torch.sqrt(sum(t.pow(2).sum() for t in g)))
    rms, token_std = _size_and_token_std([hidden[L] for L in depths])  # (len(depths),) each
    return {"rms": rms, "token_std": token_std, "grad_norm": torch.stack(grads)}
