"""Typical wrong answers for the exercises of 06 · Output projection and skip connection
(used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    "6.1": ("answer = projected_ex + v_ex.reshape(2, 5, 8)", "transpose(1, 2) first"),
    "6.2": ("answer = [13, 100, 4, 16]", "then reshape joins the last two axes"),
    "6.3": ('answer = "a"', "both must have the same shape"),
}
