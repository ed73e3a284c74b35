"""Measurements lessons make on the attention math: softmax saturation (02), stacks of layers (06), the weights
after lesson 12's steps and the reach of sliding windows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..core import Attention, apply_mask, sliding_window_mask, softcap_scores, softmax_with_sinks
from ..core.arguments import check_positive_int, check_tensor, shape_of
from .threads import one_thread
from .wiring import SKIP_KINDS, check_wiring, next_hidden

__all__ = ["attention_entropy", "softmax_grad_norm", "softmax_statistics", "AttentionStack",
           "signal_through_stack", "depth_sweep", "weights_after_steps", "window_reach"]


def attention_entropy(weights: Tensor) -> Tensor:
    """Lessons 02 and 05: entropy (in nats) of each attention row: ``(..., N_q, N_k) -> (..., N_q)``.

    ``log(N_k)`` for uniform weights, ``0`` for one-hot weights. Zero weights contribute zero.
    """
    weights = check_tensor("weights", weights, min_ndim=1)
    logs = torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))
    return -(weights * logs).sum(dim=-1)


# --- Measuring softmax saturation (lesson 02: why scores are divided by sqrt(d_k)) ---

def softmax_grad_norm(scores: Tensor, upstream: Tensor) -> Tensor:
    """Lesson 02: the norm over each row of the gradient ``p * (upstream - (p * upstream).sum(-1))`` that reaches
    ``scores (..., N_k)`` through the softmax -> ``(...)``; near 0 for a saturated row."""
    scores = check_tensor("scores", scores, min_ndim=1)
    upstream = check_tensor("upstream", upstream, min_ndim=1)
    if upstream.shape != scores.shape:
        raise ValueError(
            f"upstream must have the shape of scores (one gradient entry per weight): scores has shape "
            f"{shape_of(scores)}, upstream has shape {shape_of(upstream)}"
        )
    p = torch.softmax(scores, dim=-1)  # (..., N_k)
    grad = p * (upstream - (p * upstream).sum(dim=-1, keepdim=True))  # (..., N_k)
    return grad.norm(dim=-1)  # (...)


def softmax_statistics(scores: Tensor, upstream: Tensor | None = None) -> dict[str, float]:
    """Lesson 02: how peaked ``softmax(scores (..., N_k))`` is, averaged over rows: ``variance`` of the scores,
    ``max_weight``, ``entropy`` (nats) and, with ``upstream``, ``grad_norm``."""
    scores = check_tensor("scores", scores, min_ndim=1)
    weights = torch.softmax(scores, dim=-1)  # (..., N_k)
    stats = {
        "variance": scores.to(torch.float64).var().item() if scores.numel() > 1 else 0.0,  # float64: stable digits
        "max_weight": weights.amax(dim=-1).mean().item(),
        "entropy": attention_entropy(weights).mean().item(),
    }
    if upstream is not None:
        stats["grad_norm"] = softmax_grad_norm(scores, upstream).mean().item()
    return stats


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
        self.layers = nn.ModuleList(
            Attention(dim if i == 0 else chan, chan, num_heads) for i in range(depth)
        )

    @property
    def depth(self) -> int:
        return len(self.layers)

    def forward(self, x: Tensor, *, depth: int | None = None, return_hidden: bool = False):
        """``x (B, N, dim) -> (B, N, chan)`` through the first ``depth`` layers (default: all).

        With ``return_hidden`` also the list ``[x_0, x_1, ..., x_depth]`` of hidden states.
        """
        x = check_tensor("x", x, ndim=3)
        wiring = check_wiring(self.wiring)
        depth = self.depth if depth is None else check_positive_int("depth", depth)
        if depth > self.depth:
            raise ValueError(f"depth={depth} is more than the stack's {self.depth} layers")
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, dim={self.dim}), got {shape_of(x)} (last dimension {x.shape[-1]})")
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
    norms, start = [], 0
    for group in params:
        chunk = grads[start:start + len(group)]
        start += len(group)
        norms.append(torch.sqrt(sum(g.pow(2).sum() for g in chunk)))
    return {"rms": rms, "token_std": token_std, "grad_norm": torch.stack(norms)}  # (depth + 1,) x 2, (depth,)


def depth_sweep(stack: AttentionStack, x: Tensor, depths: Sequence[int]) -> dict[str, Tensor]:
    """Lesson 06: for every ``L`` in ``depths``, :func:`signal_through_stack`'s ``"rms"``, ``"token_std"`` of ``x_L`` and
    the first layer's ``"grad_norm"``, each ``(len(depths),)``, from one forward pass on one thread."""
    if not isinstance(stack, AttentionStack):
        raise TypeError(f"stack must be an attn_helpers.AttentionStack, got {type(stack).__name__}")
    depths = [check_positive_int("depths[i]", int(L)) for L in depths]
    if not depths:
        raise ValueError("depths must name at least one depth, got none")
    if max(depths) > stack.depth:
        raise ValueError(f"depths {depths} go beyond the stack's {stack.depth} layers")
    first = list(stack.layers[0].parameters())
    with torch.enable_grad(), one_thread():
        _, hidden = stack(x, depth=max(depths), return_hidden=True)  # hidden[L]: (B, N, chan)
        grads = []
        for L in depths:
            g = torch.autograd.grad(hidden[L].norm(), first, retain_graph=True)
            grads.append(torch.sqrt(sum(t.pow(2).sum() for t in g)))
    rms, token_std = _size_and_token_std([hidden[L] for L in depths])  # (len(depths),) each
    return {"rms": rms, "token_std": token_std, "grad_norm": torch.stack(grads)}


# --- Lesson 12: a window, a soft cap and a sink between the scores and the weights; the reach of a stack ---

def weights_after_steps(scores: Tensor, *, window: int, softcap: float | None = None,
                        sink: float | None = None) -> Tensor:
    """Lesson 12: the weights of one head's scaled ``scores (N, N)`` under a sliding window of ``window`` keys, after
    a soft cap (``None`` or 0: none) and with one sink logit (``None``: none), in the order of Gemma 2's and gpt-oss's
    eager attention: cap, mask, softmax (with the sink). ``(N, N)``; rows sum to 1, or less with a sink."""
    scores = check_tensor("scores", scores, ndim=2)
    capped = softcap_scores(scores, softcap) if softcap else scores  # (N, N)
    masked = apply_mask(capped, sliding_window_mask(scores.shape[0], scores.shape[1], window=window))  # (N, N)
    if sink is None:
        return torch.softmax(masked, dim=-1)  # (N, N)
    return softmax_with_sinks(masked[None], torch.tensor([float(sink)], dtype=scores.dtype))[0]  # (N, N), one head


def window_reach(n: int, window: int, num_layers: int) -> Tensor:
    """Lesson 12: which inputs each position can draw on after ``num_layers`` sliding-window layers with a residual:
    ``(n, n)`` boolean, ``[i, j]`` True when token ``j``'s input can reach position ``i``'s output. One layer lets
    ``i`` read ``j`` when ``sliding_window_mask`` allows it; a stack composes those paths (a boolean matrix power)."""
    check_positive_int("num_layers", num_layers)
    step = sliding_window_mask(n, window=window).to(torch.int64)  # (n, n): one layer's paths
    reach = torch.eye(n, dtype=torch.int64)  # (n, n): before any layer, each position has its own input
    for _ in range(num_layers):
        reach = ((step @ reach) > 0).to(torch.int64)  # (n, n): one more layer's hop
    return reach.bool()
