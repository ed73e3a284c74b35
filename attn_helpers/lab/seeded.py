"""Seeded random draws that leave the global random state alone.

Imports torch only. A module such as ``nn.Linear`` draws its initial parameters from PyTorch's global
generator, and seeding that generator would change the random numbers of the notebook around the call.
:func:`local_random` runs a block with every random draw taken from a new ``torch.Generator`` instead:
the block draws exactly the numbers it would draw after ``torch.manual_seed(seed)``, and the global
generator is neither read nor changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["local_random"]


class _DrawFrom(TorchDispatchMode):
    """Gives every PyTorch operation that takes a ``generator`` and was given none this one instead."""

    def __init__(self, generator: torch.Generator) -> None:
        super().__init__()
        self.generator = generator

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # as measure.TensorMemoryTracker: never under torch.compile
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: D105 - PyTorch's hook
        kwargs = dict(kwargs or {})
        if not _takes_generator(func):
            # randn, rand, randint, randperm: the overload without a generator draws from the global one; its
            # twin (randn.generator, randint.low_generator) takes ours
            name = func._overloadname
            twin = getattr(func.overloadpacket, "generator" if name == "default" else f"{name}_generator", None)
            if twin is None or not _takes_generator(twin):
                return func(*args, **kwargs)
            func = twin
        if kwargs.get("generator") is None:
            kwargs["generator"] = self.generator  # a random operation: draw from the local generator
        return func(*args, **kwargs)


def _takes_generator(func) -> bool:
    return any(arg.name == "generator" for arg in func._schema.arguments)


@contextmanager
def local_random(seed: int) -> Iterator[torch.Generator]:
    """``with local_random(seed): model = nn.Linear(4, 2)`` draws what ``torch.manual_seed(seed)`` then
    ``nn.Linear(4, 2)`` would, from a new CPU generator seeded with ``seed`` (yielded); the global
    random state is untouched. For CPU tensors."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    generator = torch.Generator().manual_seed(seed)
    with _DrawFrom(generator):
        yield generator
