"""Typical wrong answers for the exercises of 11 · Inside a real pretrained transformer (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    "11.1": ('prediction = "different"', "sets every [PAD] key's score to -inf"),
    "11.2": ("def head_dim_of(config):\n    return 32\nanswer = head_dim_of", "not as a constant for this model"),
    "11.3": ("def head_weights(weight, bias, h, num_heads):\n    return weight[h::num_heads], bias[h::num_heads]\n"
             "answer = head_weights", "contiguous block of rows"),
    "11.4": ("def keep_mask(attention_mask):\n    return (attention_mask == 0)[:, None, :]\nanswer = keep_mask",
             "True = may attend"),
}
