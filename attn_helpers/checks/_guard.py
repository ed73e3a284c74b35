"""The checkers' one guard against a learner's function handing its work to the library.

A :class:`Watch` is a fixed list of what a learner's function may not be or call: library functions, methods and
layers (recognised by their code objects, so an alias, a copy or a ``functools.partial`` is recognised too),
PyTorch functions written in C and ``torch.ops`` operators (recognised as the objects themselves), and, for a
function the notebook defines, its name (:class:`FunctionNamed`). :func:`library` builds the watch of what the
rooms ``core`` and ``lab`` export, by name; :data:`TORCH_ATTENTION` lists PyTorch's attention entry points;
:func:`run_watching` runs the learner's function under ``sys.setprofile`` and returns the names of the watched
calls it made, under any name; :meth:`Watch.itself` says whether the answer *is* a watched function."""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import CodeType
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from .. import core, lab

__all__ = ["ATTENTION_NAMES", "LIBRARY_ATTENTION", "MASK_BUILDERS", "TORCH_ATTENTION", "TORCH_MULTI_HEAD",
           "FunctionNamed", "Watch", "array_calls", "codes_called", "library", "package_calls", "run_watching"]

_PACKAGE = str(Path(core.__file__).parents[1])  # the folder of attn_helpers: its own functions are not the notebook's


class FunctionNamed(NamedTuple):
    """A watch key for a Python function defined outside the package by its name (``measure_depths``, which a
    lesson's notebook defines): watched whatever object the notebook holds under that name."""

    name: str


def _key(obj: Any) -> Any:
    """What a watched object is recognised by: a Python function's code object (a class: its ``forward``'s; a
    method: its function's); anything else (a C function, a ``torch.ops`` operator, a partial) is its own key."""
    if inspect.isclass(obj):
        obj = getattr(obj, "forward", obj)
    obj = getattr(obj, "__func__", obj)  # a bound method, staticmethod or classmethod
    return getattr(obj, "__code__", obj)


#: Where ``words`` look for PyTorch's functions written in C (and ``torch.Tensor`` for its methods): public names only.
_WORD_NAMESPACES = (("", torch), ("", torch.special), ("", F), ("", torch.linalg), ("Tensor.", torch.Tensor))


@functools.lru_cache(maxsize=None)
def _named_by_words(words: tuple[str, ...]) -> dict[Any, str]:
    """The fixed list ``words`` stands for: every public function written in C of :data:`_WORD_NAMESPACES` and
    every public method of ``torch.Tensor`` whose name holds one of ``words``, listed once per ``words``."""
    found: dict[Any, str] = {}
    for prefix, namespace in _WORD_NAMESPACES if words else ():
        for name in dir(namespace):
            obj = getattr(namespace, name, None) if not name.startswith("_") else None
            if (any(word in name for word in words) and callable(obj) and not inspect.isclass(obj)
                    and not hasattr(obj, "__code__")):
                found.setdefault(obj, f"PyTorch's {prefix}{getattr(obj, '__name__', name)}")
    return found


class Watch(dict):
    """``key -> the name a verdict gives it``, keys made by :func:`_key` from functions, classes, code objects, C
    functions or ``torch.ops`` operators, or a :class:`FunctionNamed`. ``words``: a shorthand for more of the
    list, every public PyTorch function and ``Tensor`` method whose name holds one of them (listed once, when
    the watch is made). ``a | b`` joins two watches (``b``'s names win)."""

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
            by_words = _named_by_words(self.words)
            if key in by_words:
                return by_words[key]
        except TypeError:  # an unhashable callable
            return ""
        if type(key) is CodeType:
            named = FunctionNamed(key.co_name)
            if dict.__contains__(self, named) and not key.co_filename.startswith(_PACKAGE):
                return dict.__getitem__(self, named)
            return ""
        if isinstance(key, functools.partial):
            return self.name(key.func) or self.name(_key(key.func))
        if isinstance(getattr(key, "__self__", None), torch.Tensor):  # a tensor's method, bound: w.xlogy(w)
            return self.name(getattr(torch.Tensor, getattr(key, "__name__", ""), None))
        return ""

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


def _torch_entry_points(layers: Iterable[Any], functions: Iterable[Any], operators: Iterable[str]) -> Watch:
    """PyTorch's ``layers`` (their forward) and C ``functions`` by their public names, and each of ``operators`` as
    ``torch.<name>`` and as ``torch.ops.aten.<name>`` with every overload (those this PyTorch has), by name."""
    entries: dict[Any, str] = {layer: f"torch.nn.{layer.__name__}" for layer in layers}
    entries.update({f: f"F.{f.__name__}" for f in functions})
    for name in operators:
        function = getattr(torch, name, None)
        if function is not None:
            entries[function] = f"torch.{name}"
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            entries[packet] = f"torch.ops.aten.{name}"
            entries.update({getattr(packet, overload): f"torch.ops.aten.{name}.{overload}"
                            for overload in packet.overloads()})
    return Watch(entries)


_TORCH_LAYERS = (torch.nn.MultiheadAttention, torch.nn.Transformer, torch.nn.TransformerEncoder,
                 torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoder, torch.nn.TransformerDecoderLayer)
#: PyTorch's multi-head and transformer kernels, as the layers above call them (refused when called directly).
_MULTI_HEAD_OPERATORS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")

#: PyTorch's own attention: its layers and functional forms, and the operators behind them (a fixed list; a
#: learner who calls ``torch.ops.aten.scaled_dot_product_attention`` or the math kernel is refused too).
TORCH_ATTENTION = _torch_entry_points(
    _TORCH_LAYERS, (F.multi_head_attention_forward, F.scaled_dot_product_attention),
    ("scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
     "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
     *_MULTI_HEAD_OPERATORS))

#: PyTorch's multi-head attention only: where one head's attention step (an SDPA) is allowed (exercise 5.6).
TORCH_MULTI_HEAD = _torch_entry_points(_TORCH_LAYERS, (F.multi_head_attention_forward,), _MULTI_HEAD_OPERATORS)


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
    watched object's ``__call__`` written in Python (a ``torch.ops`` operator: the call's ``self`` is watched)."""

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_name == "__call__" and watched.name(frame.f_locals.get("self")):
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
