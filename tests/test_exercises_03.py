"""Typical wrong answers for the exercises of 03 · Softmax and masks (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    # every exp(-inf) is 0, so the softmax divides 0 by 0: NaN, not zeros
    "3.1": ('prediction = "zeros"', "divides 0 by 0"),
    # the words-first layout of padding_mask (section 3.4.2), but these sentences are padded on the left
    "3.2": ("keep_ex = (torch.arange(n)[None, :] < lengths_ex[:, None])[:, None, :]", "right-padded"),
    # softmax over the queries: every column sums to one instead of every row
    "3.3": ("weights_ex = torch.softmax(scores_ex, dim=-2)", "use dim=-1"),
}
