"""Typical wrong answers for the exercises of 03 · Softmax and masks (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    # the "True = keep" mask handed to masked_fill: it would block the past and keep the future
    "3.1": ("blocked_causal = torch.ones(n, n, dtype=torch.bool).tril()", "invert the keep mask"),
    # softmax over the queries: every column sums to one instead of every row
    "3.2": ("weights_ex = torch.softmax(scores_ex, dim=-2)", "use dim=-1"),
    # a multiplicative 1/0 mask added to the scores blocks nothing
    "3.3": ("additive_ex = keep.float()", "blocks nothing"),
}
