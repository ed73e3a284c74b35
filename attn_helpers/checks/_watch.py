"""The one list of library functions that compute attention, which a learner's exercise function may not be
or call: :data:`ATTENTION_WATCH`, for :func:`heads.run_watching` (the guard of every function exercise).

It holds the attention-computing functions and layer forwards ``attn_helpers`` exports, PyTorch's Python
ones (``nn.MultiheadAttention``, ``F.multi_head_attention_forward``) and, by name, every PyTorch function
written in C and every ``torch.ops`` operator whose name contains "attention" (``F.scaled_dot_product_attention``,
``torch._native_multi_head_attention``, ``torch.ops.aten.scaled_dot_product_attention.default``, ...).
A function wrapped in ``functools.partial`` is judged by the function inside."""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from .. import core
from ..lab import bert, probes


class Watch(dict):
    """``code object or built-in -> name``, plus a rule: a PyTorch C function or ``torch.ops`` operator whose
    name contains one of ``words`` is watched too (named after itself)."""

    def __init__(self, entries: dict[Any, str], words: tuple[str, ...]) -> None:
        super().__init__(entries)
        self.words = words

    def _by_rule(self, key: Any) -> str:
        if isinstance(key, functools.partial):
            return self.get(key.func, "") or self.get(getattr(key.func, "__code__", None), "")
        if isinstance(key, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            name = str(key)
        elif isinstance(getattr(key, "__self__", None), torch.Tensor):  # a tensor's method: w.xlogy(w)
            name = f"torch's Tensor.{getattr(key, '__name__', '')}"
        elif callable(key) and not hasattr(key, "__code__"):  # written in C (or pybind)
            module = getattr(key, "__module__", None) or getattr(getattr(key, "__self__", None), "__name__", "")
            if not str(module).startswith("torch"):
                return ""
            name = f"torch's {getattr(key, '__name__', '')}"
        else:
            return ""
        return name if any(word in name for word in self.words) else ""

    def __contains__(self, key: Any) -> bool:
        try:
            return super().__contains__(key) or bool(self._by_rule(key))
        except TypeError:  # an unhashable key
            return False

    def __getitem__(self, key: Any) -> str:
        try:
            if super().__contains__(key):
                return super().__getitem__(key)
        except TypeError:
            pass
        name = self._by_rule(key)
        if not name:
            raise KeyError(key)
        return name

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __or__(self, other: Any) -> Watch:
        return Watch({**self, **other}, self.words)


def _functions(module: Any, names: tuple[str, ...]) -> dict[Any, str]:
    """Code objects of ``module``'s functions and of its classes' ``forward`` methods, named for a learner."""
    codes = {}
    for name in names:
        obj = getattr(module, name)
        code = getattr(getattr(obj, "forward", obj), "__code__")
        codes[code] = f"attn_helpers' {name}"
    return codes


#: Every function that computes attention (scores, weights or outputs): refused in the function exercises.
ATTENTION_WATCH = Watch({
    **_functions(core, ("rope_pair_scores", "RotaryAttention", "attention_scores", "attend",
                        "scaled_dot_product_attention", "Attention", "AttentionHead", "ConcatHeadsAttention",
                        "MultiHeadAttention", "online_softmax", "online_softmax_update", "tiled_attention",
                        "cached_attention_step", "grouped_query_attention", "GroupedQueryAttention",
                        "TransformerBlock")),
    **_functions(probes, ("attention_entropy", "AttentionStack")),
    **_functions(bert, ("BertLayer",)),
    torch.nn.MultiheadAttention.forward.__code__: "torch.nn.MultiheadAttention",
    F.multi_head_attention_forward.__code__: "torch's F.multi_head_attention_forward",
    F.scaled_dot_product_attention: "torch's F.scaled_dot_product_attention",
}, words=("attention",))
