"""Watch attention learn (lesson 08): toy tasks whose right attention pattern is known in advance,
a tiny model built from :class:`attn_helpers.Attention`, and a training loop that keeps snapshots.

Imports torch only. Everything is seeded and runs in float64 on one CPU thread, so the same
arguments give the same numbers on every run (the training loop restores the thread count after).

Tasks (each samples token ids ``(B, N)`` and targets ``(B, N)``; :data:`IGNORE` marks a position
without a target):

- :class:`PreviousTokenTask`: every position outputs the token one step to its left (position 0
  wraps around to the last); the right pattern is an off-diagonal line.
- :class:`ReverseTask`: position ``i`` outputs the token at ``N - 1 - i``; an anti-diagonal.
- :class:`LookupTask`: the first half holds key-value pairs (``"C5"``: letter C stores digit 5), the
  second half asks for letters (``"C?"``); each question outputs the digit stored with its letter.
  The right pattern depends on the content: each question looks at the pair with its letter.

Training: :func:`train` runs :func:`training_step` (forward, loss, backward, optimizer step) on fresh
batches and keeps snapshots; lesson 08 writes the same loop out. Knocking heads out:
``model(tokens, keep_heads=...)`` zeroes chosen heads' outputs before the output projection, and
:func:`head_knockout` measures a lookup model's accuracy per letter with each head out in turn.

Shapes: ``B`` batch, ``N`` tokens, ``L`` layers, ``H`` heads, ``S`` snapshots, ``C`` classes.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core import Attention, merge_heads
from ..core.positions import RotaryAttention, sinusoidal_encoding
from .probes import SKIP_KINDS
from .threads import one_thread
from ..core.arguments import check_positive_int

__all__ = [
    "IGNORE",
    "POSITION_SCHEMES",
    "Task",
    "PreviousTokenTask",
    "ReverseTask",
    "LookupTask",
    "TinyAttentionModel",
    "TrainConfig",
    "Adam",
    "TrainingRun",
    "pattern_match",
    "initial_model",
    "batch_generator",
    "training_step",
    "train",
    "train_many",
    "results_table",
    "timing_table",
    "pattern_match_table",
    "steps_table",
    "HeadKnockout",
    "head_knockout",
    "knockout_table",
    "knockout_summary",
    "NoWrapPreviousTokenTask",
    "held_out_accuracy",
    "order_blind_accuracy",
    "accuracy_by_length",
    "accuracy_table",
    "attention_by_offset",
]

IGNORE = -100  # target of a position that has nothing to predict (cross_entropy's ignore_index)
HELD_OUT_SEED = 20_240  # every run of a task is evaluated on the same held-out sequences
LETTERS = "abcdefghijklmnopqrstuvwxyz"
POSITION_SCHEMES = ("learned", "none", "sinusoidal", "rope")  # how the model is told where a token sits (lesson 10)


def _check_tokens(tokens: object, task: "Task") -> Tensor:
    if not isinstance(tokens, Tensor) or tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor (B, N) of token ids, got "
                        f"{getattr(tokens, 'dtype', type(tokens).__name__)}")
    if tokens.ndim != 2 or tokens.shape[1] != task.seq_len:
        raise ValueError(f"tokens must have shape (B, N={task.seq_len}) for {task.name!r}, got {list(tokens.shape)}")
    return tokens


# --------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------

class Task:
    """A toy task: random sequences, their targets, and the attention pattern that solves it.

    Subclasses set ``name``, ``seq_len`` (``N``), ``vocab_size`` (token ids ``0 .. vocab_size-1``)
    and ``n_classes`` (targets ``0 .. n_classes-1``, or :data:`IGNORE`), and implement
    :meth:`sample`, :meth:`ideal_attention` and :meth:`token_labels`.
    """

    name: str = "task"
    seq_len: int
    vocab_size: int
    n_classes: int

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``batch`` random sequences drawn with ``generator``: tokens ``(B, N)`` and targets ``(B, N)``, int64."""
        raise NotImplementedError

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        """The pattern that solves the task for ``tokens (B, N)``: ``(B, N, N)`` float32.

        Row ``i`` (query ``i``) is one-hot at the key that holds what position ``i`` must output;
        rows of positions without a target are all zeros.
        """
        raise NotImplementedError

    def token_labels(self, tokens: Tensor) -> list[str]:
        """Readable labels for one sequence ``tokens (N,)``, e.g. ``["c", "a", ...]``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in vars(self).items() if k != "name")
        return f"{type(self).__name__}({fields})"


class _LetterSequenceTask(Task):
    """Sequences of ``seq_len`` letters drawn uniformly from ``vocab_size`` letters."""

    def __init__(self, seq_len: int = 8, vocab_size: int = 16) -> None:
        self.seq_len = check_positive_int("seq_len", seq_len)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        if seq_len < 2:
            raise ValueError(f"seq_len must be at least 2, got {seq_len}")
        if vocab_size > len(LETTERS):
            raise ValueError(f"vocab_size must be at most {len(LETTERS)} (one letter each), got {vocab_size}")
        self.n_classes = vocab_size

    def _source(self) -> Tensor:
        """``(N,)``: the position each query must copy from."""
        raise NotImplementedError

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        check_positive_int("batch", batch)
        tokens = torch.randint(0, self.vocab_size, (batch, self.seq_len), generator=generator)  # (B, N)
        return tokens, tokens[:, self._source()]  # (B, N), (B, N)

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        tokens = _check_tokens(tokens, self)
        one = torch.zeros(self.seq_len, self.seq_len)  # (N, N)
        one[torch.arange(self.seq_len), self._source()] = 1.0
        return one.expand(tokens.shape[0], -1, -1).clone()  # (B, N, N)

    def token_labels(self, tokens: Tensor) -> list[str]:
        tokens = _check_tokens(tokens.reshape(1, -1), self)[0]  # (1, N) checked, then (N,)
        return [LETTERS[t] for t in tokens.tolist()]


class PreviousTokenTask(_LetterSequenceTask):
    """Output the previous token: target ``i`` is token ``i - 1``; position 0 wraps around to ``N - 1``.

    The right pattern: query ``i`` attends to key ``(i - 1) mod N``, a line just below the diagonal
    (plus the top-right corner for the wrap-around).
    """

    name = "previous token"

    def _source(self) -> Tensor:
        return (torch.arange(self.seq_len) - 1) % self.seq_len  # (N,)


class ReverseTask(_LetterSequenceTask):
    """Output the sequence reversed: target ``i`` is token ``N - 1 - i``; an anti-diagonal pattern."""

    name = "reverse"

    def _source(self) -> Tensor:
        return torch.arange(self.seq_len - 1, -1, -1)  # (N,)


class LookupTask(Task):
    """Find the matching key: ``num_pairs`` pairs, then the same letters again as questions.

    Positions ``0 .. P-1`` hold pair tokens ``letter * num_digits + digit`` (label ``"C5"``: letter
    C stores digit 5), with ``P`` different letters; positions ``P .. 2P-1`` hold question tokens
    ``num_letters * num_digits + letter`` (label ``"C?"``), the same letters in a new order. A
    question's target is the digit stored with its letter; pairs have no target (:data:`IGNORE`).
    The right pattern: question ``P + j`` attends to the pair with its letter, which moves from one
    sequence to the next — it is found by content, not by position.
    """

    name = "lookup"

    def __init__(self, num_pairs: int = 4, num_letters: int = 8, num_digits: int = 8) -> None:
        self.num_pairs = check_positive_int("num_pairs", num_pairs)
        self.num_letters = check_positive_int("num_letters", num_letters)
        self.num_digits = check_positive_int("num_digits", num_digits)
        if num_pairs > num_letters:
            raise ValueError(f"num_pairs={num_pairs} needs as many different letters, but num_letters={num_letters}")
        if num_letters > len(LETTERS) or num_digits > 10:
            raise ValueError(f"num_letters must be at most {len(LETTERS)} and num_digits at most 10, "
                             f"got {num_letters} and {num_digits}")
        self.seq_len = 2 * num_pairs
        self.vocab_size = num_letters * num_digits + num_letters
        self.n_classes = num_digits

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        check_positive_int("batch", batch)
        P, D = self.num_pairs, self.num_digits
        letters = torch.rand(batch, self.num_letters, generator=generator).argsort(dim=-1)[:, :P]  # (B, P) distinct
        digits = torch.randint(0, D, (batch, P), generator=generator)  # (B, P)
        order = torch.rand(batch, P, generator=generator).argsort(dim=-1)  # (B, P): question j asks pair order[j]
        questions = letters.gather(1, order)  # (B, P)
        tokens = torch.cat([letters * D + digits, self.num_letters * D + questions], dim=1)  # (B, 2P)
        targets = torch.cat([torch.full((batch, P), IGNORE), digits.gather(1, order)], dim=1)  # (B, 2P)
        return tokens, targets

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        tokens = _check_tokens(tokens, self)
        P, D = self.num_pairs, self.num_digits
        pair_letters = tokens[:, :P] // D  # (B, P)
        question_letters = tokens[:, P:] - self.num_letters * D  # (B, P)
        if (tokens[:, :P] >= self.num_letters * D).any() or (question_letters < 0).any():
            raise ValueError("tokens do not follow the lookup layout: pair tokens first, then question tokens")
        match = (question_letters[:, :, None] == pair_letters[:, None, :]).float()  # (B, P questions, P pairs)
        ideal = torch.zeros(tokens.shape[0], self.seq_len, self.seq_len)  # (B, N, N)
        ideal[:, P:, :P] = match
        return ideal

    def question_letters(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N) -> (B, N)``: the letter (``0 .. num_letters-1``) each question asks for, ``-1`` at pairs."""
        tokens = _check_tokens(tokens, self)
        letters = tokens - self.num_letters * self.num_digits  # (B, N): questions' letters, negative at pairs
        return letters.masked_fill(letters < 0, -1)

    def token_labels(self, tokens: Tensor) -> list[str]:
        tokens = _check_tokens(tokens.reshape(1, -1), self)[0]  # (1, N) checked, then (N,)
        P, D = self.num_pairs, self.num_digits
        pairs = [f"{LETTERS[t // D].upper()}{t % D}" for t in tokens[:P].tolist()]
        questions = [f"{LETTERS[t - self.num_letters * D].upper()}?" for t in tokens[P:].tolist()]
        return pairs + questions


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

class TinyAttentionModel(nn.Module):
    """Token and position embeddings, ``num_layers`` :class:`Attention` layers, a linear read-out.

    ``tokens (B, N) -> logits (B, N, n_classes)``. Each layer is ``Attention(dim, dim, num_heads,
    qk_scale=None if scaled else 1.0)``; ``scaled=False`` leaves the scores undivided (lesson 02).
    The layers are joined by ``skip`` (lesson 06), with ``projected`` the layer's output projection:

    - ``"identity"``: ``h = h + projected`` (the usual residual);
    - ``"values"``: ``h = projected + v`` (what walkthrough 000's layer returns);
    - ``"none"``: ``h = projected``.

    ``position_scheme`` (lesson 10) says how the model learns where a token sits:

    - ``"learned"``: a trained vector per position, ``position (seq_len, dim)``, added to the tokens;
      longer sequences than ``seq_len`` are refused (there is no row for their positions);
    - ``"none"``: nothing; the model sees the tokens as a set;
    - ``"sinusoidal"``: :func:`attn_helpers.positions.sinusoidal_encoding` added to the tokens, any length;
    - ``"rope"``: :class:`attn_helpers.positions.RotaryAttention` layers rotate ``q`` and ``k``, any length.

    The position table is drawn for every scheme (and kept only for ``"learned"``), so models that
    differ only in ``position_scheme`` start from the same token embeddings, layers and read-out.
    """

    def __init__(self, vocab_size: int, n_classes: int, seq_len: int, *, dim: int = 32, num_heads: int = 2,
                 num_layers: int = 1, skip: str = "identity", scaled: bool = True,
                 position_scheme: str = "learned") -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("n_classes", n_classes), ("seq_len", seq_len),
                            ("dim", dim), ("num_heads", num_heads), ("num_layers", num_layers)):
            check_positive_int(name, value)
        if skip not in SKIP_KINDS:
            raise ValueError(f"skip must be one of {list(SKIP_KINDS)}, got {skip!r}")
        if position_scheme not in POSITION_SCHEMES:
            raise ValueError(f"position_scheme must be one of {list(POSITION_SCHEMES)}, got {position_scheme!r}")
        self.seq_len, self.skip, self.scaled = seq_len, skip, bool(scaled)
        self.position_scheme = position_scheme

        self.embed = nn.Embedding(vocab_size, dim)
        table = nn.Embedding(seq_len, dim)  # drawn for every scheme: the parameters after it start the same
        self.position = table if position_scheme == "learned" else None
        layer = RotaryAttention if position_scheme == "rope" else Attention
        self.layers = nn.ModuleList(
            layer(dim, dim, num_heads, qk_scale=None if scaled else 1.0) for _ in range(num_layers))
        self.readout = nn.Linear(dim, n_classes)

    @classmethod
    def for_task(cls, task: Task, config: "TrainConfig") -> "TinyAttentionModel":
        """The model ``config`` describes, sized for ``task``'s tokens, sequence length and classes."""
        return cls(task.vocab_size, task.n_classes, task.seq_len, dim=config.dim, num_heads=config.num_heads,
                   num_layers=config.num_layers, skip=config.skip, scaled=config.scaled,
                   position_scheme=config.position_scheme)

    def embed_with_positions(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N) -> h (B, N, dim)``: the token vectors plus the scheme's positions, if any."""
        h = self.embed(tokens)  # (B, N, dim)
        if self.position_scheme == "learned":
            h = h + self.position.weight[: tokens.shape[1]]  # (B, N, dim): rows 0..N-1 of the table
        elif self.position_scheme == "sinusoidal":
            h = h + sinusoidal_encoding(tokens.shape[1], h.shape[-1], dtype=h.dtype).to(h.device)  # (B, N, dim)
        return h  # "none" adds nothing; "rope" adds nothing here: its layers rotate q and k

    def forward(self, tokens: Tensor, *, return_weights: bool = False, return_intermediates: bool = False,
                keep_heads: Tensor | None = None):
        """``tokens (B, N) -> logits (B, N, n_classes)``.

        With ``return_weights`` also every layer's attention weights, ``(B, L, H, N, N)``; with
        ``return_intermediates`` instead a list with one dict per layer: that layer's
        :class:`Attention` intermediates (names and shapes in ``Attention.AXES``) plus ``"hidden"``,
        the hidden state ``(B, N, dim)`` after the layer and its skip connection.

        ``keep_heads (L, H)`` knocks heads out: each head's output ``heads (B, H, N, head_dim)`` is
        multiplied by its entry (0 = knocked out, 1 = kept) before the output projection, and the
        intermediates ``"heads"``, ``"merged"``, ``"projected"`` and ``"out"`` are those of the knocked-out layer.
        """
        if not isinstance(tokens, Tensor) or tokens.is_floating_point() or tokens.ndim != 2:
            raise TypeError(f"tokens must be an integer tensor (B, N), got "
                            f"{getattr(tokens, 'dtype', type(tokens).__name__)} {list(getattr(tokens, 'shape', []))}")
        if self.position_scheme == "learned" and tokens.shape[1] > self.seq_len:
            raise ValueError(f"tokens has N={tokens.shape[1]} positions but the model has {self.seq_len} "
                             f"position embeddings (shape {list(tokens.shape)})")
        h = self.embed_with_positions(tokens)  # (B, N, dim)
        keep = self._check_keep_heads(keep_heads, h.dtype)
        layers = []
        for index, layer in enumerate(self.layers):
            out, inter = layer(h, return_intermediates=True)  # (B, N, dim)
            if keep is not None:  # knock heads out: zero their outputs before the output projection
                heads = inter["heads"] * keep[index][None, :, None, None]  # (B, H, N, head_dim)
                merged = merge_heads(heads)  # (B, N, dim)
                projected = layer.proj(merged)  # (B, N, dim)
                out = projected + inter["skip"]  # (B, N, dim): walkthrough 000's skip through v
                inter = {**inter, "heads": heads, "merged": merged, "projected": projected, "out": out}
            if self.skip == "identity":
                h = h + inter["projected"]  # (B, N, dim)
            elif self.skip == "values":
                h = out  # projected + merged v, (B, N, dim)
            else:
                h = inter["projected"]  # (B, N, dim)
            layers.append({**inter, "hidden": h})
        logits = self.readout(h)  # (B, N, n_classes)
        if return_intermediates:
            return logits, layers
        if return_weights:
            return logits, torch.stack([inter["weights"] for inter in layers], dim=1)  # (B, L, H, N, N)
        return logits

    def _check_keep_heads(self, keep_heads: object, dtype: torch.dtype) -> Tensor | None:
        if keep_heads is None:
            return None
        shape = (len(self.layers), self.layers[0].num_heads)
        if not isinstance(keep_heads, Tensor) or tuple(keep_heads.shape) != shape:
            raise ValueError(f"keep_heads must be a tensor of shape (L, H) = {list(shape)}, got "
                             f"{list(keep_heads.shape) if isinstance(keep_heads, Tensor) else type(keep_heads).__name__}")
        return keep_heads.to(dtype)


# --------------------------------------------------------------------------------------------
# Measuring: how close is a learned pattern to the ideal one?
# --------------------------------------------------------------------------------------------

def pattern_match(weights: Tensor, ideal: Tensor) -> Tensor:
    """The attention weight that lands on the right key, averaged: ``1`` = the ideal pattern exactly.

    ``weights (B, *heads, N_q, N_k)`` (e.g. ``(B, L, H, N, N)``), ``ideal (B, N_q, N_k)`` one-hot rows
    (all-zero rows have no target and are left out) -> ``(*heads,)``: for each head, the mean over
    sequences and over the rows with a target of ``sum_k weights[..., q, k] * ideal[q, k]``.
    Uniform attention over ``N_k`` keys scores ``1 / N_k``.
    """
    if not isinstance(weights, Tensor) or not isinstance(ideal, Tensor):
        raise TypeError(f"weights and ideal must be tensors, got {type(weights).__name__} and {type(ideal).__name__}")
    if ideal.ndim != 3 or weights.ndim < 3 or weights.shape[0] != ideal.shape[0] \
            or weights.shape[-2:] != ideal.shape[-2:]:
        raise ValueError(f"weights must be (B, *heads, N_q, N_k) and ideal (B, N_q, N_k) with the same B, N_q, "
                         f"N_k; got weights {list(weights.shape)} and ideal {list(ideal.shape)}")
    extra = weights.ndim - 3  # number of head axes
    ideal = ideal.to(weights.dtype).reshape(ideal.shape[0], *([1] * extra), *ideal.shape[1:])  # (B, 1.., N_q, N_k)
    on_target = (weights * ideal).sum(dim=-1)  # (B, *heads, N_q)
    has_target = (ideal.sum(dim=-1) > 0).to(weights.dtype)  # (B, 1.., N_q)
    count = has_target.sum(dim=(0, -1)).clamp_min(1.0)  # (1..,)
    return (on_target * has_target).sum(dim=(0, -1)) / count  # (*heads,)


# --------------------------------------------------------------------------------------------
# Training with snapshots
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run besides the task; same config, same numbers.

    Model: ``dim``, ``num_heads``, ``num_layers``, ``skip`` (``"identity"``, ``"values"``, ``"none"``),
    ``scaled``, ``position_scheme`` (:data:`POSITION_SCHEMES`, lesson 10). Training: ``steps`` of Adam with
    learning rate ``lr`` on ``batch_size`` fresh sequences each; ``seed`` fixes the initial parameters and the training sequences. Snapshots
    every ``snapshot_every`` steps (and at the last step), measured on ``held_out`` sequences.
    """

    dim: int = 32
    num_heads: int = 2
    num_layers: int = 1
    skip: str = "identity"
    scaled: bool = True
    steps: int = 150
    batch_size: int = 32
    lr: float = 1e-2
    snapshot_every: int = 10
    held_out: int = 256
    seed: int = 0
    position_scheme: str = "learned"

    def __post_init__(self) -> None:
        for name in ("dim", "num_heads", "num_layers", "steps", "batch_size", "snapshot_every", "held_out"):
            check_positive_int(name, getattr(self, name))
        if self.dim % self.num_heads:
            raise ValueError(f"dim={self.dim} is not divisible by num_heads={self.num_heads}")
        if self.skip not in SKIP_KINDS:
            raise ValueError(f"skip must be one of {list(SKIP_KINDS)}, got {self.skip!r}")
        if self.position_scheme not in POSITION_SCHEMES:
            raise ValueError(f"position_scheme must be one of {list(POSITION_SCHEMES)}, "
                             f"got {self.position_scheme!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")

    def replace(self, **changes: object) -> "TrainConfig":
        """A copy with some fields changed, e.g. ``config.replace(num_heads=1)``."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line, e.g. ``1 layer, 2 heads of 16, scaled, skip=identity`` (plus ``, position_scheme=rope``
        when the positions are not the default learned table)."""
        layers = f"{self.num_layers} layer{'s' if self.num_layers > 1 else ''}"
        heads = f"{self.num_heads} head{'s' if self.num_heads > 1 else ''} of {self.dim // self.num_heads}"
        scheme = "" if self.position_scheme == "learned" else f", position_scheme={self.position_scheme}"
        return f"{layers}, {heads}, {'scaled' if self.scaled else 'not scaled'}, skip={self.skip}{scheme}"


@dataclass
class TrainingRun:
    """What one call of :func:`train` recorded. ``S`` snapshots at ``steps`` (0 and the last included).

    - ``train_loss (steps,)``: the loss of each training batch;
    - ``held_out_loss (S,)``, ``held_out_accuracy (S,)``: on the held-out sequences;
    - ``pattern_match (S, L, H)``: :func:`pattern_match` of every head on the held-out sequences;
    - ``probe_tokens (N,)``, ``probe_labels``, ``probe_ideal (N, N)``, ``probe_weights (S, L, H, N, N)``:
      one held-out sequence and every head's attention on it at each snapshot;
    - ``held_out_tokens (held_out, N)``, ``held_out_targets (held_out, N)``: the held-out sequences
      (the same for every run of the task; the probe is the first);
    - ``held_out_seen_in_training``: held-out sequences that also came up as training batches;
    - ``seconds``: wall-clock time of the training loop (differs between runs; print it apart).
    """

    task: Task
    config: TrainConfig
    steps: list[int]
    train_loss: Tensor
    held_out_loss: Tensor
    held_out_accuracy: Tensor
    pattern_match: Tensor
    probe_tokens: Tensor
    probe_labels: list[str]
    probe_ideal: Tensor
    probe_weights: Tensor
    held_out_tokens: Tensor
    held_out_targets: Tensor
    held_out_seen_in_training: int
    seconds: float
    model: TinyAttentionModel = field(repr=False)

    @property
    def final_accuracy(self) -> float:
        return float(self.held_out_accuracy[-1])

    @property
    def final_loss(self) -> float:
        return float(self.held_out_loss[-1])

    def snapshot(self, step: int) -> int:
        """The index of the snapshot taken at ``step``; a ``ValueError`` names the steps recorded."""
        if step not in self.steps:
            raise ValueError(f"no snapshot at step {step}: this run recorded steps {self.steps[0]}, "
                             f"{self.steps[1]}, ... {self.steps[-1]} (every {self.config.snapshot_every})")
        return self.steps.index(step)

    def steps_to(self, accuracy: float) -> int | None:
        """The first snapshot step whose held-out accuracy is at least ``accuracy``; ``None`` if never."""
        reached = (self.held_out_accuracy >= accuracy).nonzero()
        return self.steps[int(reached[0])] if len(reached) else None

    def best_head(self) -> tuple[int, int]:
        """``(layer, head)`` whose final pattern match is highest."""
        flat = int(self.pattern_match[-1].argmax())
        return divmod(flat, self.pattern_match.shape[-1])


class Adam:
    """Adam with PyTorch's defaults, written out: the update of ``torch.optim.Adam(params, lr)``.

    For each parameter ``p`` with gradient ``g``, at step ``t``: ``m = b1 m + (1 - b1) g``,
    ``v = b2 v + (1 - b2) g^2``, ``p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``.
    Written here because ``torch.optim`` loads PyTorch's compiler on first use, about two seconds
    of CPU that a seconds-long training run should not pay. ``zero_grad`` sets gradients to None.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("params must contain at least one tensor that requires grad")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.lr, self.betas, self.eps, self.t = float(lr), betas, float(eps), 0
        self.m = [torch.zeros_like(p) for p in self.params]  # running mean of the gradients
        self.v = [torch.zeros_like(p) for p in self.params]  # running mean of the squared gradients

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1  # steps taken so far
        b1, b2 = self.betas
        step_size = self.lr / (1 - b1 ** self.t)  # lr, and the correction for m starting at zero
        root_correction = math.sqrt(1 - b2 ** self.t)  # the same correction for the root of v
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)  # m: running mean of the gradient
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)  # v: running mean of the gradient squared
            root = v.sqrt() / root_correction  # the gradient's typical size
            p.addcdiv_(m, root.add_(self.eps), value=-step_size)  # p -= step_size * m / (root + eps)


def _snapshot_steps(steps: int, every: int) -> list[int]:
    marks = list(range(0, steps + 1, every))
    return marks if marks[-1] == steps else marks + [steps]


def train(task: Task, config: TrainConfig = TrainConfig(), *,
          progress: Callable[[int, int], None] | None = None) -> TrainingRun:
    """Train a :class:`TinyAttentionModel` on ``task`` from scratch and record snapshots.

    Each step draws ``config.batch_size`` new sequences and takes one Adam step on the
    cross-entropy of the positions with a target. At step 0, every ``config.snapshot_every``
    steps and at the last step, the model is measured on ``config.held_out`` held-out sequences
    (the same ones for every run of a task): loss, accuracy, :func:`pattern_match` of every head,
    and every head's weights on the first held-out sequence (the probe).

    ``progress(step, total)`` is called at every snapshot (for a progress bar). Deterministic:
    float64, one CPU thread (the previous thread count is restored), the global random state
    untouched. Returns a :class:`TrainingRun`.
    """
    if not isinstance(task, Task):
        raise TypeError(f"task must be an attn_helpers.training.Task, got {type(task).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    with one_thread():  # tiny tensors: one thread is faster, and the sums always run in one order
        return _train(task, config, progress)


def initial_model(task: Task, config: TrainConfig) -> TinyAttentionModel:
    """The model :func:`train` starts from: seeded with ``config.seed`` (the global random state is
    left alone), in float64. Two configs that differ only in ``num_heads``, ``scaled`` or ``skip``
    start from exactly the same parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return TinyAttentionModel.for_task(task, config).to(torch.float64)


def batch_generator(config: TrainConfig) -> torch.Generator:
    """The random generator :func:`train` draws its training batches from (seeded by ``config.seed``):
    ``task.sample(config.batch_size, batch_generator(config))`` gives its first batch, and so on."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    return torch.Generator().manual_seed(10_000 + config.seed)


def training_step(model: nn.Module, optimizer: Adam, task: Task, batches: torch.Generator,
                  batch_size: int) -> tuple[Tensor, float]:
    """One step of :func:`train`: draw ``batch_size`` fresh sequences of ``task`` with ``batches``,
    forward, loss, backward, one optimizer step. Returns the batch's tokens ``(batch, N)`` (train()
    counts the sequences it has seen) and the batch's loss."""
    tokens, targets = task.sample(batch_size, batches)  # (batch, N) each: fresh sequences
    logits = model(tokens)  # (batch, N, n_classes): forward
    loss = F.cross_entropy(logits.reshape(-1, task.n_classes),  # (batch*N, n_classes)
                           targets.reshape(-1), ignore_index=IGNORE)  # (batch*N,): positions without a target skipped
    optimizer.zero_grad()  # drop the previous step's gradients
    loss.backward()  # backward: the gradient of the loss for every parameter
    optimizer.step()  # move every parameter a little against its gradient (Adam)
    return tokens, loss.item()


def _train(task: Task, config: TrainConfig, progress: Callable[[int, int], None] | None) -> TrainingRun:
    dtype = torch.float64
    model = initial_model(task, config)
    optimizer = Adam(model.parameters(), lr=config.lr)
    batches = batch_generator(config)
    held_tokens, held_targets = task.sample(config.held_out, torch.Generator().manual_seed(HELD_OUT_SEED))
    held_ideal = task.ideal_attention(held_tokens).to(dtype)  # (held_out, N, N)
    held_set = {tuple(row) for row in held_tokens.tolist()}
    seen: set[tuple[int, ...]] = set()
    marks = _snapshot_steps(config.steps, config.snapshot_every)
    train_loss, held_loss, held_acc, matches, probe = [], [], [], [], []
    start = time.perf_counter()
    for step in range(config.steps + 1):
        if step in marks:
            model.eval()
            with torch.no_grad():
                logits, weights = model(held_tokens, return_weights=True)  # (B, N, C), (B, L, H, N, N)
                held_loss.append(F.cross_entropy(logits.reshape(-1, task.n_classes),  # (B*N, C)
                                                 held_targets.reshape(-1), ignore_index=IGNORE).item())  # (B*N,)
                scored = held_targets != IGNORE  # (B, N)
                held_acc.append((logits.argmax(dim=-1) == held_targets)[scored].to(dtype).mean().item())
                matches.append(pattern_match(weights, held_ideal))  # (L, H)
                probe.append(weights[0])  # (L, H, N, N)
            model.train()
            if progress is not None:
                progress(step, config.steps)
        if step == config.steps:
            break
        tokens, loss = training_step(model, optimizer, task, batches, config.batch_size)
        seen.update(tuple(row) for row in tokens.tolist())
        train_loss.append(loss)
    seconds = time.perf_counter() - start
    model.eval()
    return TrainingRun(
        task=task, config=config, steps=marks,
        train_loss=torch.tensor(train_loss, dtype=dtype),
        held_out_loss=torch.tensor(held_loss, dtype=dtype),
        held_out_accuracy=torch.tensor(held_acc, dtype=dtype),
        pattern_match=torch.stack(matches),  # (S, L, H)
        probe_tokens=held_tokens[0], probe_labels=task.token_labels(held_tokens[0]),
        probe_ideal=held_ideal[0], probe_weights=torch.stack(probe),  # (N, N), (S, L, H, N, N)
        held_out_tokens=held_tokens, held_out_targets=held_targets,
        held_out_seen_in_training=len(held_set & seen), seconds=seconds, model=model,
    )


def train_many(jobs: Mapping[str, tuple[Task, TrainConfig]], *,
               progress: Callable[[str, int, int], None] | None = None) -> dict[str, TrainingRun]:
    """:func:`train` each ``name -> (task, config)`` in order; ``progress(name, step, total)`` at every snapshot."""
    runs = {}
    for name, (task, config) in jobs.items():
        report = None if progress is None else (lambda step, total, name=name: progress(name, step, total))
        runs[name] = train(task, config, progress=report)
    return runs


# --------------------------------------------------------------------------------------------
# Printing (strings; the numbers are rounded so that every run prints the same)
# --------------------------------------------------------------------------------------------

def _steps_text(step: int | None) -> str:
    return "never" if step is None else str(step)


def results_table(runs: Mapping[str, TrainingRun], *, accuracies: Sequence[float] = (0.9, 0.99)) -> str:
    """One line per run: held-out accuracy and loss at the end, the first snapshot step with at
    least each of ``accuracies`` held-out accuracy (``never`` if not within the run), and the final
    pattern match of every head (``H1``: head 1; ``L0H1``: layer 0, head 1, when there are several layers)."""
    width = max([len(name) for name in runs] + [3])
    reach = "".join(f"  {f'to {a:.0%}':>7}" for a in accuracies)
    lines = [f"{'run':<{width}}  {'accuracy':>8}  {'loss':>6}{reach}  pattern match per head (end; L0H1 = layer 0, head 1)"]
    for name, run in runs.items():
        L, H = run.pattern_match.shape[1:]
        heads = ", ".join(f"{f'L{l}' if L > 1 else ''}H{h}: {run.pattern_match[-1, l, h].item():.2f}"
                          for l in range(L) for h in range(H))
        steps = "".join(f"  {_steps_text(run.steps_to(a)):>7}" for a in accuracies)
        lines.append(f"{name:<{width}}  {run.final_accuracy:>8.3f}  {run.final_loss:>6.3f}{steps}  {heads}")
    return "\n".join(lines)


def timing_table(runs: Mapping[str, TrainingRun]) -> str:
    """Wall-clock training time of each run and in total (differs from run to run: print it apart)."""
    width = max([len(name) for name in runs] + [5])
    lines = [f"{name:<{width}}  {run.config.steps:>4} steps  {run.seconds:5.1f} s  "
             f"({1000 * run.seconds / run.config.steps:.1f} ms per step)" for name, run in runs.items()]
    lines.append(f"{'total':<{width}}  {sum(r.config.steps for r in runs.values()):>4} steps  "
                 f"{sum(r.seconds for r in runs.values()):5.1f} s")
    return "\n".join(lines)


def pattern_match_table(run: TrainingRun, *, every: int | None = None) -> str:
    """Held-out accuracy and every head's pattern match over training, one line per snapshot
    (every ``every`` steps; default: the run's snapshots)."""
    L, H = run.pattern_match.shape[1:]
    names = [f"{f'L{l} ' if L > 1 else ''}head {h}" for l in range(L) for h in range(H)]
    lines = [f"{'step':>5}  {'accuracy':>8}  " + "  ".join(f"{n:>7}" for n in names)]
    for i, step in enumerate(run.steps):
        if every is not None and step % every and step != run.steps[-1]:
            continue
        values = "  ".join(f"{v:>7.2f}" for v in run.pattern_match[i].reshape(-1).tolist())  # (L*H,)
        lines.append(f"{step:>5}  {run.held_out_accuracy[i].item():>8.3f}  {values}")
    return "\n".join(lines)


def steps_table(runs: Mapping[str, Mapping[int, TrainingRun]], *, accuracies: Sequence[float] = (0.9, 0.99)) -> str:
    """Steps to each of ``accuracies`` held-out accuracy, per run and seed: ``runs[name][seed]``.

    One line per name, one column per seed, cells like ``60/90`` (``never``: not within the run's steps)."""
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    if not seeds:
        raise ValueError("runs must map at least one name to at least one seed's TrainingRun, got none")
    width = max([len(name) for name in runs] + [3])
    cells = {name: {seed: "/".join(_steps_text(run.steps_to(a)) for a in accuracies) for seed, run in by_seed.items()}
             for name, by_seed in runs.items()}
    column = max([len(c) for row in cells.values() for c in row.values()] + [len(f"seed {seeds[-1]}")])
    lines = [f"{'run':<{width}}  " + "  ".join(f"{f'seed {seed}':>{column}}" for seed in seeds)]
    for name, row in cells.items():
        lines.append(f"{name:<{width}}  " + "  ".join(f"{row.get(seed, '-'):>{column}}" for seed in seeds))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Knocking heads out: which head does which lookups?
# --------------------------------------------------------------------------------------------

@dataclass
class HeadKnockout:
    """What :func:`head_knockout` measured on one model. ``K = 1 + L*H`` rows: nothing knocked out,
    then each head alone knocked out (``labels``: ``"nothing"``, ``"head 0"``, ... or ``"layer 0 head 1"``).

    - ``accuracy (K,)``: held-out accuracy over all questions;
    - ``by_letter (K, num_letters)``: held-out accuracy over the questions that ask for each letter;
    - ``questions (num_letters,)``: how many held-out questions ask for each letter.
    """

    labels: list[str]
    accuracy: Tensor
    by_letter: Tensor
    questions: Tensor

    def cost(self) -> Tensor:
        """``(K - 1, num_letters)``: how much accuracy knocking out each head costs on each letter."""
        return self.by_letter[:1] - self.by_letter[1:]


def head_knockout(model: TinyAttentionModel, task: LookupTask, *, held_out: int = 256) -> HeadKnockout:
    """Held-out accuracy of ``model`` on ``task`` with each head knocked out in turn (its output zeroed
    before the output projection: ``model(tokens, keep_heads=...)``), overall and per letter asked for.

    The held-out sequences are those :func:`train` measures on. Runs without gradients on one CPU
    thread, so the same model gives the same numbers on every machine."""
    if not isinstance(model, TinyAttentionModel):
        raise TypeError(f"model must be a TinyAttentionModel, got {type(model).__name__}")
    if not isinstance(task, LookupTask):
        raise TypeError(f"task must be a LookupTask (its questions ask for letters), got {type(task).__name__}")
    check_positive_int("held_out", held_out)
    L, H = len(model.layers), model.layers[0].num_heads
    tokens, targets = task.sample(held_out, torch.Generator().manual_seed(HELD_OUT_SEED))  # (B, N) each
    letters = task.question_letters(tokens)  # (B, N): -1 at the pairs
    scored = targets != IGNORE  # (B, N)
    labels, masks = ["nothing"], [torch.ones(L, H)]
    for layer in range(L):
        for head in range(H):
            keep = torch.ones(L, H)  # (L, H)
            keep[layer, head] = 0.0
            labels.append(f"layer {layer} head {head}" if L > 1 else f"head {head}")
            masks.append(keep)
    questions = torch.stack([(letters == c).sum() for c in range(task.num_letters)])  # (num_letters,)
    accuracy, by_letter = [], []
    with torch.no_grad(), one_thread():
        for keep in masks:
            right = (model(tokens, keep_heads=keep).argmax(dim=-1) == targets).to(torch.float64)  # (B, N)
            accuracy.append(right[scored].mean())
            by_letter.append(torch.stack([right[letters == c].sum() for c in range(task.num_letters)])
                             / questions.clamp_min(1))  # (num_letters,)
    return HeadKnockout(labels, torch.stack(accuracy), torch.stack(by_letter), questions)


def _check_knockouts(results: object) -> None:
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty mapping, e.g. seed -> HeadKnockout")
    for key, result in results.items():
        if not isinstance(result, HeadKnockout):
            raise TypeError(f"results[{key!r}] must be a HeadKnockout (from head_knockout), got {type(result).__name__}")


def knockout_table(results: Mapping[object, HeadKnockout], *, key_name: str = "seed") -> str:
    """:func:`head_knockout`'s accuracies as text: per result (e.g. per seed) one line with nothing
    knocked out and one per head knocked out; columns: all questions, then each letter."""
    _check_knockouts(results)
    first = next(iter(results.values()))
    letters = [LETTERS[c].upper() for c in range(first.by_letter.shape[1])]
    label = max([len(text) for result in results.values() for text in result.labels] + [len("knocked out")])
    key = max([len(str(k)) for k in results] + [len(key_name)])
    lines = [f"{key_name:>{key}}  {'knocked out':<{label}}  {'all':>5}  " + "  ".join(f"{c:>4}" for c in letters)]
    for name, result in results.items():
        for i, text in enumerate(result.labels):
            values = "  ".join(f"{v:4.2f}" for v in result.by_letter[i].tolist())
            lines.append(f"{str(name) if i == 0 else '':>{key}}  {text:<{label}}  {result.accuracy[i].item():5.3f}  {values}")
    return "\n".join(lines)


def knockout_summary(results: Mapping[object, HeadKnockout], *, key_name: str = "seed", small: float = 0.1,
                     large: float = 0.3) -> str:
    """Per result: the accuracy with each head knocked out; the letters *one head answers alone*
    (knocking that head out costs at least ``large``, knocking out any other head less than ``small``);
    and how many letters *need every head* (knocking out any one head costs at least ``small``)."""
    _check_knockouts(results)
    key = max([len(str(k)) for k in results] + [len(key_name)])
    first = next(iter(results.values()))
    heads = first.labels[1:]
    head_cols = [f"without {h}" for h in heads]
    lines = [f"{key_name:>{key}}  " + "  ".join(head_cols) + "  every head needed  one head answers alone"]
    for name, result in results.items():
        cost = result.cost()  # (K-1, letters)
        alone = []
        for c in range(cost.shape[1]):
            big = (cost[:, c] >= large).nonzero().flatten().tolist()
            others_small = [h for h in big if all(cost[o, c] < small for o in range(cost.shape[0]) if o != h)]
            alone += [f"{LETTERS[c].upper()} ({heads[h]})" for h in others_small]
        needed = int((cost >= small).all(dim=0).sum())
        accs = "  ".join(f"{result.accuracy[i + 1].item():>{len(col)}.3f}" for i, col in enumerate(head_cols))
        lines.append(f"{str(name):>{key}}  {accs}  {f'{needed} of {cost.shape[1]}':>17}  "
                     + (", ".join(alone) if alone else "none"))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Lesson 10: accuracy at any length, and what an order-blind model can reach
# --------------------------------------------------------------------------------------------

class NoWrapPreviousTokenTask(PreviousTokenTask):
    """Lesson 08's previous-token task without the wrap-around: position ``i >= 1`` outputs token
    ``i - 1``; position 0 has nothing to its left and no target (:data:`IGNORE`).

    Every target is then one step to the left at every sequence length, so a model trained at one
    length can be tested at another on the same rule. Tokens ``(B, N)``, targets ``(B, N)``.
    """

    name = "previous token, no wrap-around"

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        tokens, targets = super().sample(batch, generator)  # (B, N) each
        targets = targets.clone()
        targets[:, 0] = IGNORE  # nothing to the left of the first token
        return tokens, targets

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        ideal = super().ideal_attention(tokens)  # (B, N, N)
        ideal[:, 0] = 0.0  # the first row has no target
        return ideal


def _task_at_length(task: Task, seq_len: int) -> Task:
    if not isinstance(task, PreviousTokenTask):
        raise TypeError(f"only previous-token tasks can be remade at another length, got {type(task).__name__}")
    return type(task)(seq_len=seq_len, vocab_size=task.vocab_size)


def held_out_accuracy(model: TinyAttentionModel, task: Task, *, held_out: int = 256) -> float:
    """Accuracy of ``model`` on ``held_out`` sequences of ``task`` (the held-out sequences :func:`train`
    uses for a task of that length), over the positions with a target. ``model`` maps tokens
    ``(B, N) -> logits (B, N, C)``; runs without gradients, on one CPU thread."""
    tokens, targets = task.sample(held_out, torch.Generator().manual_seed(HELD_OUT_SEED))  # (B, N) each
    with torch.no_grad(), one_thread():  # as train() runs: one order of every sum on any machine
        logits = model(tokens)  # (B, N, C)
    scored = targets != IGNORE  # (B, N)
    return float((logits.argmax(dim=-1) == targets)[scored].to(torch.float64).mean())


def order_blind_accuracy(tokens: Tensor, targets: Tensor) -> float:
    """The expected accuracy of the best guess that knows each token and the *set* of the others, but
    not their order, on a previous-token task: ``tokens (B, N)``, ``targets (B, N)`` -> a number.

    Without positions, the output at position ``i`` can depend only on token ``i`` and on which
    tokens the sequence holds. The token to the left is then equally likely to be any of the other
    ``N - 1``; the best guess is the commonest among them, right with probability
    ``(its count) / (N - 1)``. Averaged over the positions that have a target.
    """
    if not isinstance(tokens, Tensor) or not isinstance(targets, Tensor) or tokens.shape != targets.shape \
            or tokens.ndim != 2:
        raise ValueError(f"tokens and targets must be (B, N) tensors of the same shape, got "
                         f"{getattr(tokens, 'shape', None)} and {getattr(targets, 'shape', None)}")
    n = tokens.shape[1]
    counts = torch.zeros(tokens.shape[0], int(tokens.max()) + 1, dtype=torch.int64)  # (B, vocab)
    counts.scatter_add_(1, tokens, torch.ones_like(tokens))  # how often each token occurs in each sequence
    others = counts[:, None, :].repeat(1, n, 1)  # (B, N, vocab): the counts ...
    others.scatter_add_(2, tokens[..., None], -torch.ones_like(tokens[..., None]))  # ... without the token at that position itself
    best = others.max(dim=-1).values.to(torch.float64) / (n - 1)  # (B, N)
    return float(best[targets != IGNORE].mean())


def accuracy_by_length(runs: Mapping[str, TrainingRun], lengths: Sequence[int], *,
                       held_out: int = 256) -> dict[str, dict[int, float | None]]:
    """Held-out accuracy of each run's model on its task remade at each of ``lengths``.

    ``{name: {length: accuracy}}``; ``None`` where the model has no position vector for the longer
    sequences (a learned table of ``seq_len`` rows)."""
    table: dict[str, dict[int, float | None]] = {}
    for name, run in runs.items():
        model = run.model
        table[name] = {n: None if model.position_scheme == "learned" and n > model.seq_len
                       else held_out_accuracy(model, _task_at_length(run.task, n), held_out=held_out)
                       for n in lengths}
    return table


def accuracy_table(results: Mapping[str, Mapping[int, float | None]], *, digits: int = 2,
                   reference: Mapping[int, float] | None = None, reference_name: str = "") -> str:
    """:func:`accuracy_by_length`'s results as text: one row per run, one column per length
    (``no row`` where the model has no position vector); optionally a ``reference`` row."""
    lengths = list(next(iter(results.values())))
    rows = dict(results)
    if reference is not None:
        rows[reference_name or "reference"] = dict(reference)
    width = max(len(name) for name in rows)
    lines = [f"{'N =':<{width}}  " + "  ".join(f"{n:>6}" for n in lengths)]
    for name, values in rows.items():
        cells = ["no row" if values[n] is None else f"{values[n]:.{digits}f}" for n in lengths]
        lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>6}" for c in cells))
    return "\n".join(lines)


def attention_by_offset(model: TinyAttentionModel, task: Task, *, trained_len: int,
                        held_out: int = 256) -> dict[str, float]:
    """Where ``model``'s attention goes on ``task``'s held-out sequences, averaged over layers, heads and
    the query rows with a target: ``{"right key": ..., "other offsets seen in training": ...,
    "offsets never seen in training": ...}`` (the three add up to 1).

    An offset ``|i - j|`` is *seen* when it is below ``trained_len``, the length the model was trained at.
    Runs without gradients, on one CPU thread.
    """
    tokens, _ = task.sample(held_out, torch.Generator().manual_seed(HELD_OUT_SEED))  # (B, N)
    with torch.no_grad(), one_thread():  # as train() runs: one order of every sum on any machine
        _, weights = model(tokens, return_weights=True)  # (B, L, H, N, N)
    weights = weights.to(torch.float64).mean(dim=(1, 2))  # (B, N, N): averaged over layers and heads
    ideal = task.ideal_attention(tokens).to(torch.float64)  # (B, N, N)
    n = tokens.shape[1]
    offset = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()  # (N, N)
    unseen = (offset >= trained_len).to(torch.float64)  # (N, N)
    rows = ideal.sum(dim=-1) > 0  # (B, N): the query rows with a target
    right = float((weights * ideal).sum(dim=-1)[rows].mean())
    never = float((weights * unseen).sum(dim=-1)[rows].mean())
    return {"right key": right, "other offsets seen in training": 1.0 - right - never,
            "offsets never seen in training": never}
