"""Typical wrong answers for the exercises of 03a · Mask conventions (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    # SDPA reproduced our output only with the keep mask
    "3.4": ('prediction = "blocked"', "which mask reproduced our output"),
    # the "True = keep" mask handed to masked_fill: it would block the past and keep the future
    "3.5": ("blocked_causal = torch.ones(n, n, dtype=torch.bool).tril()", "invert the keep mask"),
    # a multiplicative 1/0 mask added to the scores blocks nothing
    "3.6": ("additive_ex = keep_ex.float()", "blocks nothing"),
}
