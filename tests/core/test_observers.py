"""attn_helpers.core.layers' Traceable: the one public way to watch a module's intermediates (shape_trace uses it)."""

from __future__ import annotations

import pytest
import torch

from attn_helpers.core import (Attention, GroupedQueryAttention, MultiHeadAttention, RotaryAttention, Traceable,
                               TransformerBlock)


def test_an_observer_sees_the_intermediates_that_return_intermediates_gives_until_removed():
    layer = Attention(6, 8, num_heads=2)
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(0))
    seen: list[tuple[torch.nn.Module, dict]] = []
    handle = layer.add_observer(lambda module, inter: seen.append((module, inter)))
    out, inter = layer(x, return_intermediates=True)
    assert len(seen) == 1 and seen[0][0] is layer and list(seen[0][1]) == list(inter)
    assert all(seen[0][1][name] is inter[name] for name in inter)
    handle.remove()
    layer(x)
    assert len(seen) == 1


def test_observers_are_called_oldest_first_and_a_with_block_removes_its_own():
    layer = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(1))
    calls: list[str] = []
    first = layer.add_observer(lambda module, inter: calls.append("first"))
    with layer.add_observer(lambda module, inter: calls.append("second")):
        layer(x)
    layer(x)
    first.remove()
    layer(x)
    assert calls == ["first", "second", "first"]


@pytest.mark.parametrize("module, x", [
    (RotaryAttention(6, 8, num_heads=2), torch.zeros(1, 3, 6)),
    (GroupedQueryAttention(8, 4, 2), torch.zeros(1, 3, 8)),
    (TransformerBlock(8, 2, 16, dropout=0.0), torch.zeros(1, 3, 8)),
], ids=lambda m: type(m).__name__ if isinstance(m, torch.nn.Module) else "")
def test_every_core_layer_reports_each_intermediate_named_in_its_axes(module, x):
    assert isinstance(module, Traceable)
    seen: list[list[str]] = []
    with module.add_observer(lambda mod, inter: seen.append(list(inter))):
        module(x)
    assert seen and set(seen[0]) <= set(type(module).AXES) and seen[0][-1] == "out"


def test_add_observer_rejects_what_cannot_be_called():
    with pytest.raises(TypeError, match=r"observer must be callable as observer\(module, intermediates\), got int"):
        Attention(4, 4).add_observer(3)
