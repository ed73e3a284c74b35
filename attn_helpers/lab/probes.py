"""Lesson probes: measurements that lessons make on the attention math, apart from the math itself.

Imports torch only. Softmax saturation (lesson 02: why scores are divided by sqrt(d_k)), the entropy
of attention rows, and stacks of attention layers (lesson 06: what the skip connection does to
signal and gradient). Lesson 12: the weights after a sliding window, a soft cap and a sink, and how far a stack
of sliding-window layers reaches.
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
    """Entropy (in nats) of each attention row: ``(..., N_q, N_k) -> (..., N_q)``.

    ``log(N_k)`` for uniform weights, ``0`` for one-hot weights. Zero weights contribute zero.
    """
    weights = check_tensor("weights", weights, min_ndim=1)
    logs = torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))
    return -(weights * logs).sum(dim=-1)


# --------------------------------------------------------------------------------------------
# Measuring softmax saturation (lesson 02: why scores are divided by sqrt(d_k))
# --------------------------------------------------------------------------------------------

def softmax_grad_norm(scores: Tensor, upstream: Tensor) -> Tensor:
    """Size of the gradient that reaches the scores through a row softmax: ``(..., N_k) -> (...)``.

    For ``loss = (upstream * softmax(scores, dim=-1)).sum()`` the gradient with respect to
    ``scores`` is ``p * (upstream - (p * upstream).sum(-1, keepdim=True))``, ``p`` being the
    weights; this returns its Euclidean norm over each row. ``upstream`` has the shape of
    ``scores``: the gradient arriving at the weights from later layers. A saturated row (one
    weight near 1, the rest near 0) lets almost nothing through, so its norm is near 0.
    """
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
    """How peaked ``softmax(scores, dim=-1)`` is, as plain numbers averaged over the rows.

    ``scores (..., N_k)`` are the softmax's input, already scaled. Returns a dict with
    ``variance`` (of all the scores), ``max_weight`` (the mean over rows of each row's largest
    weight: ``1 / N_k`` when uniform, ``1`` when one-hot), ``entropy`` (the mean of
    :func:`attention_entropy`, in nats: ``log(N_k)`` uniform, ``0`` one-hot) and, when
    ``upstream`` (same shape as ``scores``) is given, ``grad_norm`` (the mean of
    :func:`softmax_grad_norm`).
    """
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


# --------------------------------------------------------------------------------------------
# Stacks of attention layers: what the skip connection does to signal and gradient
# --------------------------------------------------------------------------------------------

class AttentionStack(nn.Module):
    """``depth`` of walkthrough 000's :class:`Attention` layers in a row, joined by a chosen wiring.

    ``x (B, N, dim) -> (B, N, chan)``: layer 0 maps ``dim -> chan``, the others ``chan -> chan``.
    With ``projected_l`` the output projection of layer ``l`` and ``v_l`` its merged values
    (both ``(B, N, chan)``), the next hidden state is

    - ``wiring="identity"``: ``x_{l+1} = x_l + projected_l``, the usual residual (needs ``dim == chan``);
    - ``wiring="values"``: ``x_{l+1} = projected_l + v_l``, walkthrough 000's skip through V (what
      :class:`Attention` returns);
    - ``wiring="none"``: ``x_{l+1} = projected_l``.

    ``wiring`` is a plain attribute, so one set of weights can be compared under all three wirings.
    (*skip* alone names the tensor added, as in lesson 00's table, never the wiring.)
    """

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
    """Root mean square and token std of each hidden state ``(B, N, chan)``: two ``(len(hidden),)``.

    The token std is the standard deviation over the token axis, averaged over batch and features; one
    below ``1e-12`` times the RMS is rounding noise (the tokens are equal) and reported as exactly 0.
    """
    rms = torch.stack([h.detach().pow(2).mean().sqrt() for h in hidden])
    token_std = torch.stack([h.detach().std(dim=1).mean() for h in hidden])
    return rms, token_std.masked_fill(token_std < 1e-12 * rms, 0.0)


def signal_through_stack(stack: AttentionStack, x: Tensor, *, depth: int | None = None) -> dict[str, Tensor]:
    """How big the signal and the gradient are at every layer of ``stack`` for the input ``x (B, N, dim)``.

    Runs the first ``depth`` layers (default: all) and returns

    - ``"rms"``: ``(depth + 1,)`` the root mean square of ``x_0`` (the input), ``x_1``, ..., ``x_depth``;
    - ``"token_std"``: ``(depth + 1,)`` how different the tokens are: the standard deviation over the
      token axis, averaged over batch and features; 0 when every token carries the same vector (a
      value below ``1e-12`` times the RMS is rounding noise and reported as exactly 0);
    - ``"grad_norm"``: ``(depth,)`` the norm of the gradient of the loss ``||x_depth||`` with respect to
      all parameters of layer ``l`` (``l = 0`` is the first layer). The loss's gradient at the output,
      ``x_depth / ||x_depth||``, has norm 1 whatever the depth, so the numbers compare across depths.

    Gradients are returned, not accumulated: the parameters' ``.grad`` are left untouched.
    """
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
    """The output's size and the first layer's gradient for several depths of ``stack``, at once.

    For every ``L`` in ``depths`` (each in ``[1, stack.depth]``), with ``x (B, N, dim)`` as input and
    the first ``L`` layers: ``"rms"`` and ``"token_std"`` of ``x_L`` and ``"grad_norm"``, the norm of
    the gradient of ``||x_L||`` with respect to the first layer's parameters; each ``(len(depths),)``.
    The same numbers as :func:`signal_through_stack` at each depth, from one forward pass, on one
    thread (so the printed digits are the same on every machine). Lesson 06 writes this loop out.
    """
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


# --------------------------------------------------------------------------------------------
# Lesson 12: a window, a soft cap and a sink between the scores and the weights; the reach of a stack
# --------------------------------------------------------------------------------------------

def weights_after_steps(scores: Tensor, *, window: int, softcap: float | None = None,
                        sink: float | None = None) -> Tensor:
    """The weights of one head's scaled ``scores (N, N)`` under a sliding window of ``window`` keys, after a soft
    cap (``None`` or 0: none) and with one sink logit (``None``: none), in the order of Gemma 2's and gpt-oss's
    eager attention: cap, mask, softmax (with the sink). ``(N, N)``; rows sum to 1, or less with a sink."""
    scores = check_tensor("scores", scores, ndim=2)
    capped = softcap_scores(scores, softcap) if softcap else scores  # (N, N)
    masked = apply_mask(capped, sliding_window_mask(scores.shape[0], scores.shape[1], window=window))  # (N, N)
    if sink is None:
        return torch.softmax(masked, dim=-1)  # (N, N)
    return softmax_with_sinks(masked[None], torch.tensor([float(sink)], dtype=scores.dtype))[0]  # (N, N), one head


def window_reach(n: int, window: int, num_layers: int) -> Tensor:
    """Which inputs each position can draw on after ``num_layers`` sliding-window layers with a residual:
    ``(n, n)`` boolean, ``[i, j]`` True when token ``j``'s input can reach position ``i``'s output. One layer lets
    ``i`` read ``j`` when ``sliding_window_mask`` allows it; a stack composes those paths (a boolean matrix power)."""
    check_positive_int("num_layers", num_layers)
    step = sliding_window_mask(n, window=window).to(torch.int64)  # (n, n): one layer's paths
    reach = torch.eye(n, dtype=torch.int64)  # (n, n): before any layer, each position has its own input
    for _ in range(num_layers):
        reach = ((step @ reach) > 0).to(torch.int64)  # (n, n): one more layer's hop
    return reach.bool()
