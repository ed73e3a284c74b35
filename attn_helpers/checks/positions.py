"""Checkers for 10 · Positions: what shuffling the input does to the output (a prediction), the rotation
of one pair of features (code the checker runs), and which tensors RoPE rotates.

Each judge recomputes the right answer from the exercise's inputs or from the library (the rotation
from :func:`attn_helpers.positions.apply_rope`, the rotated tensors from a :class:`RotaryAttention`
layer's intermediates) and recognises the typical wrong answers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..positions import RotaryAttention, apply_rope, permute_tokens
from ._core import Verdict, checker, correct, wrong
from ._predict import as_choice, prediction_checker

__all__ = ["check_shuffle_prediction", "check_pair_rotation", "check_rotated_tensors"]

SHUFFLE_CHOICES = ("reordered", "changed")
TENSOR_NAMES = ("x", "q", "k", "v", "scores", "weights", "out")


# ------------------------------------------------------------------------------ predict: shuffle the input

@prediction_checker
def check_shuffle_prediction(prediction: Any, out: Tensor, out_shuffled: Tensor, perm: Tensor) -> Verdict:
    """Prediction: after shuffling the input tokens with ``perm``, are the output rows the old ones
    ``"reordered"`` by ``perm``, or ``"changed"`` numbers? ``out``, ``out_shuffled``: ``(B, N, chan)``."""
    choice = as_choice(prediction, SHUFFLE_CHOICES)
    if isinstance(choice, Verdict):
        return choice
    gap = (out_shuffled - permute_tokens(out, perm)).abs().max().item()
    happened = "reordered" if gap < 1e-5 else "changed"
    if choice == happened == "reordered":
        return correct("every output row is an old row in its new place (to within 1e-5): the layer gives each "
                       "token the same output wherever it sits.")
    if choice == happened:
        return correct(f"the rows changed (largest difference {gap:.2f} from the reordered old rows): something in "
                       "this layer depends on where the tokens sit.")
    if happened == "reordered":
        return wrong("nothing new was computed: the shuffled input gives the old rows, reordered (to within 1e-5).",
                     "each output row is a weighted average over all tokens, with weights from dot products; "
                     "which slot a token sits in never enters the formula.")
    return wrong(f"the rows changed (largest difference {gap:.2f}): something in this layer depends on where the "
                 "tokens sit.",
                 "ask which keys each query is allowed to see after the shuffle (a mask keeps keys by slot), what "
                 "was added to x before the layer, or what the layer does to q and k.")


# ------------------------------------------------------------------------------ code: rotate one pair

def _reference(a: Tensor, b: Tensor, angle: Tensor) -> tuple[Tensor, Tensor]:
    """The library's rotation of the pair ``(a, b)`` by ``angle`` (integers: the positions of a 2-feature RoPE)."""
    pair = torch.stack([a, b], dim=-1)[:, None, :]  # (T, 1, 2): T one-row sequences with head_dim 2
    rotated = apply_rope(pair, angle[:, None])[:, 0]  # (T, 2); θ_0 = 1, so the angle is the position
    return rotated[:, 0], rotated[:, 1]


@checker
def check_pair_rotation(answer: Any) -> Verdict:
    """Exercise: ``answer(a, b, angle) -> (a_rot, b_rot)``, the pair ``(a, b)`` turned by ``angle`` radians
    (counter-clockwise), elementwise on tensors ``(T,)``; checked against :func:`apply_rope`."""
    if not callable(answer):
        return wrong(f"the answer should be a function rotate(a, b, angle), got {type(answer).__name__}.",
                     "define it with def rotate(a, b, angle): ... and write answer = rotate.")
    g = torch.Generator().manual_seed(10)
    a, b = torch.randn(6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    angle = torch.tensor([0, 1, 2, 3, 5, 8])  # whole radians: positions 0..8 of the fastest pair (θ = 1)
    expected = _reference(a, b, angle)
    got = answer(a.clone(), b.clone(), angle.to(torch.float64))
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return wrong(f"rotate should return a pair (a_rot, b_rot), got {type(got).__name__}.",
                     "end the function with return a_rot, b_rot.")
    got = [torch.as_tensor(t, dtype=torch.float64) for t in got]
    if any(t.shape != a.shape for t in got):
        return wrong(f"rotate returned shapes {[list(t.shape) for t in got]}, expected {list(a.shape)} each "
                     "(one rotated number per input).", "work elementwise: a * torch.cos(angle) - ...")

    def same(pair: tuple[Tensor, Tensor]) -> bool:
        return all(torch.allclose(x, y, rtol=0, atol=1e-6) for x, y in zip(got, pair))

    if same(expected):
        length = torch.allclose(got[0] ** 2 + got[1] ** 2, a ** 2 + b ** 2, rtol=0, atol=1e-9)
        return correct(f"the same as apply_rope on a pair of features at angles 0-8 rad; the arrow keeps its "
                       f"length: {length}.")
    c, s = angle.cos().to(torch.float64), angle.sin().to(torch.float64)
    mistakes = {
        "the pair turned clockwise (the signs of the sines are swapped)": (
            (a * c + b * s, -a * s + b * c), "a_rot = a cos(angle) - b sin(angle), b_rot = a sin(angle) + b cos(angle)."),
        "cos and sin swapped places": (
            (a * s - b * c, a * c + b * s), "at angle 0 nothing may move: a_rot must start as a * cos(angle)."),
        "the two outputs came back in the wrong order": (
            (expected[1], expected[0]), "return a_rot first, then b_rot."),
        "each feature was scaled by cos(angle) and sin(angle) on its own, without mixing a and b": (
            (a * c, b * s), "a rotation mixes the two features: a_rot needs b too, b_rot needs a too."),
        "the angle was taken in degrees": (
            _reference_degrees(a, b, angle), "torch.cos and torch.sin take radians; use the angle as it is."),
    }
    for cause, (values, hint) in mistakes.items():
        if same(values):
            return wrong(f"your rotation matches what you get when {cause}.", hint)
    at_zero = torch.allclose(got[0][0], a[0], atol=1e-6) and torch.allclose(got[1][0], b[0], atol=1e-6)
    return wrong(f"the rotated pair differs from apply_rope's (largest difference "
                 f"{max((x - y).abs().max().item() for x, y in zip(got, expected)):.3g}); at angle 0 your pair "
                 f"{'stays put, as it should' if at_zero else 'moves, but a turn by 0 must change nothing'}.",
                 "a_rot = a cos(angle) - b sin(angle), b_rot = a sin(angle) + b cos(angle).")


def _reference_degrees(a: Tensor, b: Tensor, angle: Tensor) -> tuple[Tensor, Tensor]:
    radians = angle.to(torch.float64) * math.pi / 180.0
    return a * radians.cos() - b * radians.sin(), a * radians.sin() + b * radians.cos()


# ------------------------------------------------------------------------------ concept: which tensors turn

def _rotated_by_the_layer() -> set[str]:
    """Which of :data:`TENSOR_NAMES` a :class:`RotaryAttention` layer changes by rotating (found by running it)."""
    torch.manual_seed(0)
    layer = RotaryAttention(8, 8, num_heads=2)
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        _, inter = layer(x, return_intermediates=True)
    pairs = {"x": (inter["x"], x), "q": (inter["q_rot"], inter["q"]), "k": (inter["k_rot"], inter["k"]),
             "v": (inter["v"], layer.qkv(x)[..., 16:].reshape(1, 5, 2, 4).transpose(1, 2))}
    return {name for name, (after, before) in pairs.items() if not torch.allclose(after, before, atol=1e-6)}


@checker
def check_rotated_tensors(answer: Any) -> Verdict:
    """Exercise: the names of the tensors RoPE rotates, as a set of strings from :data:`TENSOR_NAMES`."""
    if isinstance(answer, str):
        answer = {answer}
    if not isinstance(answer, (set, list, tuple, frozenset)) or not all(isinstance(n, str) for n in answer):
        return wrong(f"the answer should be a set of names such as {{'x', 'v'}}, got {answer!r}.",
                     f"pick from {list(TENSOR_NAMES)}.")
    names = {n.strip().lower() for n in answer}
    unknown = names - set(TENSOR_NAMES)
    if unknown:
        return wrong(f"{sorted(unknown)} are not among the layer's tensors {list(TENSOR_NAMES)}.",
                     "use the names of lesson 07's layer: x, q, k, v, scores, weights, out.")
    rotated = _rotated_by_the_layer()
    if names == rotated:
        return correct(f"{sorted(rotated)}: the two tensors whose dot products make the scores. The scores then "
                       "depend on the offset m - n; v, the content that gets mixed, is left as it is.")
    if "v" in names:
        return wrong("v is not rotated.", "RoPE changes the scores q·k, not what the weights average: v is "
                                          "the content, and the layer's output would change with the absolute "
                                          "position if v were turned.")
    if "x" in names:
        return wrong("x itself is not touched: a sinusoidal or learned table is *added* to x, RoPE is not.",
                     "RoPE acts after the projection and the head split, on two of the three projections.")
    if names & {"scores", "weights", "out"}:
        return wrong(f"{sorted(names & {'scores', 'weights', 'out'})} are computed from rotated tensors, but not "
                     "rotated themselves: a rotation turns pairs of features of a vector.",
                     "which two tensors have their features paired and turned before q @ k^T?")
    missing = rotated - names
    return wrong(f"{sorted(missing)} {'is' if len(missing) == 1 else 'are'} rotated too.",
                 "a score is q_m · k_n: for it to depend on m - n, both sides must be turned by their own position.")
