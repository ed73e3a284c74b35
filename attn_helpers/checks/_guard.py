"""The checkers' one guard against a learner's function handing its work to the library.

A :class:`Watch` says what a learner's function may not be or call: library functions, methods and layers
(recognised by their code objects, so an alias, a copy or a ``functools.partial`` is recognised too), PyTorch
functions written in C and ``torch.ops`` operators (by themselves, or by a word of their name, ``"attention"``).
:func:`library` builds the watch of what the rooms ``core`` and ``lab`` export, by name; :func:`run_watching`
runs the learner's function under ``sys.setprofile`` and returns the names of the watched calls it made, under
any name; :meth:`Watch.itself` says whether the answer *is* a watched function."""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import CodeType
from typing import Any

import torch
import torch.nn.functional as F

from .. import core, lab

__all__ = ["ATTENTION_NAMES", "LIBRARY_ATTENTION", "MASK_BUILDERS", "TORCH_ATTENTION", "TORCH_MULTI_HEAD",
           "Watch", "array_calls", "codes_called", "library", "package_calls",
           "run_watching"]

#: The Python frames through which every ``torch.ops`` operator is called (their ``self`` is the operator).
_OPERATOR_CALLS = {torch._ops.OpOverload.__call__.__code__, torch._ops.OpOverloadPacket.__call__.__code__}


def _key(obj: Any) -> Any:
    """What a watched object is recognised by: a Python function's code object (a class: its ``forward``'s; a
    method: its function's); anything else (a C function, a ``torch.ops`` operator, a partial) is its own key."""
    if inspect.isclass(obj):
        obj = getattr(obj, "forward", obj)
    obj = getattr(obj, "__func__", obj)  # a bound method, staticmethod or classmethod
    return getattr(obj, "__code__", obj)


def _op_name(op: Any) -> str:
    return str(getattr(op, "_qualified_op_name", "") or getattr(op, "_name", "") or op)


class Watch(dict):
    """``key -> the name a verdict gives it``, keys made by :func:`_key` from functions, classes or code objects,
    plus a rule: a PyTorch C function, tensor method or ``torch.ops`` operator whose name holds one of ``words``
    is watched too, named after itself. ``a | b`` joins two watches (``b``'s names win)."""

    def __init__(self, entries: Mapping[Any, str] | None = None, words: Iterable[str] = ()) -> None:
        super().__init__({_key(obj): name for obj, name in (entries or {}).items()})
        self.words = tuple(dict.fromkeys(words))

    def __or__(self, other: Mapping[Any, str]) -> Watch:  # type: ignore[override]
        return Watch({**self, **other}, self.words + tuple(getattr(other, "words", ())))

    def without(self, keys: Iterable[Any]) -> Watch:
        """This watch less ``keys`` (code objects, functions or classes)."""
        drop = {_key(k) for k in keys}
        return Watch({k: name for k, name in self.items() if k not in drop}, self.words)

    def name(self, key: Any) -> str:
        """The name ``key`` (a code object, C function, operator or partial) is watched under, or ``''``."""
        try:
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        except TypeError:  # an unhashable callable
            return ""
        if type(key) is CodeType:
            return ""
        if isinstance(key, functools.partial):
            return self.name(key.func) or self.name(_key(key.func))
        if not self.words:
            return ""
        if isinstance(key, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            label = f"torch.ops.{_op_name(key).replace('::', '.')}"
        elif isinstance(getattr(key, "__self__", None), torch.Tensor):  # a tensor's method: w.xlogy(w)
            label = f"PyTorch's Tensor.{getattr(key, '__name__', '')}"
        elif callable(key) and not hasattr(key, "__code__"):  # written in C (or pybind)
            module = getattr(key, "__module__", None) or getattr(getattr(key, "__self__", None), "__name__", "")
            if not str(module).startswith("torch"):
                return ""
            label = f"PyTorch's {getattr(key, '__name__', '')}"
        else:
            return ""
        return label if any(word in label for word in self.words) else ""

    def itself(self, answer: Any) -> str:
        """The watched name ``answer`` *is* (``answer = split_heads``, a layer, a watched C function), or ``''``."""
        return (self.name(_key(answer)) or self.name(_key(getattr(answer, "forward", None)))
                or self.name(answer))


#: Exports that compute nothing a judged exercise asks for (masks, a broadcast, the size checks): never refused by
#: :func:`library`.
MASK_BUILDERS = ("causal_mask", "padding_mask", "blocked_to_keep", "mask_to_additive", "broadcast_shape", "check_heads",
                 "check_kv_heads")


def library(only: Iterable[str] | None = None, *, skip: Iterable[str] = MASK_BUILDERS) -> Watch:
    """Every function the rooms ``core`` and ``lab`` export but those named in ``skip`` (or the exports named in
    ``only``), and every method, defined in the package, of the classes among them, named
    ``"attn_helpers' <qualified name>"`` (``"attn_helpers' split_heads"``, ``"attn_helpers' BertEncoder.forward"``).
    Built from the rooms' public names, so it follows the modules inside a room wherever they move."""
    names = [*core.__all__, *lab.__all__] if only is None else list(only)
    skip = () if only is not None else tuple(skip)
    entries: dict[Any, str] = {}
    for name in dict.fromkeys(names):
        if name in skip:
            continue
        obj = getattr(core, name, None) if name in core.__all__ else getattr(lab, name, None)
        if obj is None:
            raise ValueError(f"{name!r} is exported by neither attn_helpers.core nor attn_helpers.lab")
        functions = []
        if inspect.isfunction(obj):
            functions = [obj]
        elif inspect.isclass(obj):
            functions = [getattr(f, "__func__", f) for klass in obj.__mro__
                         if klass.__module__.startswith("attn_helpers") for f in vars(klass).values()]
        for f in functions:
            f = inspect.unwrap(f) if inspect.isfunction(f) else f  # a decorated function: its own code, not the
            if inspect.isfunction(f) and f.__module__.startswith("attn_helpers"):  # decorator's (contextmanager)
                entries.setdefault(f.__code__, f"attn_helpers' {f.__qualname__}")
    return Watch(entries)


#: PyTorch's own attention: its layer and functional forms, and every C function or operator whose name holds
#: "attention", "multi_head" or "transformer" (``torch._native_multi_head_attention``, ``torch.ops.aten....``).
TORCH_ATTENTION = Watch({
    torch.nn.MultiheadAttention: "torch.nn.MultiheadAttention",
    F.multi_head_attention_forward: "F.multi_head_attention_forward",
    F.scaled_dot_product_attention: "F.scaled_dot_product_attention",
}, words=("attention", "multi_head", "transformer"))

#: PyTorch's multi-head attention only: where one head's attention step (an SDPA) is allowed (exercise 5.6).
TORCH_MULTI_HEAD = Watch({
    torch.nn.MultiheadAttention: "torch.nn.MultiheadAttention",
    F.multi_head_attention_forward: "F.multi_head_attention_forward",
}, words=("multi_head", "transformer"))

class _PackageCalls(Watch):
    """A watch that also names every call into some packages (``{"numpy": "NumPy's"}``): a function, a method of
    one of their objects, written in Python or in C."""

    def __init__(self, watched: Watch, packages: Mapping[str, str]) -> None:
        super().__init__()
        self.update(watched)
        self.words = watched.words
        self.packages = dict(packages)

    def name(self, key: Any) -> str:
        watched = super().name(key)
        if watched:
            return watched
        if type(key) is CodeType:
            path = key.co_filename.replace("\\", "/")
            found = [label for package, label in self.packages.items() if f"/{package}/" in path]
            return f"{found[0]} {getattr(key, 'co_qualname', key.co_name)}" if found else ""
        owner = getattr(key, "__self__", None)
        module = getattr(key, "__module__", None) or (type(owner).__module__ if owner is not None else "")
        label = self.packages.get(str(module).split(".")[0], "")
        return f"{label} {getattr(key, '__name__', type(key).__name__)}" if label else ""


def package_calls(watched: Watch | None, packages: Mapping[str, str]) -> Watch:
    """``watched`` (``None``: nothing) plus every call into ``packages`` (import name -> its possessive in a
    verdict), named after the call: ``package_calls(None, {"numpy": "NumPy's"})`` names ``"NumPy's arange"``."""
    return _PackageCalls(watched if watched is not None else Watch(), packages)


def array_calls(watched: Watch | None = None) -> Watch:
    """``watched`` plus every call into PyTorch or NumPy (for an exercise whose answer is whole-number index
    arithmetic, which a tensor laid out like the exercise's would simply look up)."""
    return package_calls(watched, {"torch": "PyTorch's", "numpy": "NumPy's"})


#: The library's exports that compute attention (scores, weights or outputs).
ATTENTION_NAMES = ("attention_scores", "scaled_dot_product_attention", "Attention", "AttentionHead",
                   "ConcatHeadsAttention", "MultiHeadAttention", "online_softmax", "online_softmax_update",
                   "tiled_attention", "cached_attention_step", "grouped_query_attention", "rope_pair_scores",
                   "RotaryAttention", "TransformerBlock", "attention_entropy", "AttentionStack", "BertLayer")

#: Every attention of the library and of PyTorch: refused in the exercises that ask for scores or weights.
LIBRARY_ATTENTION = library(ATTENTION_NAMES) | TORCH_ATTENTION


def _watcher(watched: Watch, seen: list[str], only_if: Mapping[Any, Callable[[dict[str, Any]], bool]]
             ) -> Callable[[Any, str, Any], None]:
    """A ``sys.setprofile`` function appending to ``seen`` the name of every watched call: a Python function
    (counted only when ``only_if[its key]``, if given, passes on the call's arguments), a C function, or a
    ``torch.ops`` operator (called through ``OpOverload(Packet).__call__``, whose ``self`` is the operator)."""

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code in _OPERATOR_CALLS:
                name = watched.name(frame.f_locals.get("self"))
            else:
                name = watched.name(code)
                test = only_if.get(code) if name else None
                if test is not None and not test(dict(frame.f_locals)):
                    name = ""
        elif event == "c_call":
            name = watched.name(arg)
        else:
            return
        if name:
            seen.append(name)
    return profile


def run_watching(fn: Callable[..., Any], args: tuple[Any, ...], watched: Watch, *,
                 only_if: Mapping[Any, Callable[[dict[str, Any]], bool]] | None = None) -> tuple[Any, list[str]]:
    """``fn(*args)`` and the names of the ``watched`` calls it made, in call order, under any name. ``only_if``
    maps a watched function (or class: its forward) to a test of the call's arguments that must pass for the
    call to count. Exceptions from ``fn`` propagate; warnings it raises are silenced."""
    called: list[str] = []
    tests = {_key(obj): test for obj, test in (only_if or {}).items()}
    previous = sys.getprofile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(_watcher(watched, called, tests))
        try:
            result = fn(*args)
        finally:
            sys.setprofile(previous)
    return result, called


def codes_called(fn: Callable[..., Any], *args: Any) -> set[Any]:
    """The code objects of every Python function ``fn(*args)`` runs (to leave out of a watch what the exercise's
    own setup calls)."""
    seen: set[Any] = set()

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen.add(frame.f_code)

    previous = sys.getprofile()
    sys.setprofile(record)
    try:
        fn(*args)
    finally:
        sys.setprofile(previous)
    return seen
