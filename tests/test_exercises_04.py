"""Typical wrong answers for the exercises of 04 · Weighted values and cross-attention (used by
tests/test_exercises.py)."""

WRONG_ANSWERS = {
    # one output per key instead of one per query
    "4.1": ("prediction = (3, 50, 256)", "one output per QUERY"),
    # the scores not divided by sqrt(d_k)
    "4.2": (
        "def my_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.mT\n"
        "    if mask is not None:\n"
        "        scores = scores.masked_fill(~mask, float('-inf'))\n"
        "    return torch.softmax(scores, dim=-1) @ v\n"
        "attention_fn = my_attention",
        "math.sqrt(d_k)",
    ),
    # the plain average of all six values, not the midpoint of two
    "4.3": ("w_ex = torch.ones(6) / 6", "put 0.5 on keys 1 and 5"),
}
