"""Lessons 07, 09, 12 and 13 (and ``benchmarks/``): cost formulas (parameters, FLOPs, cache bytes) and measuring
tools (peak tensor memory, matrix-product FLOPs, wall-clock times, growth exponents); what the weights do: softmax
saturation (02), the weights after lesson 12's steps and the reach of sliding windows.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils.flop_counter import FlopCounterMode

from ..core import apply_mask, sliding_window_mask, softcap_scores, softmax_with_sinks
from ..core.arguments import check_heads, check_positive_int, check_tensor, shape_of

__all__ = ["SOFTMAX_FLOPS_PER_SCORE", "MODEL_ATTENTION_SIZES", "attention_parameters", "attention_flops", "kv_cache_bytes",
           "WINDOWED_ATTENTION_SIZES", "windowed_kv_cache_bytes",
           "TensorMemoryTracker", "measure_peak_memory", "count_matmul_flops",
           "fastest_seconds", "growth_exponent", "MODEL_CACHE_SIZES", "latent_cache_bytes", "linear_state_bytes",
           "model_cache_bytes", "attention_entropy", "softmax_grad_norm", "softmax_statistics", "weights_after_steps",
           "window_reach"]


# --- Counting: the parameters and the floating-point operations of the Attention layer ---

SOFTMAX_FLOPS_PER_SCORE = 5  # per score: compare (the row's max), subtract it, exp, add to the row's sum, divide


def attention_parameters(dim: int, chan: int, *, qkv_bias: bool = False) -> dict[str, int]:
    """Lesson 07: the learnable numbers of :class:`Attention` by part (``"qkv weight"``, ``"qkv bias"``, ``"proj
    weight"``, ``"proj bias"``); no ``num_heads``: the heads share out the same ``chan`` features."""
    check_positive_int("dim", dim)
    check_positive_int("chan", chan)
    if not isinstance(qkv_bias, bool):
        raise TypeError(f"qkv_bias must be True or False, got {qkv_bias!r}")
    return {
        "qkv weight": 3 * chan * dim,
        "qkv bias": 3 * chan if qkv_bias else 0,
        "proj weight": chan * chan,
        "proj bias": chan,
    }


def attention_flops(batch: int, tokens: int, dim: int, chan: int, num_heads: int, *,
                    qkv_bias: bool = False) -> dict[str, int]:
    """Lesson 07: the FLOPs of one forward pass of :class:`Attention` on ``x (batch, tokens, dim)``, step by step
    (2 per multiply-add of a matrix product, 1 per element of an element-wise step; splitting heads costs 0). The four
    matrix products are what ``torch.utils.flop_counter.FlopCounterMode`` counts."""
    B = check_positive_int("batch", batch)
    N = check_positive_int("tokens", tokens)
    attention_parameters(dim, chan, qkv_bias=qkv_bias)  # checks dim, chan and qkv_bias
    head_dim = check_heads(chan, num_heads)
    H = num_heads
    return {
        "qkv projection": 2 * B * N * dim * 3 * chan,
        "scores (q @ k^T)": 2 * B * H * N * N * head_dim,
        "scale": B * H * N * N,
        "softmax": SOFTMAX_FLOPS_PER_SCORE * B * H * N * N,
        "weights @ v": 2 * B * H * N * N * head_dim,
        "output projection": 2 * B * N * chan * chan,
        "bias adds": B * N * chan + (B * N * 3 * chan if qkv_bias else 0),
        "skip add": B * N * chan,
    }


def kv_cache_bytes(*, num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int, batch: int = 1,
                   dtype_bytes: int = 2) -> int:
    """Lesson 09: ``2 * num_layers * batch * num_kv_heads * seq_len * head_dim * dtype_bytes`` (keys and values;
    ``num_kv_heads`` is ``H`` for multi-head, ``G`` for grouped-query, 1 for multi-query attention)."""
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                        ("seq_len", seq_len), ("batch", batch), ("dtype_bytes", dtype_bytes)):
        check_positive_int(name, value)
    return 2 * num_layers * batch * num_kv_heads * seq_len * head_dim * dtype_bytes


# The attention sizes of a few well-known decoders, as their published configuration files give them
# (Hugging Face ``config.json``): GPT-2 ``n_layer``, ``n_head``, ``n_embd`` (head_dim = n_embd / n_head, no
# grouping); Llama-2 and Mistral ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
# ``hidden_size`` (head_dim = hidden_size / num_attention_heads). Mistral-7B also has ``sliding_window``
# 4096: it attends to (and needs to keep) at most the last 4096 tokens.
MODEL_ATTENTION_SIZES: dict[str, dict[str, int]] = {
    "GPT-2 small": dict(num_layers=12, num_heads=12, num_kv_heads=12, head_dim=64),  # n_embd 768
    "Llama-2-7B": dict(num_layers=32, num_heads=32, num_kv_heads=32, head_dim=128),  # hidden_size 4096
    "Llama-2-70B": dict(num_layers=80, num_heads=64, num_kv_heads=8, head_dim=128),  # hidden_size 8192, GQA
    "Mistral-7B": dict(num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128),  # hidden_size 4096, GQA
}


# Lesson 12: models whose local layers attend to (and keep) only the last ``window`` tokens, from their published
# configs. ``local_layers`` of the ``num_layers`` are sliding-window layers, the rest global.
# - Mistral-7B-v0.1 (``config.json``; Jiang et al., 2023, arXiv:2310.06825, section 2): every layer, window 4096.
# - Gemma-2-9B (``config.json``: 42 layers, 16 heads, 8 KV heads, head_dim 256, sliding_window 4096; Gemma Team,
#   2024, arXiv:2408.00118): local and global layers alternate, layer 0 local (transformers' Gemma2Config
#   ``layer_types``), so 21 local.
# - Gemma-3-27B (``config.json``: 62 layers, 32 heads, 16 KV heads, head_dim 128, sliding_window 1024; Gemma Team,
#   2025, arXiv:2503.19786, on its architecture: five local layers per global one): layer i is global when (i + 1) % 6 == 0
#   (transformers' Gemma3TextConfig ``sliding_window_pattern`` 6), so 10 global and 52 local.
# - gpt-oss-20b (``config.json``: 24 layers, 64 heads, 8 KV heads, head_dim 64, sliding_window 128,
#   ``layer_types`` alternating from "sliding_attention"; OpenAI, 2025, arXiv:2508.10925): 12 local.
WINDOWED_ATTENTION_SIZES: dict[str, dict[str, int]] = {
    "Mistral-7B-v0.1": dict(num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128, window=4096, local_layers=32),
    "Gemma-2-9B": dict(num_layers=42, num_heads=16, num_kv_heads=8, head_dim=256, window=4096, local_layers=21),
    "Gemma-3-27B": dict(num_layers=62, num_heads=32, num_kv_heads=16, head_dim=128, window=1024, local_layers=52),
    "gpt-oss-20b": dict(num_layers=24, num_heads=64, num_kv_heads=8, head_dim=64, window=128, local_layers=12),
}


def windowed_kv_cache_bytes(*, num_layers: int, local_layers: int, window: int | None, num_kv_heads: int,
                            head_dim: int, seq_len: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Lesson 12: :func:`kv_cache_bytes` of ``local_layers`` keeping ``min(seq_len, window)`` tokens plus the other
    layers keeping ``seq_len``; ``window=None`` (or ``local_layers=0``): every layer global."""
    check_positive_int("num_layers", num_layers)
    if isinstance(local_layers, bool) or not isinstance(local_layers, int) or not 0 <= local_layers <= num_layers:
        raise ValueError(f"local_layers must be an int in [0, num_layers={num_layers}], got {local_layers!r}")
    check_positive_int("seq_len", seq_len)
    kept = seq_len if window is None else min(seq_len, check_positive_int("window", window))  # a local layer's tokens
    one_token = kv_cache_bytes(num_layers=1, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=1, batch=batch,
                               dtype_bytes=dtype_bytes)  # one token's keys and values in one layer
    return one_token * (local_layers * kept + (num_layers - local_layers) * seq_len)


def latent_cache_bytes(*, num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int, seq_len: int,
                       batch: int = 1, dtype_bytes: int = 2) -> int:
    """Lesson 13: ``num_layers * batch * seq_len * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes``, one latent and
    one rotary key per token and layer (no factor 2: keys and values are rebuilt from the latent)."""
    for name, value in (("num_layers", num_layers), ("kv_lora_rank", kv_lora_rank),
                        ("qk_rope_head_dim", qk_rope_head_dim), ("seq_len", seq_len), ("batch", batch),
                        ("dtype_bytes", dtype_bytes)):
        check_positive_int(name, value)
    return num_layers * batch * seq_len * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes


def linear_state_bytes(*, num_layers: int, num_heads: int, key_head_dim: int, value_head_dim: int,
                       conv_numbers: int = 0, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Lesson 13: ``num_layers * batch * (num_heads * key_head_dim * value_head_dim + conv_numbers) * dtype_bytes``,
    whatever the number of tokens (``conv_numbers``: e.g. Qwen3-Next's short convolution's inputs)."""
    for name, value in (("num_layers", num_layers), ("num_heads", num_heads), ("key_head_dim", key_head_dim),
                        ("value_head_dim", value_head_dim), ("batch", batch), ("dtype_bytes", dtype_bytes)):
        check_positive_int(name, value)
    if isinstance(conv_numbers, bool) or not isinstance(conv_numbers, int) or conv_numbers < 0:
        raise ValueError(f"conv_numbers must be an int >= 0, got {conv_numbers!r}")
    return num_layers * batch * (num_heads * key_head_dim * value_head_dim + conv_numbers) * dtype_bytes


# Two models whose cache is not "H/G key/value heads in every layer", from their published configuration files
# (Hugging Face config.json of deepseek-ai/DeepSeek-V3 and Qwen/Qwen3-Next-80B-A3B-Instruct; transformers'
# DeepseekV3Config and Qwen3NextConfig have the same defaults). num_heads, num_kv_heads, head_dim and num_layers are
# the attention layers' sizes, the ones the KV-cache calculator's sliders take. DeepSeek-V3 (multi-head latent
# attention): head_dim is v_head_dim = qk_nope_head_dim = 128 (each key also has qk_rope_head_dim 64 rotary features).
# Qwen3-Next: full_attention_interval 4, so 12 of the 48 layers attend (grouped-query) and 36 are Gated DeltaNet
# layers with 32 value heads of 128 x 128 states and a convolution of kernel 4 over conv_dim = 2 * 16 * 128 + 32 * 128
# channels.
MODEL_CACHE_SIZES: dict[str, dict[str, int | str]] = {
    "DeepSeek-V3": dict(kind="latent", num_layers=61, num_heads=128, num_kv_heads=128, head_dim=128,
                        kv_lora_rank=512, qk_rope_head_dim=64),
    "Qwen3-Next": dict(kind="hybrid", num_layers=48, num_heads=16, num_kv_heads=2, head_dim=256,
                               attention_layers=12, linear_num_value_heads=32, linear_key_head_dim=128,
                               linear_value_head_dim=128, conv_numbers=(2 * 16 * 128 + 32 * 128) * 4),
}


def model_cache_bytes(name: str, *, seq_len: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Lesson 13: the cache bytes of :data:`MODEL_CACHE_SIZES` model ``name`` after ``seq_len`` tokens."""
    if name not in MODEL_CACHE_SIZES:
        raise ValueError(f"name must be one of {list(MODEL_CACHE_SIZES)}, got {name!r}")
    m = MODEL_CACHE_SIZES[name]
    if m["kind"] == "latent":
        return latent_cache_bytes(num_layers=m["num_layers"], kv_lora_rank=m["kv_lora_rank"],
                                  qk_rope_head_dim=m["qk_rope_head_dim"], seq_len=seq_len, batch=batch,
                                  dtype_bytes=dtype_bytes)
    attention = kv_cache_bytes(num_layers=m["attention_layers"], num_kv_heads=m["num_kv_heads"], head_dim=m["head_dim"],
                               seq_len=seq_len, batch=batch, dtype_bytes=dtype_bytes)
    linear = linear_state_bytes(num_layers=m["num_layers"] - m["attention_layers"], num_heads=m["linear_num_value_heads"],
                                key_head_dim=m["linear_key_head_dim"], value_head_dim=m["linear_value_head_dim"],
                                conv_numbers=m["conv_numbers"], batch=batch, dtype_bytes=dtype_bytes)
    return attention + linear


# --- Measuring softmax saturation (lesson 02: why scores are divided by sqrt(d_k)) ---

def attention_entropy(weights: Tensor) -> Tensor:
    """Lessons 02 and 05: entropy (in nats) of each attention row, ``(..., N_q, N_k) -> (..., N_q)``: ``log(N_k)`` for
    uniform weights, ``0`` for one-hot weights; zero weights contribute zero (``torch.special.entr``)."""
    return torch.special.entr(check_tensor("weights", weights, min_ndim=1)).sum(dim=-1)


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


# --- Measuring: peak tensor memory, time, growth exponents ---

def _tensors(value: Any) -> list[Tensor]:
    """The tensors in ``value``, looking inside tuples, lists and dicts (what PyTorch functions take and return)."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


class TensorMemoryTracker(TorchFunctionMode):
    """Lesson 09: ``with TensorMemoryTracker() as tracker:`` counts the storage bytes of the tensors PyTorch functions
    create in the block (``tracker.peak``, ``tracker.current``) through ``__torch_function__``; views share their base's
    bytes, the inputs are not counted, a function's internal scratch is not seen. The same numbers on every machine."""

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._live: dict[int, list[int]] = {}  # storage address -> [bytes, tensors alive]
        self._outside: set[int] = set()  # storages that existed before: never counted
        self._seen: set[int] = set()  # ids of tensors already tracked

    def _release(self, key: int, tensor_id: int) -> None:
        self._seen.discard(tensor_id)
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._live[key]

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: D105 - PyTorch's hook
        kwargs = kwargs or {}
        for t in _tensors((args, kwargs)):  # PyTorch runs this with the mode switched off: no recursion
            key = t.untyped_storage().data_ptr()  # the storage's address, fixed while it lives
            if key not in self._live and key not in self._outside:
                self._outside.add(key)
                weakref.finalize(t, self._outside.discard, key)
        out = func(*args, **kwargs)
        for t in _tensors(out):
            if id(t) in self._seen:
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self._outside:
                continue
            self._seen.add(id(t))
            entry = self._live.setdefault(key, [storage.nbytes(), 0])
            if entry[1] == 0:
                self.current += entry[0]
                self.peak = max(self.peak, self.current)
            entry[1] += 1
            weakref.finalize(t, self._release, key, id(t))
        return out


def measure_peak_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Lesson 09: :class:`TensorMemoryTracker`'s peak for ``fn(*args, **kwargs)`` under ``torch.no_grad()``."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with torch.no_grad(), TensorMemoryTracker() as tracker:
        result = fn(*args, **kwargs)
        del result
    return tracker.peak


def count_matmul_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Lesson 09: the FLOPs of the matrix products in ``fn(*args, **kwargs)``, counted by PyTorch's
    ``FlopCounterMode`` (lesson 07's counter) under ``torch.no_grad()``; element-wise work is not counted."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return counter.get_total_flops()


def fastest_seconds(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1) -> float:
    """Lesson 09: the shortest wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup``: other programs
    only slow a run down."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    check_positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else (lambda: None)
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
    return min(times)


def growth_exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """Lesson 09: the least-squares slope ``p`` of ``log value`` against ``log size`` (``value ~ c * size ** p``)."""
    sizes, values = [float(s) for s in sizes], [float(v) for v in values]
    if len(sizes) != len(values):
        raise ValueError(f"sizes and values must have the same length, got {len(sizes)} and {len(values)}")
    if len(sizes) < 2 or len(set(sizes)) < 2:
        raise ValueError(f"need at least two different sizes to fit a slope, got sizes={sizes}")
    if min(sizes) <= 0 or min(values) <= 0:
        raise ValueError(f"sizes and values must be positive to take logarithms, got sizes={sizes}, values={values}")
    xs, ys = [math.log(s) for s in sizes], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


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
    ``i`` read ``j`` when ``sliding_window_mask`` allows it; a stack composes those paths (a matrix power)."""
    check_positive_int("num_layers", num_layers)
    step = sliding_window_mask(n, window=window).to(torch.float64)  # (n, n): one layer's paths
    return torch.linalg.matrix_power(step, num_layers) > 0  # (n, n): [i, j] True when some path leads from j to i
