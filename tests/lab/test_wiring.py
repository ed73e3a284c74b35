"""attn_helpers.lab.wiring: lesson 06's three skip wirings, the one definition AttentionStack and
TinyAttentionModel both use."""

from __future__ import annotations

import pytest
import torch

from attn_helpers.lab import SKIP_KINDS, AttentionStack, TinyAttentionModel, check_wiring, next_hidden, local_random


def test_next_hidden_adds_what_each_wiring_says():
    x, projected, v = torch.full((1, 2, 3), 1.0), torch.full((1, 2, 3), 10.0), torch.full((1, 2, 3), 100.0)
    out = projected + v  # what walkthrough 000's layer returns
    assert torch.equal(next_hidden("identity", x, out, projected), x + projected)
    assert torch.equal(next_hidden("values", x, out, projected), out)
    assert torch.equal(next_hidden("none", x, out, projected), projected)
    assert SKIP_KINDS == ("identity", "values", "none")


def test_check_wiring_names_the_argument():
    assert check_wiring("values") == "values"
    with pytest.raises(ValueError, match=r"wiring must be one of \['identity', 'values', 'none'\], got 'residual'"):
        check_wiring("residual")
    with pytest.raises(ValueError, match=r"wiring must be one of \['identity', 'values', 'none'\], got 'x'"):
        TinyAttentionModel(5, 3, 4, wiring="x")
    stack = AttentionStack(1, 4, 4)
    stack.wiring = "x"
    with pytest.raises(ValueError, match="wiring must be one of"):
        stack(torch.ones(1, 2, 4))


@pytest.mark.parametrize("wiring", SKIP_KINDS)
def test_the_stack_and_the_tiny_model_join_their_layers_the_same_way(wiring):
    """One layer of TinyAttentionModel (before its read-out) is one layer of AttentionStack with the same weights."""
    with local_random(0):
        model = TinyAttentionModel(5, 3, 4, dim=8, num_heads=2, wiring=wiring, position_scheme="none").double()
        stack = AttentionStack(1, 8, 8, num_heads=2, wiring=wiring).double()
    stack.layers[0].load_state_dict(model.layers[0].state_dict())
    tokens = torch.tensor([[0, 3, 1, 4]])
    with torch.no_grad():
        _, layers = model(tokens, return_intermediates=True)
        torch.testing.assert_close(stack(model.embed(tokens)), layers[0]["hidden"])
