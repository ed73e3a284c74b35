"""Checkers for 07 · The complete layer: traced shapes, parameter counts, the head scale, spotting bugs.

Each judge recomputes the right answer from what the notebook passes in (the layer, its input, the
listing under review) and recognises the typical wrong answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ._core import Verdict, as_shape, checker, correct, wrong

__all__ = [
    "SuspectLine",
    "SUSPECT_LAYER",
    "numbered_listing",
    "check_traced_shape",
    "check_mha_parameter_count",
    "check_mha_head_scale",
    "check_suspect_lines",
]


def _as_count(answer: Any, what: str) -> int | Verdict:
    if isinstance(answer, Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or int(answer) != answer:
        return wrong(f"{what} should be a whole number, got {answer!r}.", "a count of numbers is an int.")
    return int(answer)


# ------------------------------------------------------------------------------ traced shape


@checker
def check_traced_shape(answer: Any, layer: nn.Module, x: Tensor, name: str = "qkv_heads") -> Verdict:
    """Exercise: predict the shape of the intermediate ``name`` when ``layer(x)`` runs (seed 000's Attention)."""
    shape = as_shape(answer, "a shape", hint="write it like (3, B, H, N, head_dim) with numbers.")
    if isinstance(shape, Verdict):
        return shape
    with torch.no_grad():
        _, inter = layer(x, return_intermediates=True)
    expected = list(inter[name].shape)
    if shape == expected:
        return correct(f"{name}: {expected} ({layer.AXES[name]}).")
    B, N, _ = x.shape
    H, hd, chan = layer.num_heads, layer.head_dim, layer.chan
    if name == "qkv_heads":
        if shape == [B, N, 3, H, hd]:
            return wrong(f"{shape} is the shape right after reshape(B, N, 3, H, head_dim), before the permute.",
                         "permute(2, 0, 3, 1, 4) brings the q/k/v axis first and the heads before the tokens.")
        if shape == [B, H, N, hd]:
            return wrong(f"{shape} is the shape of q (or k, or v) alone.",
                         "qkv_heads still holds all three: a leading axis of size 3 comes first.")
        if shape[:-1] == expected[:-1] and shape[-1] != hd:
            return wrong(f"the last size {shape[-1]} is not this layer's head_dim.",
                         f"head_dim = chan // num_heads = {chan} // {H}; the heads share chan, they do not each get all of it.")
    if sorted(shape) == sorted(expected):
        return wrong(f"{shape} has the right sizes in the wrong order.",
                     f"follow the axes: {layer.AXES[name]}.")
    return wrong(f"{shape} is not the shape of {name}.",
                 "run the reshape and the permute by hand on the sizes, one axis at a time.")


# -------------------------------------------------------------------------- parameter count


@checker
def check_mha_parameter_count(answer: Any, module: nn.Module) -> Verdict:
    """Exercise: the number of learnable numbers of a ``MultiHeadAttention(d_model, num_heads)``."""
    value = _as_count(answer, "the parameter count")
    if isinstance(value, Verdict):
        return value
    expected = sum(p.numel() for p in module.parameters())
    d, H = module.d_model, module.num_heads
    if value == expected:
        return correct(f"{expected:,} = 4·d_model² + 4·d_model with d_model = {d}; the {H} heads add nothing.")
    if value == 4 * d * d:
        return wrong(f"{value:,} = 4·d_model² counts the four weight matrices only.",
                     "each of the four Linear layers also has a bias of d_model numbers.")
    if value == 3 * d * d + 3 * d:
        return wrong(f"{value:,} counts q_proj, k_proj and v_proj only.",
                     "the output projection out_proj is a fourth Linear(d_model, d_model).")
    if value == H * (4 * d * d + 4 * d):
        return wrong(f"{value:,} is one full layer per head, times {H}.",
                     "the heads share the projections: each head only gets a slice of d_model columns.")
    if value in (4 * d * module.head_dim + 4 * module.head_dim, 4 * d * module.head_dim):
        return wrong(f"{value:,} looks like the weights of a single head.",
                     "count whole Linear(d_model, d_model) layers: the head split is a reshape, not a smaller layer.")
    return wrong(f"{value:,} is not the number of learnable numbers.",
                 "each Linear(d_in, d_out) holds d_in·d_out weights and d_out biases; this layer has four.")


# ---------------------------------------------------------------------------------- head scale


@checker
def check_mha_head_scale(answer: Any, module: nn.Module) -> Verdict:
    """Exercise: the factor that multiplies each head's scores, ``1 / sqrt(head_dim)``."""
    if isinstance(answer, Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return wrong(f"the scale should be a number, got {answer!r}.", "compute it with math.sqrt or ** -0.5.")
    value = float(answer)
    d, hd = module.d_model, module.head_dim

    def near(x: float) -> bool:
        return math.isclose(value, x, rel_tol=1e-3)

    if near(hd ** -0.5):
        return correct(f"1/sqrt(head_dim) = 1/sqrt({hd}) = {hd ** -0.5:.4f}: each head's dot products sum over {hd} features.")
    if near(d ** -0.5):
        return wrong(f"{value:.4f} = 1/sqrt(d_model) = 1/sqrt({d}): seed 004's bug.",
                     f"a head's q and k have head_dim = {hd} features, not d_model = {d}: the scale follows the "
                     "width of the vectors actually dot-multiplied.")
    if near(hd ** 0.5):
        return wrong(f"{value:.4f} is sqrt(head_dim): that multiplies instead of divides.",
                     "the scores are divided by sqrt(head_dim), i.e. multiplied by its inverse.")
    if near(1 / hd):
        return wrong(f"{value:.4f} = 1/head_dim: the square root is missing.",
                     "the variance of a dot product grows like head_dim, so its spread grows like sqrt(head_dim).")
    return wrong(f"{value:.4f} is not this layer's scale.", "scale = head_dim ** -0.5 with head_dim = d_model // num_heads.")


# ---------------------------------------------------------------------------------- spot the bugs


@dataclass(frozen=True)
class SuspectLine:
    """One line of a listing under review: its code, and what is wrong with it (``None`` if nothing)."""

    code: str
    bug: str | None = None
    hint: str = ""  # a nudge that does not give the line away
    fine_because: str = ""  # said when a learner flags a correct line


SUSPECT_LAYER: tuple[SuspectLine, ...] = (
    SuspectLine("class SuspectAttention(nn.Module):"),
    SuspectLine("    def __init__(self, dim, chan, num_heads=1, qk_scale=None, dropout=0.1):",
                bug="dropout is accepted and stored nowhere that forward reads: asking for dropout changes "
                    "nothing (seed 004's actv and device, again).",
                hint="check that every argument of __init__ is used somewhere."),
    SuspectLine("        super().__init__()"),
    SuspectLine("        self.num_heads, self.head_dim = num_heads, chan // num_heads",
                fine_because="head_dim = chan // num_heads is right (a check that num_heads divides chan would help, "
                             "but the reshape on line 11 fails loudly anyway)."),
    SuspectLine("        self.scale = qk_scale or chan ** -0.5",
                bug="two bugs: `qk_scale or ...` replaces qk_scale=0.0 by the default (seed 000), and the default "
                    "uses chan, the width of all heads, instead of head_dim (seed 004).",
                hint="try qk_scale=0.0 in your head, and ask which vectors the scale's width belongs to."),
    SuspectLine("        self.qkv = nn.Linear(dim, 3 * chan, bias=False)",
                fine_because="one fused Linear(dim, 3*chan) makes q, k and v at once, as in seed 000."),
    SuspectLine("        self.proj = nn.Linear(chan, chan)",
                fine_because="the output projection maps the merged heads (chan wide) to chan."),
    SuspectLine(""),
    SuspectLine("    def forward(self, x):"),
    SuspectLine("        B, N, _ = x.shape"),
    SuspectLine("        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)  # (B, N, 3, H, head_dim)",
                fine_because="the 3*chan features are laid out as (3, H, head_dim), so this reshape is right."),
    SuspectLine("        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, N, head_dim)",
                fine_because="unpacking a tensor splits its first axis, which the permute made the q/k/v axis."),
    SuspectLine("        weights = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-2)  # (B, H, N, N)",
                bug="softmax(dim=-2) normalises each key's column, not each query's row: the weights of one "
                    "query no longer sum to one.",
                hint="ask over which axis the weights of one query must sum to one."),
    SuspectLine("        merged = (weights @ v).transpose(1, 2).reshape(B, N, -1)  # (B, N, chan)",
                fine_because="transpose then reshape merges the heads back (reshape copies when needed; view would fail)."),
    SuspectLine("        return self.proj(merged) + v.transpose(1, 2).reshape(B, N, -1)  # (B, N, chan)",
                fine_because="the skip goes through v because x is dim wide and the output chan wide (seed 000's design)."),
)


def numbered_listing(listing: tuple[SuspectLine, ...] = SUSPECT_LAYER) -> str:
    """The listing's code with line numbers from 1, as the exercise shows it."""
    return "\n".join(f"{i:>2}  {line.code}".rstrip() for i, line in enumerate(listing, start=1))


@checker
def check_suspect_lines(answer: Any, listing: tuple[SuspectLine, ...] = SUSPECT_LAYER) -> Verdict:
    """Exercise: the set of line numbers of ``listing`` that hold a bug; every flag is explained."""
    try:
        picked = {int(n) for n in ([answer] if isinstance(answer, int) else answer)}
    except (TypeError, ValueError):
        return wrong(f"give a set of line numbers like {{1, 2}}, got {answer!r}.", "list the numbers of the buggy lines.")
    buggy = {i for i, line in enumerate(listing, start=1) if line.bug}
    outside = sorted(n for n in picked if not 1 <= n <= len(listing))
    if outside:
        return wrong(f"the listing has lines 1 to {len(listing)}; {outside} are outside it.", "use the printed numbers.")
    if picked == buggy:
        found = "\n".join(f"   line {i}: {listing[i - 1].bug}" for i in sorted(buggy))
        return correct(f"all {len(buggy)} buggy lines found.\n{found}")
    notes = [f"line {n} is fine: {listing[n - 1].fine_because or 'nothing on it computes anything wrong.'}"
             for n in sorted(picked - buggy)]
    missed = sorted(buggy - picked)
    message = f"you found {len(picked & buggy)} of the {len(buggy)} buggy lines."
    if notes:
        message += "\n   " + "\n   ".join(notes)
    hint = " / ".join(listing[i - 1].hint for i in missed) if missed else "remove the lines that are fine."
    return wrong(message, hint)
