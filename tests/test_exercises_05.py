"""Typical wrong answers for the exercises of 05 · Multi-head reshaping (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    "5.1": ("answer = x_ex.reshape(2, H_ex, 4, 6 // H_ex)", "first split the last axis"),
    "5.2": ("answer = heads_ex.reshape(2, 4, 6)", "first transpose(1, 2)"),
    "5.3": ('answer = {"head_dim": 8, "qkv_heads": [3, 13, 6, 100, 8], "scores": [13, 6, 100, 100]}',
            "not the input width dim=49"),
    "5.4": ('answer = "a"', "split the last axis first"),
}
