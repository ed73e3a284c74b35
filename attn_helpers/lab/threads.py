"""One home for running many tiny tensor operations on one CPU thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["one_thread"]


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one math thread, then restore the thread count (also after an error).

    For tensors of a few hundred numbers extra threads cannot help, and on a busy machine their
    synchronisation made loops of such operations 10-30x slower. One thread also fixes the order of
    every sum, so a result does not depend on the machine's thread count.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
