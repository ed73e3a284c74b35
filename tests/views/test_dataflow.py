"""Tests of attn_helpers/views/dataflow.py: the flows match the modules' traces, the layout puts steps that run side
by side in one row, and the picture draws one box per intermediate and one arrow per edge."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attn_helpers import Attention, MultiHeadAttention, TransformerBlock
from attn_helpers.views.dataflow import LATE, dataflow_diagram, flow_layout, traced_flow

# The oracle: each traced module's flow written by hand (what the lesson-07 picture must draw), checked
# against the edges autograd records.
FLOWS: dict[str, dict[str, tuple[str, ...]]] = {
    "Attention": {
        "x": (), "qkv": ("x",), "qkv_heads": ("qkv",),
        "q": ("qkv_heads",), "k": ("qkv_heads",), "v": ("qkv_heads",),
        "scores": ("q", "k"), "weights": ("scores",), "heads": ("weights", "v"),
        "merged": ("heads",), "projected": ("merged",), "skip": ("v",), "out": ("projected", "skip"),
    },
    "MultiHeadAttention": {
        "query": (), "key": (), "value": (),
        "q": ("query",), "k": ("key",), "v": ("value",),
        "q_heads": ("q",), "k_heads": ("k",), "v_heads": ("v",),
        "scores": ("q_heads", "k_heads"), "weights": ("scores",), "heads": ("weights", "v_heads"),
        "merged": ("heads",), "out": ("merged",),
    },
    "TransformerBlock": {
        "x": (), "normed_1": ("x",), "attended": ("normed_1",), "residual": ("x", "attended"),
        "normed_2": ("residual",), "ffn_hidden": ("normed_2",), "mlp": ("ffn_hidden",), "out": ("residual", "mlp"),
    },
}


def flow_of(module: torch.nn.Module) -> dict[str, tuple[str, ...]]:
    return FLOWS[type(module).__name__]

MODULES = [(Attention(49, 64, 4), (2, 5, 49)), (MultiHeadAttention(64, 4), (2, 5, 64)),
           (TransformerBlock(64, 4, 96), (2, 5, 64))]


@pytest.mark.parametrize("module, shape", MODULES, ids=lambda m: type(m).__name__ if isinstance(m, torch.nn.Module) else "")
def test_every_flow_names_exactly_the_traced_intermediates_in_order(module, shape):
    _, inter = module(torch.randn(*shape), return_intermediates=True)
    assert list(flow_of(module)) == list(inter) == list(module.AXES)
    flow_layout(list(inter), flow_of(module), late=LATE[type(module).__name__])  # inputs come before their users


@pytest.mark.parametrize("module, shape", MODULES, ids=lambda m: type(m).__name__ if isinstance(m, torch.nn.Module) else "")
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_the_hand_written_flows_are_the_edges_autograd_records(module, shape, training):
    """FLOWS (what the picture draws) equals the dependencies read from autograd's graph of one forward pass."""
    module.train(training)
    inputs = [torch.randn(*shape) for _ in range(3 if isinstance(module, MultiHeadAttention) else 1)]
    traced = traced_flow(module, *inputs)
    assert list(traced) == list(FLOWS[type(module).__name__])
    assert {n: set(p) for n, p in traced.items()} == {n: set(p) for n, p in FLOWS[type(module).__name__].items()}
    assert all(not t.requires_grad for t in inputs)  # the caller's tensors are untouched
    module.eval()


def test_traced_flow_lists_parents_in_forward_order_and_ignores_masks():
    layer = Attention(8, 8, 2)
    flow = traced_flow(layer, torch.randn(1, 4, 8))
    assert flow["heads"] == ("v", "weights") and flow["out"] == ("projected", "skip") and flow["x"] == ()

    class Masked(torch.nn.Module):  # the mask carries no gradient, so it adds no edge
        AXES = Attention.AXES

        def forward(self, x, return_intermediates=False):
            return layer(x, mask=torch.ones(4, 4, dtype=torch.bool).tril(), return_intermediates=return_intermediates)

    assert traced_flow(Masked(), torch.randn(1, 4, 8)) == flow


def test_traced_flow_rejects_integer_inputs():
    with pytest.raises(TypeError, match="floating-point"):
        traced_flow(Attention(8, 8, 2), torch.ones(1, 4, 8, dtype=torch.long))


def test_q_k_v_come_out_of_one_projection_side_by_side():
    where = flow_layout(list(FLOWS["Attention"]), FLOWS["Attention"], late=LATE["Attention"])
    assert where["q"][1] == where["k"][1] == where["v"][1] == where["qkv_heads"][1] + 1
    assert where["q"][0] < where["k"][0] < where["v"][0]
    assert where["scores"][1] == where["q"][1] + 1 and where["skip"][1] == where["out"][1] - 1
    assert where["projected"][1] == where["skip"][1]  # the two summands of out sit side by side


def test_block_is_one_column_with_two_residual_joins():
    where = flow_layout(list(FLOWS["TransformerBlock"]), FLOWS["TransformerBlock"])
    assert [r for _, r in where.values()] == list(range(8))
    assert len({c for c, _ in where.values()}) == 1


def test_diagram_draws_a_box_per_step_and_an_arrow_per_edge():
    module, shape = MODULES[0]
    _, inter = module(torch.randn(*shape), return_intermediates=True)
    steps = [(n, list(t.shape), module.AXES[n]) for n, t in inter.items()]
    ax = dataflow_diagram(steps, flow_of(module), late=LATE["Attention"], title="t")
    texts = [t.get_text() for t in ax.texts]
    assert texts[:len(steps)] == [f"{n}: {s}\n{a}" for n, s, a in steps]
    edges = sum(len(p) for p in FLOWS["Attention"].values())
    assert len(ax.texts) - len(steps) == edges  # every edge ends in one arrow (an annotation)
    plt.close(ax.figure)


def test_labels_rename_the_boxes_only():
    module, shape = MODULES[0]
    _, inter = module(torch.randn(*shape), return_intermediates=True)
    steps = [(n, list(t.shape), module.AXES[n]) for n, t in inter.items()]
    heads = {"q": "q_heads", "k": "k_heads", "v": "v_heads"}
    plain = dataflow_diagram(steps, flow_of(module), late=LATE["Attention"])
    named = dataflow_diagram(steps, flow_of(module), late=LATE["Attention"], labels=heads)
    texts = [t.get_text() for t in named.texts]
    assert texts[:len(steps)] == [f"{heads.get(n, n)}: {s}\n{a}" for n, s, a in steps]
    assert any(t.startswith("q_heads: ") for t in texts) and not any(t.startswith("q: ") for t in texts)
    # the same arrows: to 0.02 of a row, since matplotlib 3.10 measures a line's height from its glyphs (the '_' of
    # 'q_heads' reaches lower than 'q', and an arrow ends at its box's edge)
    arrows = [a.xy for a in named.texts[len(steps):]]
    assert np.allclose(arrows, [a.xy for a in plain.texts[len(steps):]], rtol=0, atol=0.02)
    plt.close(plain.figure)
    plt.close(named.figure)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="not in the flow: \\['extra'\\]"):
        flow_layout(["x", "extra"], {"x": ()})
    with pytest.raises(ValueError, match="names \\['nowhere'\\]"):
        flow_layout(["x"], {"x": ("nowhere",)})
    with pytest.raises(ValueError, match="come after it"):
        flow_layout(["y", "x"], {"x": (), "y": ("x",)})
    with pytest.raises(ValueError, match="has 2 dimensions but axes"):
        dataflow_diagram([("x", [2, 3], "batch")], {"x": ()})
    with pytest.raises(ValueError, match="at least one"):
        dataflow_diagram([], {})
