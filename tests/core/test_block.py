"""Tests of attn_helpers/core/layers.py: the pre-LayerNorm TransformerBlock against PyTorch's own
``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)``, its shape trace and its errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_helpers import TransformerBlock, causal_mask, shape_trace


def _torch_layer(d_model, num_heads, dim_feedforward, activation="relu", bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward, dropout=0.1, activation=activation,
                                      batch_first=True, norm_first=True, bias=bias).eval()


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 3), N=st.integers(1, 9), head_dim=st.integers(1, 6), num_heads=st.integers(1, 4),
       dim_feedforward=st.integers(1, 24), activation=st.sampled_from(["relu", "gelu"]), bias=st.booleans(),
       causal=st.booleans(), seed=st.integers(0, 2**16))
def test_block_equals_torch_encoder_layer_with_copied_weights(B, N, head_dim, num_heads, dim_feedforward, activation,
                                                              bias, causal, seed):
    d_model = head_dim * num_heads
    ref = _torch_layer(d_model, num_heads, dim_feedforward, activation, bias, seed)
    block = TransformerBlock.from_torch(ref)
    x = torch.randn(B, N, d_model, generator=torch.Generator().manual_seed(seed))
    keep = causal_mask(N) if causal else None
    ours = block(x, mask=keep)
    theirs = ref(x, src_mask=None if keep is None else ~keep)  # PyTorch: True = blocked
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(d_model=st.sampled_from([4, 8, 12]), num_heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_to_torch_gives_the_same_outputs_in_float64(d_model, num_heads, seed):
    torch.manual_seed(seed)
    block = TransformerBlock(d_model, num_heads, dim_feedforward=16).double().eval()
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    torch.testing.assert_close(block(x), block.to_torch()(x), atol=1e-12, rtol=1e-12)


def test_block_with_padding_mask_equals_torch():
    ref = _torch_layer(16, 4, 32)
    block = TransformerBlock.from_torch(ref)
    x = torch.randn(3, 6, 16)
    lengths = torch.tensor([6, 4, 2])
    pad_blocked = torch.arange(6)[None, :] >= lengths[:, None]  # (B, N), True = padding
    ours = block(x, mask=~pad_blocked[:, None, :])  # (B, 1, N) keep mask, broadcast over the queries
    theirs = ref(x, src_key_padding_mask=pad_blocked)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_eval_mode_ignores_dropout_and_train_mode_applies_it():
    torch.manual_seed(0)
    block = TransformerBlock(16, 4, 32, dropout=0.5)
    plain = TransformerBlock(16, 4, 32, dropout=0.0)
    plain.load_state_dict(block.state_dict())
    x = torch.randn(2, 5, 16)
    block.eval(), plain.eval()
    torch.testing.assert_close(block(x), plain(x))
    block.train()
    assert (block(x) - plain(x)).abs().max() > 1e-3


def test_from_torch_keeps_training_mode_and_sizes():
    ref = nn.TransformerEncoderLayer(8, 2, 12, batch_first=True, norm_first=True)  # training mode
    block = TransformerBlock.from_torch(ref)
    assert block.training and block.attention.training
    assert (block.d_model, block.num_heads, block.head_dim, block.dim_feedforward) == (8, 2, 4, 12)
    assert sum(p.numel() for p in block.parameters()) == sum(p.numel() for p in ref.parameters())


def test_shape_trace_names_every_intermediate():
    block = TransformerBlock(8, 2, dim_feedforward=12)
    lines: list[str] = []
    with shape_trace(block, printer=lines.append):
        block(torch.randn(3, 5, 8))
    assert lines[0] == "TransformerBlock forward pass"
    assert [line.split(":")[0].strip() for line in lines[1:]] == list(TransformerBlock.AXES)
    assert "hidden: [3, 5, 12]" in lines[6] and "dim_feedforward=12" in lines[6]


@pytest.mark.parametrize("kwargs, words", [
    (dict(d_model=10, num_heads=3), "d_model=10 is not divisible by num_heads=3"),
    (dict(d_model=0, num_heads=1), "d_model"),
    (dict(d_model=8, num_heads=2, dim_feedforward=0), "dim_feedforward"),
    (dict(d_model=8, num_heads=2, dropout=1.0), "dropout"),
    (dict(d_model=8, num_heads=2, activation="tanh"), "activation"),
])
def test_bad_arguments_are_named(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        TransformerBlock(**kwargs)


def test_bad_inputs_name_the_argument_and_shape():
    block = TransformerBlock(8, 2, 12)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, d_model=8\), got \[2, 5, 6\]"):
        block(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="x"):
        block(torch.randn(5, 8))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        block([[0.0] * 8])
    with pytest.raises(TypeError, match="floating-point"):
        block(torch.ones(2, 5, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="mask"):
        block(torch.randn(2, 5, 8), mask=torch.ones(4, 4, dtype=torch.bool))


def test_from_torch_rejects_post_norm_and_sequence_first_layers():
    with pytest.raises(ValueError, match="norm_first=True"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 12, batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 12, norm_first=True))
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        TransformerBlock.from_torch(nn.Linear(8, 8))
