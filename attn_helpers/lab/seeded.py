"""The same numbers on every run: seeded draws that leave the notebook's random state as it was
(``torch.random.fork_rng``), and one math thread (one order of every sum)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["local_random", "one_thread"]


@contextmanager
def local_random(seed: int) -> Iterator[None]:
    """Lessons 09, 11 and 12: ``with local_random(seed): model = nn.Linear(4, 2)`` draws what
    ``torch.manual_seed(seed)`` then ``nn.Linear(4, 2)`` would; afterwards the global random state is what it was
    before. For CPU tensors (PyTorch's CPU generator; a GPU's generators are neither seeded nor saved)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    with torch.random.fork_rng(devices=[]):  # saves the CPU generator's state, restores it on the way out
        torch.default_generator.manual_seed(seed)
        yield


@contextmanager
def one_thread() -> Iterator[None]:
    """Lesson 08: run the block on one math thread, then restore the count: for tiny tensors extra threads only cost
    (10-30x on a busy machine), and one thread fixes the order of every sum."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
