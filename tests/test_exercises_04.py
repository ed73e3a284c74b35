"""Typical wrong answers for the exercises of 04 · Weighted values and cross-attention
(used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    # the weights transposed: column i instead of row i mixes the values
    "4.1": ("out_ex = attn.transpose(-2, -1) @ v", "without a transpose"),
    # one output per key instead of one per query
    "4.2": ("out_shape = (2, 11, 5)", "one output per QUERY"),
    # column 3 of the weights: how much every query looks at key 3
    "4.3": ("row_3 = (attn[0, :, 3, None] * v[0]).sum(dim=0)", "ROW 3"),
}
