"""Typical wrong answers for the exercises of 08 · Watch attention learn
(used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    "8.1": ("answer = torch.eye(6).roll(1, dims=1)", "one step to the LEFT"),
    "8.2": ("answer = (weights10 * ideal).mean(dim=(-2, -1))", "sum over the keys"),
    "8.3": ('answer = "no scaling"', "lowest final accuracy"),
}
