"""The checkers of 01 · QKV projection: verdicts beyond the exercise tests' solution, None and typical wrong answer."""

import pytest
import torch
from torch import nn

from attn_helpers import checks


# -- check_qkv_shape ----------------------------------------------------------------------------

def test_qkv_shape_accepts_lists_tuples_and_torch_sizes():
    for answer in ((4, 10, 144), [4, 10, 144], torch.Size([4, 10, 144])):
        assert checks.check_qkv_shape.judge(answer, B=4, N=10, dim=32, chan=48).ok


def test_qkv_shape_names_the_input_width_mistake():
    verdict = checks.check_qkv_shape.judge((4, 10, 96), B=4, N=10, dim=32, chan=48)
    assert not verdict.ok and "dim=32" in verdict.message


def test_qkv_shape_names_the_already_split_shape():
    verdict = checks.check_qkv_shape.judge((4, 10, 3, 48), B=4, N=10, dim=32, chan=48)
    assert not verdict.ok and "splitting" in verdict.message


def test_qkv_shape_rejects_a_non_shape_and_fractions():
    assert "list or tuple" in checks.check_qkv_shape.judge(144, B=4, N=10, dim=32, chan=48).message
    assert "whole numbers" in checks.check_qkv_shape.judge((4, 10, 144.5), B=4, N=10, dim=32, chan=48).message


def test_qkv_shape_computes_the_answer_from_its_inputs():
    assert checks.check_qkv_shape.judge((13, 100, 192), B=13, N=100, dim=49, chan=64).ok
    assert not checks.check_qkv_shape.judge((4, 10, 144), B=13, N=100, dim=49, chan=64).ok


# -- check_split_qkv: a function for any chan (exercise 1.3) -------------------------------------

def test_split_accepts_split_chunk_and_reshape():
    for fn in (lambda x: x.split(x.shape[-1] // 3, dim=-1), lambda x: x.chunk(3, dim=-1),
               lambda x: x.reshape(*x.shape[:-1], 3, x.shape[-1] // 3).unbind(-2)):
        assert checks.check_split_qkv.judge(fn).ok


@pytest.mark.parametrize("fn, words", [
    (lambda x: x.split(4, dim=-1), "a fixed number fits one width only"),  # the lesson's chan copied (round 2)
    (lambda x: x.split(3, dim=-1), "pieces `size` columns wide"),
    (lambda x: x.reshape(*x.shape[:-1], x.shape[-1] // 3, 3).unbind(-1), "interleaves the features"),
    (lambda x: x.chunk(3, dim=-1)[::-1], "belongs to v"),
    (lambda x: x, "not three tensors"),
    (torch.zeros(3), "should be a function"),
    (lambda x: x.split(x.shape[-1] // 3), "default is dim=0"),  # split's axis left out (round 6: told chan)
    (lambda x: x.chunk(3), "default is dim=0"),
    (lambda x: x.split(64, dim=-1), "a fixed number fits one width only"),  # 64 > 18: one piece (round 7: told axis)
    (lambda x: (x[:, :x.shape[-1] // 3], x[:, x.shape[-1] // 3:2 * x.shape[-1] // 3], x[:, 2 * x.shape[-1] // 3:]),
     "it cut axis 1"),  # slices that assume two axes
])
def test_split_names_each_mistake(fn, words):
    verdict = checks.check_split_qkv.judge(fn)
    assert not verdict.ok and words in verdict.message + verdict.hint, verdict


# -- check_key_layer ----------------------------------------------------------------------------

def _fused(bias=True):
    torch.manual_seed(3)
    return nn.Linear(6, 12, bias=bias)


def _copy(fused, rows, bias=True):
    layer = nn.Linear(6, 4, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(fused.weight[rows])
        if bias:
            layer.bias.copy_(fused.bias[rows])
    return layer


def test_key_layer_accepts_the_copied_key_rows():
    fused = _fused()
    assert checks.check_key_layer.judge(_copy(fused, slice(4, 8)), fused, chan=4).ok


def test_key_layer_names_value_rows_and_a_missing_bias():
    fused = _fused()
    assert "value rows" in checks.check_key_layer.judge(_copy(fused, slice(8, 12)), fused, chan=4).message
    no_bias = _copy(fused, slice(4, 8), bias=False)
    verdict = checks.check_key_layer.judge(no_bias, fused, chan=4)
    assert not verdict.ok and "bias" in verdict.hint


def test_key_layer_names_weight_rows_copied_without_the_bias():
    fused = _fused()
    layer = nn.Linear(6, 4)  # its own random bias kept (grader round 4)
    with torch.no_grad():
        layer.weight.copy_(fused.weight[4:8])
    verdict = checks.check_key_layer.judge(layer, fused, chan=4)
    assert not verdict.ok and "not of the bias" in verdict.message and "fused.bias[4:8]" in verdict.hint, verdict


def test_key_layer_names_the_query_or_value_bias_copied_with_the_key_weight():
    fused = _fused()
    for rows, word in ((slice(0, 4), "query's bias (fused.bias[0:4])"), (slice(8, 12), "value's bias (fused.bias[8:12])")):
        layer = nn.Linear(6, 4)
        with torch.no_grad():
            layer.weight.copy_(fused.weight[4:8])
            layer.bias.copy_(fused.bias[rows])  # a reader's slip (reader a2): the weight right, a neighbour's bias
        verdict = checks.check_key_layer.judge(layer, fused, chan=4)
        assert not verdict.ok and word in verdict.message and "fused.bias[4:8]" in verdict.hint, verdict
        assert "own random bias" not in verdict.hint, verdict


def test_key_layer_names_a_layer_whose_rows_were_not_copied():
    fused = _fused()
    torch.manual_seed(4)
    verdict = checks.check_key_layer.judge(nn.Linear(6, 4), fused, chan=4)  # the most literal answer (reader a3)
    assert not verdict.ok and "not copied" in verdict.message and "fused.weight[4:8]" in verdict.hint, verdict


def test_key_layer_names_rows_copied_every_third_or_out_of_order():
    fused = _fused()
    for start in range(3):  # section 1.4.1's interleaving mistake, applied to rows (reader g1)
        interleaved = nn.Linear(6, 4)
        with torch.no_grad():
            interleaved.weight.copy_(fused.weight[start::3])
            interleaved.bias.copy_(fused.bias[start::3])
        verdict = checks.check_key_layer.judge(interleaved, fused, chan=4)
        assert not verdict.ok and f"fused.weight[{start}::3]" in verdict.message, verdict
        assert "not copied" not in verdict.message and "fused.weight[4:8]" in verdict.hint, verdict
    shuffled = nn.Linear(6, 4)
    with torch.no_grad():
        shuffled.weight.copy_(fused.weight[[5, 4, 7, 6]])  # the key rows, in another order
        shuffled.bias.copy_(fused.bias[[5, 4, 7, 6]])
    verdict = checks.check_key_layer.judge(shuffled, fused, chan=4)
    assert not verdict.ok and "a row of the fused layer's" in verdict.message and "in order" in verdict.hint, verdict


def test_key_layer_without_bias_in_the_fused_layer():
    fused = _fused(bias=False)
    assert checks.check_key_layer.judge(_copy(fused, slice(4, 8), bias=False), fused, chan=4).ok


def test_key_layer_rejects_other_objects_and_widths():
    fused = _fused()
    assert "nn.Linear" in checks.check_key_layer.judge(fused.weight[4:8], fused, chan=4).message
    assert "6 -> 4" in checks.check_key_layer.judge(nn.Linear(6, 12), fused, chan=4).message


def test_key_layer_does_not_touch_the_global_random_state():
    fused = _fused()
    layer = _copy(fused, slice(4, 8))
    state = torch.random.get_rng_state()
    checks.check_key_layer.judge(layer, fused, chan=4)
    assert torch.equal(state, torch.random.get_rng_state())


# -- check_weight_shape_prediction ------------------------------------------------------------------

def test_weight_shape_prediction_accepts_out_by_in():
    assert checks.check_weight_shape_prediction.judge((192, 49), nn.Linear(49, 192)).ok


def test_weight_shape_prediction_rejects_other_shapes_and_non_shapes():
    verdict = checks.check_weight_shape_prediction.judge((64, 49), nn.Linear(49, 192))
    assert not verdict.ok and "one row per output" in verdict.hint
    assert not checks.check_weight_shape_prediction.judge("192x49", nn.Linear(49, 192)).ok
