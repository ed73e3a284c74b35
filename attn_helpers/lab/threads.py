"""One home for running many tiny tensor operations on one CPU thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["one_thread"]


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
