"""Typical wrong answers for the exercises of 07 · The complete layer (used by tests/test_exercises.py).

The checkers' other verdicts are tested in tests/test_checks_07.py.
"""

WRONG_ANSWERS = {
    # the shape right after the reshape, before permute(2, 0, 3, 1, 4)
    "7.1": ("answer = (B, N, 3, 8, chan // 8)", "permute(2, 0, 3, 1, 4)"),
    # the four weight matrices without their biases
    "7.2": ("answer = 4 * d_feat * d_feat", "also has a bias"),
    # seed 004's bug: the layer's width instead of the head's
    "7.3": ("answer = 1 / math.sqrt(d_feat)", "not d_model"),
    # two of the three buggy lines: the unused dropout argument is missed
    "7.4": ("answer = {5, 13}", "every argument of __init__"),
}
