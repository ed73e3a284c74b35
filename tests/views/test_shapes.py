"""Tests of attn_helpers.views.shapes: named shape printouts and the shape trace of a forward pass."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_helpers.core import Attention, ConcatHeadsAttention, MultiHeadAttention
from attn_helpers.views.shapes import describe, shape_table, shape_trace, show

Q_LINE = "q: [13, 4, 100, 16]  (batch=13, H=4, tokens=100, head_dim=16)"


# --------------------------------------------------------------------------------------------
# describe / show
# --------------------------------------------------------------------------------------------

def test_describe_names_every_axis_in_the_house_format():
    q = torch.zeros(13, 4, 100, 16)
    assert describe(q, "batch H tokens head_dim", name="q") == Q_LINE


@pytest.mark.parametrize("shape", [torch.Size([13, 4, 100, 16]), (13, 4, 100, 16), [13, 4, 100, 16]])
def test_describe_accepts_a_size_or_a_tuple(shape):
    assert describe(shape, "batch H tokens head_dim", name="q") == Q_LINE


def test_describe_accepts_a_list_of_axis_names_and_no_name():
    assert describe(torch.zeros(2, 3), ["batch", "tokens"]) == "[2, 3]  (batch=2, tokens=3)"


def test_describe_of_a_scalar_has_no_axes():
    assert describe(torch.tensor(1.0), "", name="loss") == "loss: []  ()"


def test_show_prints_describe(capsys):
    show(torch.zeros(13, 4, 100, 16), "batch H tokens head_dim", name="q")
    assert capsys.readouterr().out == Q_LINE + "\n"


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 9), min_size=0, max_size=5))
def test_property_describe_lists_each_axis_once(shape):
    names = [f"a{i}" for i in range(len(shape))]
    line = describe(torch.Size(shape), names, name="t")
    assert line == f"t: {shape}  ({', '.join(f'{n}={s}' for n, s in zip(names, shape))})"


@pytest.mark.parametrize(("axes", "n_names"), [("batch tokens", 2), ("batch H tokens head_dim extra", 5)])
def test_describe_rejects_the_wrong_number_of_axis_names_naming_both(axes, n_names):
    with pytest.raises(ValueError, match=rf"axes names {n_names} dimensions \('{axes}'\) but the tensor q "
                                         r"has shape \[13, 4, 100, 16\] \(4 dimensions\)"):
        describe(torch.zeros(13, 4, 100, 16), axes, name="q")


# --------------------------------------------------------------------------------------------
# shape_table
# --------------------------------------------------------------------------------------------

def test_shape_table_aligns_names_and_leaves_unnamed_shapes_bare():
    table = shape_table({"q": torch.zeros(2, 3), "weights": torch.zeros(2, 3, 3)}, {"q": "batch tokens"})
    assert table.splitlines() == [
        "      q: [2, 3]               (batch=2, tokens=3)",
        "weights: [2, 3, 3]",
    ]


def test_shape_table_rejects_axis_names_that_do_not_fit():
    with pytest.raises(ValueError, match=r"axes\['q'\] names 2 dimensions \('a b'\) but q has shape \[2, 3, 4\] \(3 dimensions\)"):
        shape_table({"q": torch.zeros(2, 3, 4)}, {"q": "a b"})


# --------------------------------------------------------------------------------------------
# shape_trace
# --------------------------------------------------------------------------------------------

def test_shape_trace_prints_one_line_per_intermediate_in_forward_order(capsys):
    torch.manual_seed(0)
    layer = Attention(49, 64, num_heads=4)
    x = torch.randn(13, 100, 49)
    with shape_trace(layer) as lines:
        layer(x)
    printed = capsys.readouterr().out.splitlines()
    assert printed == lines
    assert lines[0] == "Attention forward pass"
    assert [line.split(":")[0].strip() for line in lines[1:]] == list(Attention.AXES)
    by_name = {line.split(":")[0].strip(): line.strip() for line in lines[1:]}
    assert by_name["q"] == "q: [13, 4, 100, 16]     (batch=13, H=4, tokens=100, head_dim=16)"
    assert by_name["qkv"] == "qkv: [13, 100, 192]       (batch=13, tokens=100, 3*chan=192)"
    assert by_name["qkv_heads"] == "qkv_heads: [3, 13, 4, 100, 16]  (qkv=3, batch=13, H=4, tokens=100, head_dim=16)"
    assert by_name["scores"] == "scores: [13, 4, 100, 100]    (batch=13, H=4, queries=100, keys=100)"
    assert by_name["out"] == "out: [13, 100, 64]        (batch=13, tokens=100, chan=64)"


def test_shape_trace_prints_labels_in_place_of_the_names_it_is_given(capsys):
    layer = Attention(8, 8, num_heads=2)
    with shape_trace(layer, labels={"q": "q_heads", "skip": "merged_v"}) as lines:
        layer(torch.zeros(1, 3, 8))
    names = [line.split(":")[0].strip() for line in lines[1:]]
    assert "q_heads" in names and "merged_v" in names and "q" not in names and "skip" not in names
    assert any(line.strip().startswith("q_heads: [1, 2, 3, 4]") for line in lines)


@pytest.mark.parametrize("module, inputs", [
    (ConcatHeadsAttention(6, 8, 2), (torch.zeros(2, 4, 6),)),
    (MultiHeadAttention(8, 2, kdim=5, vdim=3), (torch.zeros(2, 4, 8), torch.zeros(2, 6, 5), torch.zeros(2, 6, 3))),
], ids=["ConcatHeadsAttention", "MultiHeadAttention"])
def test_shape_trace_follows_every_module_in_forward_order(module, inputs):
    with shape_trace(module, printer=lambda line: None) as lines:
        module(*inputs)
    assert lines[0] == f"{type(module).__name__} forward pass"
    assert [line.split(":")[0].strip() for line in lines[1:]] == list(type(module).AXES)


def test_shape_trace_stops_after_the_context_exits():
    layer = Attention(6, 8, num_heads=2)
    printed: list[str] = []
    x = torch.zeros(2, 4, 6)
    with shape_trace(layer, printer=printed.append) as lines:
        layer(x)
        layer(x)  # each forward pass inside the context is traced
    assert len(lines) == 2 * (1 + len(Attention.AXES)) and printed == lines
    layer(x)
    assert len(lines) == 2 * (1 + len(Attention.AXES)) and printed == lines


def test_shape_trace_stops_even_when_the_forward_pass_fails():
    layer = Attention(6, 8, num_heads=2)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, dim=6\)"):
        with shape_trace(layer, printer=lambda line: None) as lines:
            layer(torch.zeros(2, 4, 7))
    layer(torch.zeros(2, 4, 6))  # after the failed pass, the trace is gone
    assert lines == []


def test_shape_trace_rejects_a_plain_linear_layer():
    with pytest.raises(TypeError, match=r"module must be one of attn_helpers' attention modules .*got Linear"):
        with shape_trace(nn.Linear(4, 4)):
            pass
