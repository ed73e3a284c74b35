"""Lesson 14: the induction task, a two-layer causal model trained on it, and the measurements that find its
circuit (a previous-token head, an induction head) and break it. Shapes: ``B`` batch, ``N`` tokens, ``L`` layers,
``H`` heads, ``S`` snapshots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core import causal_mask, check_positive_int, check_token_ids
from .tasks import IGNORE, Task, pattern_match
from .seeded import one_thread
from .tiny_model import TinyAttentionModel
from .training import TrainConfig, TrainingRun, train

__all__ = ["InductionTask", "INDUCTION_CONFIG", "induction_task", "repeat_spans", "repeated_part",
           "previous_token_pattern", "induction_pattern", "attention_weights", "previous_token_scores",
           "induction_scores", "repeated_loss", "layer_weights", "previous_token_measure", "INDUCTION_MEASURES", "train_induction_model", "loss_drop_step",
           "Circuit", "find_circuit"]


class InductionTask(Task):
    """Lesson 14: ``seq_len`` uniform random tokens holding one segment (``min_repeat .. max_repeat`` tokens) twice;
    inside the second copy the next token is the target (:func:`repeated_part`), elsewhere :data:`IGNORE`. The tokens
    around the copies differ, so :func:`repeat_spans` finds them again; the ideal pattern is :func:`induction_pattern`."""

    name = "induction"

    def __init__(self, seq_len: int = 32, vocab_size: int = 32, min_repeat: int = 6, max_repeat: int = 12) -> None:
        for name, value in (("seq_len", seq_len), ("vocab_size", vocab_size), ("min_repeat", min_repeat),
                            ("max_repeat", max_repeat)):
            check_positive_int(name, value)
        if not 2 <= min_repeat <= max_repeat or 2 * max_repeat > seq_len or vocab_size < 2:
            raise ValueError(f"need 2 <= min_repeat <= max_repeat, 2 * max_repeat <= seq_len and vocab_size >= 2; "
                             f"got min_repeat={min_repeat}, max_repeat={max_repeat}, seq_len={seq_len}, "
                             f"vocab_size={vocab_size}")
        self.seq_len, self.vocab_size, self.n_classes = seq_len, vocab_size, vocab_size
        self.min_repeat, self.max_repeat = min_repeat, max_repeat

    def sample(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        check_positive_int("batch", batch)
        N, V = self.seq_len, self.vocab_size
        tokens = torch.randint(0, V, (batch, N), generator=generator)  # (B, N)
        length = torch.randint(self.min_repeat, self.max_repeat + 1, (batch,), generator=generator)  # (B,)
        u = torch.rand(batch, 2, generator=generator, dtype=torch.float64)  # (B, 2)
        first = (u[:, 0] * (N - 2 * length + 1)).long()  # (B,): room for both copies after it
        second = first + length + (u[:, 1] * (N - first - 2 * length + 1)).long()  # (B,): after the first copy
        position = torch.arange(N)  # (N,)
        offset = position[None, :] - second[:, None]  # (B, N): place inside the second copy
        in_second = (offset >= 0) & (offset < length[:, None])  # (B, N)
        source = torch.where(in_second, first[:, None] + offset, position[None, :])  # (B, N): where each token comes from
        tokens = tokens.gather(1, source)  # (B, N): the second copy repeats the first
        rows = torch.arange(batch)
        for before, after, ok in ((first - 1, second - 1, first > 0),  # the tokens just before the copies ...
                                  (second + length, first + length, second + length < N)):  # ... and just after
            b, a = before.clamp(0, N - 1), after.clamp(0, N - 1)
            same = ok & (tokens[rows, b] == tokens[rows, a])  # (B,)
            tokens[rows[same], b[same]] = (tokens[rows[same], b[same]] + 1) % V  # made to differ (a token outside the copies)
        scored = (offset >= 0) & (offset < length[:, None] - 1)  # (B, N): the second copy but its last token
        nxt = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)  # (B, N): the next token (the last row never scored)
        return tokens, torch.where(scored, nxt, IGNORE)  # (B, N)

    def ideal_attention(self, tokens: Tensor) -> Tensor:
        return induction_pattern(tokens)

    def token_labels(self, tokens: Tensor) -> list[str]:
        return [str(t) for t in tokens.reshape(-1).tolist()]


INDUCTION_CONFIG = TrainConfig(dim=32, num_heads=2, num_layers=2, steps=320, batch_size=32, lr=1e-2,
                               snapshot_every=20, held_out=128, seed=0, position_scheme="rope", causal=True)


def induction_task(num_sequences: int, *, seed: int, task: InductionTask | None = None) -> Tensor:
    """Lesson 14: ``num_sequences`` sequences of the lesson's task, ``(num_sequences, N)`` int64, drawn with a
    generator seeded by ``seed`` (the global random state is left alone)."""
    task = InductionTask() if task is None else task
    return task.sample(check_positive_int("num_sequences", num_sequences), torch.Generator().manual_seed(seed))[0]


def repeat_spans(tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Lesson 14: where each sequence repeats itself longest: ``tokens (B, N)`` -> ``first (B,)``, ``second (B,)``,
    ``length (B,)``, with ``tokens[b, first:first+length] == tokens[b, second:second+length]``, ``first < second``
    (the earliest such pair when several runs are equally long)."""
    tokens = check_token_ids("tokens", tokens)
    B, N = tokens.shape
    best = torch.zeros(B, dtype=torch.long)
    first, second = torch.zeros(B, dtype=torch.long), torch.zeros(B, dtype=torch.long)
    for d in range(1, N):  # d = second - first
        same = (tokens[:, d:] == tokens[:, :-d]).long()  # (B, N-d): token j+d equals token j
        count = same.cumsum(dim=1)  # (B, N-d)
        reset = torch.cummax(count * (1 - same), dim=1).values  # (B, N-d): the count at the last mismatch
        run = count - reset  # (B, N-d): length of the matching run ending at j
        longest, end = run.max(dim=1)  # (B,) each
        better = longest > best
        best = torch.where(better, longest, best)
        first = torch.where(better, end - longest + 1, first)
        second = torch.where(better, end - longest + 1 + d, second)
    return first, second, best


def repeated_part(tokens: Tensor) -> Tensor:
    """Lesson 14: ``tokens (B, N) -> (B, N)`` bool: the positions whose next token the earlier copy tells, i.e. the
    second copy but its last token (:func:`repeat_spans`)."""
    _, second, length = repeat_spans(tokens)
    offset = torch.arange(tokens.shape[1])[None, :] - second[:, None]  # (B, N)
    return (offset >= 0) & (offset < length[:, None] - 1)


def previous_token_pattern(tokens: Tensor) -> Tensor:
    """Lessons 08 and 14: ``tokens (B, N) -> (B, N, N)`` float32: query ``i`` on key ``i - 1`` (row 0 is empty)."""
    B, N = check_token_ids("tokens", tokens).shape
    return torch.ones(N - 1).diag(-1).expand(B, N, N).clone()  # (B, N, N): ones just below the diagonal


def induction_pattern(tokens: Tensor) -> Tensor:
    """Lesson 14: ``tokens (B, N) -> (B, N, N)`` float32: query ``i`` on every key ``j + 1`` whose key ``j < i`` holds
    the same token as ``i`` (the token after an earlier copy); rows of first occurrences are empty."""
    tokens = check_token_ids("tokens", tokens)
    N = tokens.shape[1]
    same = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(N, N, dtype=torch.bool).tril(-1)  # (B, N, N): j < i
    return same.roll(1, dims=-1).float()  # (B, N, N): key j+1 for every earlier copy j (key N-1 is never j < i)


def attention_weights(model: TinyAttentionModel, tokens: Tensor, **options) -> Tensor:
    """Lesson 14: every head's weights, ``(B, L, H, N, N)``, without gradients on one thread (``options``:
    ``keep_heads``)."""
    with torch.no_grad(), one_thread():
        return model(check_token_ids("tokens", tokens), return_weights=True, **options)[1]


def previous_token_scores(model: TinyAttentionModel, tokens: Tensor) -> Tensor:
    """Lesson 14: ``(L, H)``: each head's weight on the previous token, averaged over queries ``1 .. N-1`` and
    sequences."""
    return pattern_match(attention_weights(model, tokens), previous_token_pattern(tokens).double())


def induction_scores(model: TinyAttentionModel, tokens: Tensor) -> Tensor:
    """Lesson 14: ``(L, H)``: each head's weight on the tokens after earlier copies of its query's token
    (:func:`induction_pattern`), averaged over the queries that have an earlier copy and over sequences."""
    return pattern_match(attention_weights(model, tokens), induction_pattern(tokens).double())


def repeated_loss(model: TinyAttentionModel, tokens: Tensor, knocked_out: Sequence[tuple[int, int]] = ()) -> float:
    """Lesson 14: the next-token loss (nats) on the repeated part of ``tokens (B, N)`` (:func:`repeated_part`), with
    the heads ``knocked_out`` (``(layer, head)`` pairs) zeroed together before their layer's projection."""
    kept_heads = torch.ones(len(model.layers), model.layers[0].num_heads)  # (L, H): 1 = kept, 0 = knocked out
    for layer, head in knocked_out:
        kept_heads[layer, head] = 0.0
    scored = repeated_part(tokens)  # (B, N)
    targets = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)  # (B, N): the next token
    with torch.no_grad(), one_thread():
        logits = model(check_token_ids("tokens", tokens), keep_heads=kept_heads)  # (B, N, V)
    return F.cross_entropy(logits[scored], targets[scored]).item()


def layer_weights(layer: nn.Module, h_queries: Tensor, h_keys: Tensor) -> Tensor:
    """Lesson 14: one causal layer's weights ``(B, H, N, N)`` with its queries made from ``h_queries (B, N, dim)`` and
    its keys from ``h_keys (B, N, dim)`` (hidden states; its own positions added to both)."""
    B, N, _ = h_queries.shape
    H, hd = layer.num_heads, layer.head_dim
    q = layer.qkv(h_queries).reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4)[0]  # (B, H, N, head_dim)
    k = layer.qkv(h_keys).reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4)[1]  # (B, H, N, head_dim)
    q, k = layer.add_positions(q, k, None, {})  # each (B, H, N, head_dim): rotated, if the layer rotates
    scores = (q @ k.mT) * layer.scale  # (B, H, N, N)
    return scores.masked_fill(~causal_mask(N), float("-inf")).softmax(dim=-1)  # (B, H, N, N)


def previous_token_measure(tokens: Tensor, targets: Tensor, logits: Tensor, weights: Tensor) -> Tensor:
    """Lesson 14: a measure for :func:`attn_helpers.lab.train`: every head's previous-token score ``(L, H)`` from the
    held-out ``weights (B, L, H, N, N)`` of ``tokens (B, N)``."""
    return pattern_match(weights, previous_token_pattern(tokens).to(weights.dtype))  # (L, H)


#: What lesson 14's runs measure at each snapshot besides :func:`attn_helpers.lab.train`'s own records.
INDUCTION_MEASURES = {"previous token": previous_token_measure}


def train_induction_model(*, seed: int, config: TrainConfig = INDUCTION_CONFIG, task: InductionTask | None = None,
                          progress: Callable[[int, int], None] | None = None) -> tuple[TinyAttentionModel, TrainingRun]:
    """Lesson 14: lesson 08's :func:`attn_helpers.lab.train` on :class:`InductionTask` with :data:`INDUCTION_CONFIG`
    (``seed`` replacing its seed): ``(model, run)``. ``run.pattern_match`` is every head's induction score at
    each snapshot, ``run.measured["previous token"]`` its previous-token score, ``(S, L, H)`` each, and
    ``run.held_out_loss`` the loss on the repeated part, all on ``config.held_out`` held-out sequences."""
    run = train(InductionTask() if task is None else task, config.replace(seed=seed), progress=progress,
                measures=INDUCTION_MEASURES)
    return run.model, run


def loss_drop_step(run: TrainingRun, *, below: float = 1.0) -> int | None:
    """Lesson 14: the first snapshot step at which the repeated part's held-out loss is below ``below`` nats; ``None``
    if never."""
    reached = (run.held_out_loss < below).nonzero()
    return run.steps[int(reached[0])] if len(reached) else None


@dataclass
class Circuit:
    """Lesson 14: what :func:`find_circuit` measured on one model: every head's two scores ``(L, H)``, the heads that
    pass the threshold (``(layer, head)`` pairs: previous-token heads in the first layer, induction heads after it),
    and the repeated part's loss (nats) as it is and with each group of heads knocked out (``None``: no such head)."""

    previous: Tensor
    induction: Tensor
    previous_heads: list[tuple[int, int]]
    induction_heads: list[tuple[int, int]]
    loss: float
    loss_without_previous: float | None
    loss_without_induction: float | None


def find_circuit(model: TinyAttentionModel, tokens: Tensor, *, threshold: float = 0.5) -> Circuit:
    """Lesson 14: score every head on ``tokens (B, N)`` and knock out each group that passes ``threshold``: the
    layer-0 heads by their previous-token score, the later layers' heads by their induction score."""
    previous, induction = previous_token_scores(model, tokens), induction_scores(model, tokens)  # (L, H) each
    previous_heads = [(0, h) for h in range(previous.shape[1]) if previous[0, h] >= threshold]
    induction_heads = [(layer, h) for layer in range(1, induction.shape[0]) for h in range(induction.shape[1])
                       if induction[layer, h] >= threshold]
    return Circuit(previous, induction, previous_heads, induction_heads, repeated_loss(model, tokens),
                   repeated_loss(model, tokens, previous_heads) if previous_heads else None,
                   repeated_loss(model, tokens, induction_heads) if induction_heads else None)
