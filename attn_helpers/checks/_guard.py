"""The checkers' one guard against a learner's function handing its work to the library.

A :class:`Watch` is a fixed list: what the rooms ``core`` and ``lab`` export (:func:`library`; recognised by code
object, so an alias, a copy or a partial is too), PyTorch's attention entry points (:data:`TORCH_ATTENTION`, the
objects themselves), a function defined outside the package (by its name: a notebook's, or PyTorch's private mask
converter, never read as an attribute) and whole packages (``transformers``).
:func:`run_watching` runs a function under ``sys.setprofile`` and names the watched calls it made."""

from __future__ import annotations

import functools
import inspect
import sys
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import CodeType
from typing import Any

import torch
import torch.nn.functional as F

from .. import core, lab

try:  # PyTorch 2.5 and later; the module costs a few milliseconds once torch is imported
    from torch.nn.attention.flex_attention import flex_attention as _flex_attention
except ImportError:  # an older PyTorch has no flex attention to refuse
    _flex_attention = None

__all__ = ["LIBRARY_ATTENTION", "MASK_BUILDERS", "TORCH_ATTENTION", "TORCH_MULTI_HEAD", "TRANSFORMERS", "Watch",
           "codes_called", "library", "run_watching"]

_PACKAGE = str(Path(core.__file__).parents[1])  # attn_helpers' folder: its own functions are not the notebook's


def _key(obj: Any) -> Any:
    """A Python function's code object (a class: its ``forward``'s; a method: its function's); anything else (a C
    function, a ``torch.ops`` operator, a partial, a name) is its own key."""
    if inspect.isclass(obj):
        obj = getattr(obj, "forward", obj)
    obj = getattr(obj, "__func__", obj)
    return getattr(obj, "__code__", obj)


class Watch(dict):
    """``key -> the name a verdict gives it`` (keys by :func:`_key`); a ``str`` key watches a function defined
    outside the package by its name (lesson 06's ``measure_depths``). ``packages`` (import name -> possessive,
    ``{"transformers": "transformers'"}``) names every call into them. ``a | b`` joins two watches."""

    def __init__(self, entries: Mapping[Any, str] | None = None, packages: Mapping[str, str] | None = None) -> None:
        super().__init__({_key(obj): name for obj, name in (entries or {}).items()})
        self.packages = dict(packages or {})

    def __or__(self, other: Mapping[Any, str]) -> Watch:  # type: ignore[override]
        return Watch({**self, **other}, {**self.packages, **getattr(other, "packages", {})})

    def without(self, keys: Iterable[Any]) -> Watch:
        drop = {_key(k) for k in keys}
        return Watch({k: name for k, name in self.items() if k not in drop}, self.packages)

    def name(self, key: Any) -> str:
        """The name ``key`` (a code object, C function, operator or partial) is watched under, or ``''``."""
        try:
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        except TypeError:  # an unhashable callable
            return ""
        if type(key) is CodeType:
            if not key.co_filename.startswith(_PACKAGE) and isinstance(dict.get(self, key.co_name), str):
                return dict.__getitem__(self, key.co_name)
            path = key.co_filename.replace("\\", "/")
            found = [label for package, label in self.packages.items() if f"/{package}/" in path]
            return f"{found[0]} {getattr(key, 'co_qualname', key.co_name)}" if found else ""
        if isinstance(key, functools.partial):
            return self.name(key.func) or self.name(_key(key.func))
        owner = getattr(key, "__self__", None)
        if isinstance(owner, torch.Tensor):  # a tensor's method, bound: w.xlogy(w)
            watched = self.name(getattr(torch.Tensor, getattr(key, "__name__", ""), None))
            if watched:
                return watched
        module = getattr(key, "__module__", None) or (type(owner).__module__ if owner is not None else "")
        label = self.packages.get(str(module or "").split(".")[0], "")
        return f"{label} {getattr(key, '__name__', type(key).__name__)}" if label else ""

    def itself(self, answer: Any) -> str:
        """The watched name ``answer`` *is* (``answer = split_heads``, a layer, a watched C function), or ``''``."""
        return (self.name(_key(answer)) or self.name(_key(getattr(answer, "forward", None)))
                or self.name(answer))


#: Exports that compute nothing an exercise asks for (masks, a broadcast, the size checks): never refused by library().
MASK_BUILDERS = ("causal_mask", "padding_mask", "blocked_to_keep", "mask_to_additive", "broadcast_shape", "check_heads",
                 "check_kv_heads")


def library(only: Iterable[str] | None = None, *, skip: Iterable[str] = MASK_BUILDERS) -> Watch:
    """Every function (and class method) ``core`` and ``lab`` export but ``skip``, or only those in ``only``."""
    names = [*core.__all__, *lab.__all__] if only is None else list(only)
    skip = () if only is not None else tuple(skip)
    entries: dict[Any, str] = {}
    for name in dict.fromkeys(n for n in names if n not in skip):
        obj = getattr(core, name, None) if name in core.__all__ else getattr(lab, name, None)
        if obj is None:
            raise ValueError(f"{name!r} is exported by neither attn_helpers.core nor attn_helpers.lab")
        functions = [obj] if inspect.isfunction(obj) else [
            getattr(f, "__func__", f) for klass in getattr(obj, "__mro__", ())
            if klass.__module__.startswith("attn_helpers") for f in vars(klass).values()]
        for f in functions:
            f = inspect.unwrap(f) if inspect.isfunction(f) else f  # a decorated function: its own code
            if inspect.isfunction(f) and f.__module__.startswith("attn_helpers"):
                entries.setdefault(f.__code__, f"attn_helpers' {f.__qualname__}")
    return Watch(entries)


def _torch_entry_points(layers: Iterable[Any], functions: Iterable[Any], operators: Iterable[str]) -> Watch:
    """PyTorch's ``layers``, ``functions`` and ``operators`` (``torch.<name>``, ``torch.ops.aten.<name>.*``)."""
    entries: dict[Any, str] = {layer: f"torch.nn.{layer.__name__}" for layer in layers}
    entries.update({f: f"F.{f.__name__}" for f in functions})
    for name in operators:
        if hasattr(torch, name):
            entries[getattr(torch, name)] = f"torch.{name}"
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            entries[packet] = f"torch.ops.aten.{name}"
            entries.update({getattr(packet, o): f"torch.ops.aten.{name}.{o}" for o in packet.overloads()})
    return Watch(entries)


_TORCH_LAYERS = (torch.nn.MultiheadAttention, torch.nn.Transformer, torch.nn.TransformerEncoder,
                 torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoder, torch.nn.TransformerDecoderLayer)
_MULTI_HEAD_OPERATORS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")

#: PyTorch's own attention: its layers, functional forms (flex attention too) and the operators behind them.
TORCH_ATTENTION = _torch_entry_points(
    _TORCH_LAYERS, (F.multi_head_attention_forward, F.scaled_dot_product_attention),
    ("scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
     "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
     *_MULTI_HEAD_OPERATORS)) | Watch(
    # with the identity as values it returns the weights; a score_mod applies a mask
    {_flex_attention: "torch.nn.attention.flex_attention.flex_attention"} if _flex_attention else {})

#: PyTorch's multi-head attention only: where one head's attention step (an SDPA) is allowed (exercise 5.6).
TORCH_MULTI_HEAD = _torch_entry_points(_TORCH_LAYERS, (F.multi_head_attention_forward,), _MULTI_HEAD_OPERATORS)

#: Anything of ``transformers``, whose layers the lessons test the library against.
TRANSFORMERS = Watch(packages={"transformers": "transformers'"})

#: The library's exports that compute attention (scores, weights or outputs), and PyTorch's.
LIBRARY_ATTENTION = library(("attention_scores", "attend", "scaled_dot_product_attention", "Attention", "AttentionHead",
                             "ConcatHeadsAttention", "MultiHeadAttention", "online_softmax", "online_softmax_update",
                             "tiled_attention", "cached_attention_step", "grouped_query_attention",
                             "rope_pair_scores", "RotaryAttention", "TransformerBlock", "attention_entropy",
                             "AttentionStack", "BertLayer")) | TORCH_ATTENTION


def _profiled(fn: Callable[..., Any], args: tuple[Any, ...], profile: Callable[[Any, str, Any], None]) -> Any:
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        return fn(*args)
    finally:
        sys.setprofile(previous)


def run_watching(fn: Callable[..., Any], args: tuple[Any, ...], watched: Watch, *,
                 only_if: Mapping[Any, Callable[[dict[str, Any]], bool]] | None = None) -> tuple[Any, list[str]]:
    """``fn(*args)`` and the ``watched`` calls it made; ``only_if``: watched function -> test of its arguments."""
    called: list[str] = []
    tests = {_key(obj): test for obj, test in (only_if or {}).items()}

    def profile(frame: Any, event: str, arg: Any) -> None:
        name = ""
        if event == "call":
            code = frame.f_code
            if code.co_name == "__call__":  # a watched object's __call__ written in Python (a torch.ops operator)
                name = watched.name(frame.f_locals.get("self"))
            if not name:
                name = watched.name(code)
                if name and code in tests and not tests[code](dict(frame.f_locals)):
                    name = ""
        elif event == "c_call":
            name = watched.name(arg)
        # a module's first import runs its body, whose calls are not the learner's: none inside an import (Python's
        # import machinery on the stack)
        if name and not any(f.f_code.co_filename.startswith("<frozen importlib")
                            for f, _ in traceback.walk_stack(frame)):
            called.append(name)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _profiled(fn, args, profile), called


def codes_called(fn: Callable[..., Any], *args: Any) -> set[Any]:
    """The code objects of every Python function ``fn(*args)`` runs (to leave the exercise's own setup unwatched)."""
    seen: set[Any] = set()
    _profiled(fn, args, lambda frame, event, arg: seen.add(frame.f_code) if event == "call" else None)
    return seen
