"""Checkers for 10 · Positions: shuffled inputs (a prediction), RoPE written by hand (``apply_rope`` and
``transformers`` refused) and what a shift of every position changes when ``v`` is rotated too (a prediction)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core import apply_rope, permute_tokens
from ._core import Verdict, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import TRANSFORMERS, Watch, library
from ._predict import prediction_checker

__all__ = ["check_shuffle_prediction", "check_rope", "check_rotated_v_shift"]

@prediction_checker(choices=("reordered", "changed"))
def check_shuffle_prediction(choice: str, out: Tensor, out_shuffled: Tensor, perm: Tensor) -> Verdict:
    """Prediction 10: after shuffling the tokens with ``perm``, are the output rows ``"reordered"`` or ``"changed"``?

    Its one use is 10.1.2's causal layer without positions, so a wrong ``"reordered"`` is pointed at the mask."""
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
                 "the causal mask keeps keys by slot, not by token: after the shuffle, which tokens does each "
                 "query see?")


_ROPE_LIBRARY = (library(("apply_rope", "RotaryAttention")) | TRANSFORMERS
                 | Watch({torch.onnx.ops.rotary_embedding: "PyTorch's rotary_embedding"}))


def _rope_variant(x: Tensor, positions: Tensor, *, sign: float = 1.0, exponent: float = 2.0, base: float = 10000.0,
                  interleaved: bool = False, swap: bool = False, written_interleaved: bool = False,
                  flipped: str = "") -> Tensor:
    """RoPE with one typical mistake: the direction, ``θ_i``'s exponent or base, the pairing, cos and sin swapped,
    one sign flipped (``flipped="a"`` or ``"b"``: that half's sine term has the wrong sign), or the half pairs turned
    right but written back interleaved."""
    head_dim = x.shape[-1]
    theta = base ** (-exponent * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    angle = sign * positions[:, None].to(torch.float64) * theta  # (N, head_dim/2)
    cos, sin = (angle.sin(), angle.cos()) if swap else (angle.cos(), angle.sin())
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : head_dim // 2], x[..., head_dim // 2:])
    turned = (a * cos + (1 if flipped == "a" else -1) * b * sin, (-1 if flipped == "b" else 1) * a * sin + b * cos)
    if interleaved or written_interleaved:
        return torch.stack(turned, dim=-1).flatten(-2)  # (..., N, head_dim): a'_0, b'_0, a'_1, b'_1, ...
    return torch.cat(turned, dim=-1)  # (..., N, head_dim): all a', then all b'


def _judge_rope(x: Tensor, positions: Tensor) -> Any:
    mistakes = {
        "every pair turns clockwise (the signs of the sines are swapped)": (
            _rope_variant(x, positions, sign=-1.0), "a' = a cos φ - b sin φ, b' = a sin φ + b cos φ."),
        "feature 2i is paired with 2i + 1 (the interleaved pairing)": (
            _rope_variant(x, positions, interleaved=True),
            "this exercise uses the half pairing: feature i goes with feature i + head_dim/2."),
        "the half pairs are turned right but written back interleaved (torch.stack(..., -1).flatten(-2))": (
            _rope_variant(x, positions, written_interleaved=True),
            "put the turned halves back where they came from: torch.cat([a', b'], dim=-1)."),
        "θ_i = 10000^(-i/head_dim), without the 2 (the same θ_i as the base 100)": (
            _rope_variant(x, positions, exponent=1.0), "θ_i = 10000 ** (-2 * i / head_dim), i = 0 .. head_dim/2 - 1."),
        "θ_i = 10000^(+2i/head_dim): the minus sign is missing, so θ_i grows with i": (
            _rope_variant(x, positions, exponent=-2.0),
            "θ_i must shrink with i: θ_i = 10000 ** (-2 * i / head_dim), so pair 0 turns 1 radian per position."),
        "θ_i = 10000^(-2i/(head_dim/2)): head_dim/2 (the number of pairs) in the exponent": (
            _rope_variant(x, positions, exponent=4.0),
            "the exponent divides by head_dim, the full width: θ_i = 10000 ** (-2 * i / head_dim)."),
        "the row index 0, 1, 2, ... is used instead of the positions": (
            _rope_variant(x, torch.arange(len(positions))), "the angle is positions[row] × θ_i."),
        "cos and sin swapped places": (
            _rope_variant(x, positions, swap=True), "at position 0 nothing may move: a' starts with a cos φ."),
        "one sign is flipped: b' = b cos φ - a sin φ (a' is right)": (
            _rope_variant(x, positions, flipped="b"), "b' = a sin φ + b cos φ: the sine enters b' with a plus."),
        "one sign is flipped: a' = a cos φ + b sin φ (b' is right)": (
            _rope_variant(x, positions, flipped="a"), "a' = a cos φ - b sin φ: the sine enters a' with a minus."),
        **{f"θ_i uses the base {base:g} instead of 10000": (
            _rope_variant(x, positions, base=base), "θ_i = 10000 ** (-2 * i / head_dim): the base is 10000.")
           for base in (1000.0, 10.0, 100000.0)},  # the base 100 is "without the 2"
        **{f"the angle uses positions {shift:+d}": (
            _rope_variant(x, positions + shift), "the angle is positions[row] × θ_i, the position as given.")
           for shift in (1, -1)},
    }

    def judge(got: Any) -> Verdict:
        if isinstance(got, Tensor) and got.shape == x.shape and torch.equal(got, x):
            return wrong("your function returned x unchanged (the stub's return x is still there?).",
                         "only position 0 leaves a pair where it was; " + _ROPE_HOW)
        return compare_tensors(got, apply_rope(x, positions), name="your result", likely_mistakes=mistakes,
                               hint=_ROPE_TEST)

    return judge


_ROPE_HOW = ("turn each pair yourself: a = x[..., :half], b = x[..., half:], then a cos - b sin and a sin + b cos, "
             "with the angle position × θ_i.")

_ROPE_TEST = ("test one-hot rows by hand, with head_dim 6. At position 0 nothing moves: "
              "rope(torch.eye(6)[[0]], torch.tensor([0])) must return its input. At position 1 pair 0 (features 0 "
              "and 3) turns by 1 radian: rope(torch.eye(6)[[0]], torch.tensor([1])) must give cos 1 ≈ 0.540 at "
              "feature 0 and sin 1 ≈ 0.841 at feature 3, and rope(torch.eye(6)[[3]], torch.tensor([1])) must give "
              "-sin 1 ≈ -0.841 at feature 0 and cos 1 ≈ 0.540 at feature 3; every other feature stays 0.")


@checker
def check_rope(answer: Any) -> Verdict:
    """Exercise 10: ``rope(x (..., N, head_dim), positions (N,))`` with the half pairing, on three inputs."""
    g = torch.Generator().manual_seed(102)  # x (..., N, head_dim), positions (N,) out of order
    inputs = [(torch.randn(*shape, generator=g, dtype=torch.float64), torch.tensor(positions)) for shape, positions
              in (((5, 6), [3, 0, 7, 1, 12]), ((2, 3, 4, 10), [40, 41, 2, 9]), ((3, 4), [100, 5, 0]))]
    return judge_function(
        answer, [((x, p), f"for x {list(x.shape)} at positions {p.tolist()}", _judge_rope(x, p)) for x, p in inputs],
        watched=_ROPE_LIBRARY, example="rope(x, positions)", lines=_ROPE_HOW,
        raised="x may have any number of leading axes (the second input is 4-D): slice the last one, "
               "x[..., :half] and not x[:, :half]; read head_dim from x.shape[-1] and use positions as given "
               "(shape (N,)).",
        success="the same as apply_rope on three inputs of other sizes (head_dim 6, 10 and 4, positions out of "
                "order): pair i = features (i, i + head_dim/2), turned by position × θ_i.")


SHIFT_NAMES = ("scores", "weights", "heads")


@checker
def check_rotated_v_shift(answer: Any) -> Verdict:
    """Prediction 10: with ``v`` rotated too, the set of :data:`SHIFT_NAMES` a shift of every position changes."""
    if isinstance(answer, str):
        answer = set() if answer.strip().lower() in ("", "none", "nothing") else {answer}
    if not isinstance(answer, (set, list, tuple, frozenset)) or not all(isinstance(n, str) for n in answer):
        return wrong(f"the answer should be a set of names such as {{'scores'}} (or set() for none), got {answer!r}.",
                     f"pick from {list(SHIFT_NAMES)}.")
    names = {n.strip().lower() for n in answer}
    unknown = names - set(SHIFT_NAMES)
    if unknown:
        return wrong(f"{sorted(unknown)} are not among {list(SHIFT_NAMES)}.",
                     "heads is weights @ v, each head's output before the heads are merged.")
    g = torch.Generator().manual_seed(103)  # the largest change of each when every position moves by 1000
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64) for _ in range(3))  # (B, H, N, head_dim)
    results = []
    for positions in (torch.arange(6), torch.arange(6) + 1000):
        scores = apply_rope(q, positions) @ apply_rope(k, positions).mT / 8**0.5  # (B, H, N, N), head_dim = 8
        weights = torch.softmax(scores, dim=-1)  # (B, H, N, N)
        results.append({"scores": scores, "weights": weights, "heads": weights @ apply_rope(v, positions)})
    gaps = {name: (results[0][name] - results[1][name]).abs().max().item() for name in SHIFT_NAMES}
    changed = {name for name, gap in gaps.items() if gap > 1e-9}
    measured = ", ".join(f"{name} by {gap:.1e}" if gap > 1e-9 else f"{name} by less than 1e-9"
                         for name, gap in gaps.items())
    if names == changed:
        return correct(f"measured with the shift 1000: {measured}. The scores still compare q and k by their "
                       "offset, but each value now carries its own absolute angle into the output.")
    # A wrong answer gets no measurement: the gaps would tell which tensors changed (an answer to copy).
    given = f"{sorted(names)}" if names else "set() (nothing changes)"
    told = f"{given}: not what the checker measured (it shows the measurement once your set is right)."
    if names & {"scores", "weights"}:
        return wrong(told, "scores and weights are made from q and k alone: does rotating v reach them, and does "
                           "shifting every position change q_m · k_n?")
    return wrong(told, "heads = Σ_n weights[m, n] · R(n θ) v_n: each value is turned by its own position. What "
                       "does shifting every position do to those turns?")
