"""Lesson 08: training the tiny model, the config, Adam written out, one step and the loop that keeps snapshots;
float64, one CPU thread, seeded, the global random state untouched.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core.arguments import check_heads, check_positive_int
from .tasks import IGNORE, Task, held_out_sequences, pattern_match
from .seeded import one_thread
from .tiny_model import POSITION_SCHEMES, TinyAttentionModel
from .wiring import check_wiring

__all__ = ["TrainConfig", "TrainingRun", "Measure", "Adam", "initial_model", "batch_generator", "training_step", "train",
           "train_many"]


@dataclass(frozen=True)
class TrainConfig:
    """Lesson 08: everything that decides a run besides the task. Model: ``dim``, ``num_heads``, ``num_layers``,
    ``wiring``, ``scaled``, ``position_scheme``, ``causal``; training: ``steps`` of Adam at ``lr`` on ``batch_size``
    fresh sequences, ``seed``; snapshots every ``snapshot_every`` steps on ``held_out`` sequences."""

    dim: int = 32
    num_heads: int = 2
    num_layers: int = 1
    wiring: str = "identity"
    scaled: bool = True
    steps: int = 150
    batch_size: int = 32
    lr: float = 1e-2
    snapshot_every: int = 10
    held_out: int = 256
    seed: int = 0
    position_scheme: str = "learned"
    causal: bool = False

    def __post_init__(self) -> None:
        for name in ("dim", "num_heads", "num_layers", "steps", "batch_size", "snapshot_every", "held_out"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.dim, self.num_heads, "dim")
        check_wiring(self.wiring, "wiring")
        if self.position_scheme not in POSITION_SCHEMES:
            raise ValueError(f"position_scheme must be one of {list(POSITION_SCHEMES)}, "
                             f"got {self.position_scheme!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")

    def replace(self, **changes: object) -> "TrainConfig":
        """A copy with some fields changed, e.g. ``config.replace(num_heads=1)``."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line, e.g. ``1 layer, 2 heads of 16, scaled, wiring=identity`` (plus ``, position_scheme=rope``
        when the positions are not the default learned table)."""
        layers = f"{self.num_layers} layer{'s' if self.num_layers > 1 else ''}"
        heads = f"{self.num_heads} head{'s' if self.num_heads > 1 else ''} of {self.dim // self.num_heads}"
        scheme = "" if self.position_scheme == "learned" else f", position_scheme={self.position_scheme}"
        causal = ", causal" if self.causal else ""
        return f"{layers}, {heads}, {'scaled' if self.scaled else 'not scaled'}, wiring={self.wiring}{scheme}{causal}"


@dataclass
class TrainingRun:
    """Lesson 08: what :func:`train` recorded at ``S`` snapshots: ``train_loss (steps,)``, ``held_out_loss``,
    ``held_out_accuracy (S,)``, ``pattern_match (S, L, H)``, the probe (``probe_tokens (N,)``, ``probe_labels``,
    ``probe_ideal (N, N)``, ``probe_weights (S, L, H, N, N)``), the held-out sequences, ``seconds`` (print it apart)
    and ``measured`` (``{name: (S, ...)}``)."""

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
    measured: dict[str, Tensor] = field(default_factory=dict, repr=False)

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
    """Lesson 08: ``torch.optim.Adam(params, lr)`` written out (``torch.optim`` costs seconds on first use):
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, ``p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``."""

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


Measure = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]  # (tokens, targets, logits, weights) -> a tensor


def train(task: Task, config: TrainConfig = TrainConfig(), *,
          progress: Callable[[int, int], None] | None = None,
          measures: Mapping[str, Measure] | None = None) -> TrainingRun:
    """Lesson 08: train a :class:`TinyAttentionModel` on ``task`` from scratch, one Adam step per fresh batch, measured
    at every snapshot on the held-out sequences. ``measures`` (``{name: fn(tokens, targets, logits, weights)}``) adds
    measurements, ``progress(step, total)`` is called at each snapshot. Returns a :class:`TrainingRun`."""
    if not isinstance(task, Task):
        raise TypeError(f"task must be an attn_helpers.lab.Task, got {type(task).__name__}")
    measures = dict(measures or {})
    with one_thread():  # tiny tensors: one thread is faster, and the sums always run in one order
        dtype = torch.float64
        batches = batch_generator(config)  # first: it checks config
        model = initial_model(task, config)
        optimizer = Adam(model.parameters(), lr=config.lr)
        held_tokens, held_targets = held_out_sequences(task, config.held_out)  # (held_out, N) each
        held_ideal = task.ideal_attention(held_tokens).to(dtype)  # (held_out, N, N)
        held_set = {tuple(row) for row in held_tokens.tolist()}
        seen: set[tuple[int, ...]] = set()
        marks = list(range(0, config.steps + 1, config.snapshot_every))  # the snapshot steps, the last one included
        marks += [] if marks[-1] == config.steps else [config.steps]
        train_loss, held_loss, held_acc, matches, probe = [], [], [], [], []
        measured: dict[str, list[Tensor]] = {name: [] for name in measures}
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
                    for name, measure in measures.items():
                        measured[name].append(measure(held_tokens, held_targets, logits, weights))
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
        measured={name: torch.stack(values) for name, values in measured.items()},
    )


def initial_model(task: Task, config: TrainConfig) -> TinyAttentionModel:
    """Lessons 08 and 14: the model :func:`train` starts from: :meth:`TinyAttentionModel.for_task` (seeded with
    ``config.seed``, the global random state left alone) in float64. Two configs that differ only in ``num_heads``,
    ``scaled`` or ``wiring`` start from exactly the same parameters."""
    return TinyAttentionModel.for_task(task, config).to(torch.float64)


def batch_generator(config: TrainConfig) -> torch.Generator:
    """Lesson 08: the random generator :func:`train` draws its training batches from (seeded by ``config.seed``):
    ``task.sample(config.batch_size, batch_generator(config))`` gives its first batch, and so on."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    return torch.Generator().manual_seed(10_000 + config.seed)


def training_step(model: nn.Module, optimizer: Adam, task: Task, batches: torch.Generator,
                  batch_size: int) -> tuple[Tensor, float]:
    """Lesson 08: one step of :func:`train`: draw ``batch_size`` fresh sequences of ``task`` with ``batches``,
    forward, loss, backward, one optimizer step. Returns the batch's tokens ``(batch, N)`` (train() counts the
    sequences it has seen) and the batch's loss."""
    tokens, targets = task.sample(batch_size, batches)  # (batch, N) each: fresh sequences
    logits = model(tokens)  # (batch, N, n_classes): forward
    loss = F.cross_entropy(logits.reshape(-1, task.n_classes),  # (batch*N, n_classes)
                           targets.reshape(-1), ignore_index=IGNORE)  # (batch*N,): positions without a target skipped
    optimizer.zero_grad()  # drop the previous step's gradients
    loss.backward()  # backward: the gradient of the loss for every parameter
    optimizer.step()  # move every parameter a little against its gradient (Adam)
    return tokens, loss.item()


def train_many(jobs: Mapping[str, tuple[Task, TrainConfig]], *,
               progress: Callable[[str, int, int], None] | None = None,
               measures: Mapping[str, Measure] | None = None) -> dict[str, TrainingRun]:
    """Lessons 08, 10, 12 and 14: :func:`train` each ``name -> (task, config)`` in order (each with ``measures``);
    ``progress(name, step, total)`` at every snapshot."""
    runs = {}
    for name, (task, config) in jobs.items():
        report = None if progress is None else (lambda step, total, name=name: progress(name, step, total))
        runs[name] = train(task, config, progress=report, measures=measures)
    return runs
