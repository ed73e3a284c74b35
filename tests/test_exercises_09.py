"""Typical wrong answers for the exercises of 09 · Efficient attention (used by tests/test_exercises.py)."""

WRONG_ANSWERS = {
    "9.1": ("answer = (3.0, (running_sum + torch.exp(new_block - 3.0).sum()).item())",
            "rescale it with exp(running_max - new_max)"),
    "9.2": ('answer = 2 * sizes["num_layers"] * sizes["num_heads"] * sizes["seq_len"] * sizes["head_dim"] * sizes["dtype_bytes"]',
            "use G, not H"),
    "9.3": ("answer = k_ex.repeat(1, 3, 1, 1)", "use repeat_interleave(3, dim=1)"),
}
