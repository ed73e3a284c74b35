"""Watching a forward pass: a module's intermediates, handed to whoever asked, like PyTorch's hooks.

``handle = layer.add_observer(fn)`` calls ``fn(layer, intermediates)`` after each forward pass, with
``intermediates`` the dict that ``return_intermediates=True`` returns; ``handle.remove()`` stops it, and
``with layer.add_observer(fn): ...`` watches for the block only. :func:`attn_helpers.shape_trace` uses this.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

__all__ = ["Intermediates", "Observer", "Traceable"]

Intermediates = dict[str, Tensor]
Observer = Callable[[nn.Module, Intermediates], None]


class Traceable(nn.Module):
    """A module whose forward pass ends with ``self.notify_observers(inter)``; ``AXES`` names the axes of
    every intermediate (``"batch tokens chan"``), in the order the forward pass makes them."""

    AXES: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self._observers: OrderedDict[int, Observer] = OrderedDict()  # handle id -> observer, as torch's hooks

    def add_observer(self, observer: Observer) -> RemovableHandle:
        """Call ``observer(module, intermediates)`` after each forward pass until the handle's ``remove()``."""
        if not callable(observer):
            raise TypeError(f"observer must be callable as observer(module, intermediates), got {type(observer).__name__}")
        handle = RemovableHandle(self._observers)
        self._observers[handle.id] = observer
        return handle

    def notify_observers(self, inter: Intermediates) -> None:
        """Hand this forward pass's intermediates to every observer, oldest first."""
        for observer in list(self._observers.values()):
            observer(self, inter)

    def _report(self, inter: Intermediates, return_intermediates: bool):
        """Notify the observers; return ``inter["out"]``, or ``(inter["out"], inter)`` when asked."""
        self.notify_observers(inter)
        return (inter["out"], inter) if return_intermediates else inter["out"]
