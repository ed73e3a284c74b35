"""The typical wrong answer of every "check yourself" exercise, one lesson per entry.

``WRONG_ANSWERS[prefix][exercise id] = (code that replaces the exercise's ``<name> = None`` line, a piece
of the hint the checker must print for it)``, or a list of such pairs when an exercise has several typical
mistakes, each with its own hint; the prefix is the notebook's (``03a`` for the appendix).
``tests/notebooks/test_exercises.py`` runs each one, with the exercise's hidden solution and with ``None``.
"""

WRONG_ANSWERS: dict[str, dict[str, tuple[str, str] | list[tuple[str, str]]]] = {
    # 00 · Orientation
    "00": {
        # the query's own key points its way, but a longer key has the larger dot product
        "0.1": ('prediction = "cat"', "compare the norms"),
        "0.2": [("answer = [8, 20, 2, 20]", "heads come before the tokens"),
                # int(8.7) = 8 passed once; a size is a whole number
                ("answer = [8.7, 2, 20, 20]", "whole numbers only")],
        "0.3": [
            # divided by sqrt(N), the number of tokens: the checker's inputs have N != d_k
            ("def my_weights(x):\n"
             "    return torch.softmax(x @ x.mT / math.sqrt(x.shape[0]), dim=-1)\n"
             "answer = my_weights", "not x.shape[0]"),
            # divided by d_k itself: on an input with d_k = sqrt(N) this was once told "sqrt(N)"
            ("def my_weights(x):\n"
             "    return torch.softmax(x @ x.mT / x.shape[-1], dim=-1)\n"
             "answer = my_weights", "not by d_k itself"),
            # PyTorch's flex attention with the identity as values returns the weights themselves (a reader passed)
            ("from torch.nn.attention.flex_attention import flex_attention\n"
             "def my_weights(x):\n"
             "    return flex_attention(x[None, None], x[None, None], torch.eye(x.shape[0])[None, None])[0, 0]\n"
             "answer = my_weights", "torch.nn.attention.flex_attention.flex_attention"),
        ],
    },
    # 01 · QKV projection
    "01": {
        # the weight written as (in, out): nn.Linear stores (out_features, in_features)
        "1.1": ("prediction = (49, 192)", "(out_features, in_features)"),
        "1.2": ("answer = (4, 10, 48)", "3 × chan wide"),
        # the lesson's chan = 4 written in: the checker's inputs have other widths
        "1.3": [("answer = lambda qkv: qkv.split(4, dim=-1)", "a fixed number fits one width only"),
                # split's axis left out: split cuts axis 0 by default
                ("answer = lambda qkv: qkv.split(qkv.shape[-1] // 3)", "their default is dim=0"),
                # a fixed size wider than the input's last axis: one piece comes back (round 7: told "axis 0")
                ("answer = lambda qkv: qkv.split(64, dim=-1)", "a fixed number fits one width only")],
        "1.4": [(
            "to_k_ex = nn.Linear(6, 4)\n"
            "with torch.no_grad():\n"
            "    to_k_ex.weight.copy_(fused_ex.weight[0:4])\n"
            "    to_k_ex.bias.copy_(fused_ex.bias[0:4])\n"
            "answer = to_k_ex",
            "the keys are the second block",
        ),
            # the key rows of the weight but the query's bias: once told "its own random bias"
            ("to_k_ex = nn.Linear(6, 4)\n"
             "with torch.no_grad():\n"
             "    to_k_ex.weight.copy_(fused_ex.weight[4:8])\n"
             "    to_k_ex.bias.copy_(fused_ex.bias[0:4])\n"
             "answer = to_k_ex",
             "the bias needs the key rows too")],
    },
    # 02 · Scores and scaling
    "02": {
        # the softmax of a spread-out row puts more weight on its largest entry, not less
        "2.1": ('prediction = "falls"', "more of its weight on its largest entry"),
        # divided by sqrt(N_k): in k_t (..., d_k, N_k) the last axis is the keys
        "2.2": ("answer = lambda q, k_t: q @ k_t / math.sqrt(k_t.shape[-1])", "in k_t the last axis is the keys"),
        "2.3": [
            # right for unit-variance entries, not for these
            ("answer = 72", "variances 0.5 and 0.3"),
            # the two variances added, not multiplied (with 0.5 and 0.5 this gave 72 as well)
            ("answer = 72 * (0.5 + 0.3)", "you added the two variances"),
        ],
        # 0 * log(0) = nan where a weight is exactly 0
        "2.4": [("answer = lambda w: -(w * torch.log(w)).sum(dim=-1)", "count those terms as 0"),
                # a cross-entropy of w with itself is its entropy, 0 * log(0) counted as 0 (a reader passed)
                ("import torch.nn.functional as F\n"
                 "answer = lambda w: F.cross_entropy(w.clamp_min(1e-30).log().reshape(-1, w.shape[-1]),"
                 " w.reshape(-1, w.shape[-1]), reduction='none').reshape(w.shape[:-1])",
                 "torch.nn.functional.cross_entropy")],
    },
    # 03 · Softmax and masks
    "03": {
        # the row's max is -inf too, so s - max is NaN before any exp: NaN, not zeros
        "3.1": ('prediction = "zeros"', "-inf - (-inf)"),
        # the words-first layout of padding_mask (section 3.4.2), but these sentences are padded on the left
        "3.2": ("answer = lambda lengths, n: (torch.arange(n)[None, :] < lengths[:, None])[:, None, :]",
                "right-padded"),
        # the lesson's dim=-1 copied: for keys-first scores that is the queries
        "3.3": ("answer = lambda scores_t: torch.softmax(scores_t, dim=-1)", "so softmax(dim=-2)"),
    },
    # 03a · Mask conventions
    "03a": {
        # SDPA reproduced our output only with the keep mask
        "3.4": ('prediction = "blocked"', "which mask reproduced our output"),
        # the plain causal mask (round 3: it passed the old exercise); the window is ignored
        "3.5": [("answer = lambda n, w: ~causal_mask(n)", "j <= i - window"),
                # the window's far edge only: the future stays visible
                ("answer = lambda n, w: torch.arange(n)[None, :] <= torch.arange(n)[:, None] - w",
                 "block the future, j > i, as well"),
                # the w keys before the query, but not the query itself
                ("answer = lambda n, w: (torch.arange(n)[None, :] >= torch.arange(n)[:, None])"
                 " | (torch.arange(n)[None, :] < torch.arange(n)[:, None] - w)",
                 "the query's own key included")],
        # a multiplicative 1/0 mask added to the scores blocks nothing
        "3.6": [("answer = lambda blocked, dtype: blocked.to(dtype)", "blocks nothing"),
                # PyTorch's internal mask converter, which nn.MultiheadAttention calls (a reader passed)
                ("answer = lambda blocked, dtype: F._canonical_mask(mask=blocked, mask_name='m', other_type=None,"
                 " other_name='', target_type=dtype)", "PyTorch's internal mask converter")],
        # section 3a.2's line for a keep mask, copied: this mask is in the blocked convention
        # (the harness keeps one case per exercise, so this one is covered in tests/checks/test_masking.py)
    },
    # 04 · Weighted values and cross-attention
    "04": {
        # one output per key instead of one per query
        "4.1": ("prediction = (3, 50, 256)", "one output per QUERY"),
        # the scores not divided by sqrt(d_k)
        "4.2": [(
            "def my_attention(q, k, v, mask=None):\n"
            "    scores = q @ k.mT\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    return torch.softmax(scores, dim=-1) @ v\n"
            "attention_fn = my_attention",
            "math.sqrt(d_k)",
        ), (  # divided by the square root of the number of keys
            "def my_attention(q, k, v, mask=None):\n"
            "    scores = q @ k.mT / math.sqrt(k.shape[-2])\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    return torch.softmax(scores, dim=-1) @ v\n"
            "attention_fn = my_attention",
            "not axis -2",
        ), (  # PyTorch's flex attention, the mask as a score_mod (a reader passed)
            "from torch.nn.attention.flex_attention import flex_attention\n"
            "def my_attention(q, k, v, mask=None):\n"
            "    shape = q.shape[:-2]\n"
            "    q4, k4, v4 = (t.reshape(-1, 1, *t.shape[-2:]) for t in (q, k, v))  # (B, 1, N, d)\n"
            "    mod = None\n"
            "    if mask is not None:\n"
            "        m = mask.expand(*shape, q.shape[-2], k.shape[-2]).reshape(-1, q.shape[-2], k.shape[-2])\n"
            "        mod = lambda s, b, h, i, j: s.where(m[b, i, j], float('-inf'))\n"
            "    out = flex_attention(q4, k4, v4, score_mod=mod)\n"
            "    return out.reshape(*shape, q.shape[-2], v.shape[-1])\n"
            "attention_fn = my_attention",
            "torch.nn.attention.flex_attention.flex_attention",
        )],
        "4.3": [
            # the plain average of all six values, not the midpoint of two
            ("w_ex = torch.ones(6) / 6", "every other key needs weight 0"),
            # one end of the segment: all the weight on "cat"
            ("w_ex = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])", "weight on both of them"),
            # both keys, unequal shares
            ("w_ex = torch.tensor([0.0, 0.3, 0.0, 0.0, 0.0, 0.7])", "both values count equally"),
            # counted from 1: "the" (key 0) and the second "the" (key 4)
            ("w_ex = torch.tensor([0.5, 0.0, 0.0, 0.0, 0.5, 0.0])", "keys are counted from 0"),
        ],
    },
    # 05 · Multi-head reshaping
    "05": {
        # "the same weights give the same layer": four softmaxes are not one
        "5.1": ('prediction = "same"', "its own softmax over its own"),
        # reshaped straight to (B, H, N, head_dim): each head gets pieces of several tokens
        "5.2": ("def my_split(x, num_heads):\n"
                "    B, N, chan = x.shape\n"
                "    return x.reshape(B, num_heads, N, chan // num_heads)\n"
                "answer = my_split", "first split the last axis"),
        # flattened without moving the heads axis back
        "5.3": ("answer = lambda heads: heads.reshape(heads.shape[0], heads.shape[2], -1)", "first transpose(1, 2)"),
        # head_dim from the input width: dim // num_heads = 49 // 8
        "5.4": ('answer = lambda B, N, dim, chan, num_heads: {"head_dim": dim // num_heads, '
                '"qkv_heads": [3, B, num_heads, N, dim // num_heads], "scores": [B, num_heads, N, N]}',
                "not the input width dim"),
        "5.5": [('answer = "a"\nmixes_sequences = "e"', "split the last axis first"),
                # transposed before splitting: the hint names the order, not reshape (which would be (d))
                ('answer = "c"\nmixes_sequences = "e"', "it transposes before it splits"),
                # the lesson's reshape, then a permute that swaps the sequences and the heads (B = num_heads hides it)
                ('answer = "e"\nmixes_sequences = "e"', "only because B = num_heads = 2"),
                # the right split, the second part left out: both letters are needed
                ('answer = "b"', "mixes_sequences is still None"),
                # second part: (a)'s view has the right shape, but its first axis is still the batch axis
                ('answer = "b"\nmixes_sequences = "a"', "(a): it gives [2, 2, 5, 4], and each [b, ...] of it holds sequence b's"),
                # second part: (d) transposes, but tokens and features, not the batch axis
                ('answer = "b"\nmixes_sequences = "d"', "its first axis is still the batch axis B")],
        # walkthrough 004's bug: every head's scores divided by sqrt(chan), the full width
        "5.6": (
            "def multi_head(q, k, v, num_heads):\n"
            "    B, N, chan = q.shape\n"
            "    q_heads, k_heads, v_heads = (t.reshape(B, N, num_heads, -1).transpose(1, 2) for t in (q, k, v))\n"
            "    weights = torch.softmax(q_heads @ k_heads.mT / math.sqrt(chan), dim=-1)\n"
            "    return (weights @ v_heads).transpose(1, 2).reshape(B, N, chan)\n"
            "answer = multi_head",
            "divide by sqrt(head_dim)",
        ),
    },
    # 06 · Output projection and skip connection
    "06": {
        # "stays": the residual's I passes the gradient on, but the other term adds to it
        "6.1": ('prediction = "stays"', "the tables below show it depth by depth"),
        "6.2": [("answer = lambda v_heads, projected: projected + v_heads.reshape(projected.shape)", "transpose(1, 2) first"),
                # the library's merge: the exercise is then one "+" (reader b3: it passed)
                ("from attn_helpers import merge_heads as join\n"
                 "answer = lambda v_heads, projected: projected + join(v_heads)", "the exercise asks you to write it")],
        # always the first layer, whatever layer is asked for
        "6.3": [("answer = lambda stack, x, L, layer: torch.sqrt(sum(g.pow(2).sum() for g in torch.autograd.grad("
                 "stack(x, depth=L).norm(), list(stack.layers[0].parameters())))).item()", "stack.layers[layer - 1]"),
                # L ignored: the whole stack runs, whatever depth is asked for
                ("answer = lambda stack, x, L, layer: torch.sqrt(sum(g.pow(2).sum() for g in torch.autograd.grad("
                 "stack(x).norm(), list(stack.layers[layer - 1].parameters())))).item()", "pass L to the stack")],
        "6.4": [('answer = "a"', "both must have the same shape"),
                # to_chan(x), the lesson's skip, with the tokens reversed: the right shape, another token's input
                ('answer = "c"', "token 0 gets token 4's input")],
    },
    # 07 · The complete layer
    "07": {
        # the features read as (H, 3, head_dim) instead of (3, H, head_dim)
        "7.1": ("answer = lambda part, b, h, n, e, chan, num_heads: (b, n, h * 3 * (chan // num_heads) "
                "+ part * (chan // num_heads) + e)", "(3, H, head_dim)"),
        # the four matrices without their biases
        "7.2": ("answer = lambda d_model, num_heads: 4 * d_model * d_model", "also has a bias"),
        # dropout only zeroes attention weights, it does not rescale the rest
        "7.3": ('prediction = "unchanged"', "divides the rest by 1 - p"),
        # walkthrough 004's bug: every head's scores scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)
        "7.4": (
            "class MyMultiHeadAttention(nn.Module):\n"
            "    def __init__(self, d_model, num_heads):\n"
            "        super().__init__()\n"
            "        self.num_heads = num_heads\n"
            "        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)\n"
            "        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)\n"
            "    def forward(self, x):\n"
            "        B, N, d_model = x.shape\n"
            "        q, k, v = (p(x).reshape(B, N, self.num_heads, -1).transpose(1, 2)\n"
            "                   for p in (self.q_proj, self.k_proj, self.v_proj))\n"
            "        weights = (q @ k.transpose(-2, -1) / math.sqrt(d_model)).softmax(dim=-1)\n"
            "        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, N, d_model))\n"
            "answer = MyMultiHeadAttention",
            "scale by head_dim ** -0.5",
        ),
        # two of the three buggy lines: the unused dropout argument is missed
        "7.5": [("answer = {5, 13}", "every argument of __init__"),
                # a fine line flagged: it is explained, and the missed bug's hint given
                ("answer = {5, 13, 15}", "line 15 holds no bug"),
                # one bug found: the other two bugs' hints, not the found one's
                ("answer = {13}", "try qk_scale=0.0")],
    },
    # 08 · Watch attention learn
    "08": {
        # "the other head covers for it": but head 1 alone answers only about two thirds
        "8.1": ('prediction = "same"', "removing the other would change little"),
        "8.2": ("def previous_token_pattern(n):\n"
                "    return torch.eye(n).roll(1, dims=1)\n"
                "answer = previous_token_pattern", "one step to the LEFT"),
        # averaged over every row: right on the previous token, wrong on a lookup's pair rows (no target)
        "8.3": [("def match(weights, ideal):\n"
                 "    return (weights * ideal).sum(dim=-1).mean(dim=-1)\n"
                 "answer = match", "rows with a target only"),
                # summed over the queries instead of the keys
                ("def match(weights, ideal):\n"
                 "    return (weights * ideal).sum(dim=-2)[:, ideal.sum(dim=-1) > 0].mean(dim=-1)\n"
                 "answer = match", "sum over the keys (dim=-1)")],
        # the head's features zeroed after the output projection, which mixes every head into every feature
        "8.4": (
            "def without_head(model, tokens, layer, head):\n"
            "    x = model.embed(tokens) + model.position.weight\n"
            "    for index, attention in enumerate(model.layers):\n"
            "        _, inter = attention(x, return_intermediates=True)\n"
            "        projected = inter['projected'].clone()\n"
            "        if index == layer:\n"
            "            d = attention.head_dim\n"
            "            projected[..., head * d:(head + 1) * d] = 0.0\n"
            "        x = x + projected\n"
            "    return model.readout(x)\n"
            "answer = without_head",
            "proj mixes every head",
        ),
    },
    # 09 · Efficient attention
    "09": {
        # t squared: as if the cached step were free instead of one query meeting all t keys
        "9.1": ("prediction = 1024 ** 2", "the ratio of the two is t, not t²"),
        # the old weighted sum not rescaled when the max rises (the old sum is); reader r05c's two-pass softmax
        # over blocks kept in a list cannot be written as a fold, which sees one block and returns the state
        "9.2": ("def fold(state, block):\n"
                "    m, l, acc = state\n"
                "    s, v = block\n"
                "    m_new = torch.maximum(m, s.max())\n"
                "    p = torch.exp(s - m_new)\n"
                "    return m_new, l * torch.exp(m - m_new) + p.sum(), acc + p @ v\n"
                "answer = fold", "rescale it by the same"),
        # the query heads counted instead of the key/value heads
        "9.3": ("def cache_bytes(num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes):\n"
                "    return 2 * num_layers * num_heads * seq_len * (chan // num_heads) * dtype_bytes\n"
                "answer = cache_bytes", "only the key/value heads are cached"),
        # repeat tiles the heads (0, 1, 0, 1, ...) instead of keeping each head's copies together
        "9.4": ("def repeat_heads(k, num_heads):\n"
                "    return k.repeat(1, num_heads // k.shape[1], 1, 1)\n"
                "answer = repeat_heads", "use repeat_interleave(3, dim=1)"),
        # no prefill: the loop starts from the prompt's last token only
        "9.5": [("def generate_with_cache(model, prompt, num_new):\n"
                 "    cache = KVCache(max_tokens=prompt.shape[1] + num_new)\n"
                 "    tokens, newest = prompt, prompt[:, -1:]\n"
                 "    for _ in range(num_new):\n"
                 "        newest = model.step(newest, cache)[:, -1].argmax(dim=-1, keepdim=True)\n"
                 "        tokens = torch.cat([tokens, newest], dim=1)\n"
                 "    return tokens\n"
                 "answer = generate_with_cache", "the prefill: logits = model.step(prompt, cache)"),
                # a new cache every step: the whole sequence fed again into an empty cache
                ("def generate_with_cache(model, prompt, num_new):\n"
                 "    tokens = prompt\n"
                 "    for _ in range(num_new):\n"
                 "        cache = KVCache(max_tokens=tokens.shape[1])\n"
                 "        newest = model.step(tokens, cache)[:, -1].argmax(dim=-1, keepdim=True)\n"
                 "        tokens = torch.cat([tokens, newest], dim=1)\n"
                 "    return tokens\n"
                 "answer = generate_with_cache", "create the cache once")],
    },
    # 10 · Positions
    "10": {
        # "a mask only hides keys, so a shuffle still only reorders": it keeps keys by slot, so each query sees another set
        "10.1": ('prediction = "reordered"', "mask keeps keys by slot"),
        # the interleaved pairing (2i with 2i + 1) where the exercise asks for the half pairing
        "10.2": [("def rope(x, positions):\n"
                  "    half = x.shape[-1] // 2\n"
                  "    angle = positions[:, None].double() * 10000.0 ** (-2 * torch.arange(half) / x.shape[-1])\n"
                  "    a, b = x[..., 0::2], x[..., 1::2]\n"
                  "    turned = [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()]\n"
                  "    return torch.stack(turned, dim=-1).flatten(-2)\n"
                  "answer = rope", "feature i goes with feature i + head_dim/2"),
                 # one sign flipped, the commonest slip in a 2x2 rotation written by hand: b' = b cos - a sin
                 ("def rope(x, positions):\n"
                  "    half = x.shape[-1] // 2\n"
                  "    angle = positions[:, None].double() * 10000.0 ** (-2 * torch.arange(half) / x.shape[-1])\n"
                  "    a, b = x[..., :half], x[..., half:]\n"
                  "    return torch.cat([a * angle.cos() - b * angle.sin(), b * angle.cos() - a * angle.sin()], dim=-1)\n"
                  "answer = rope", "the sine enters b' with a plus"),
                 # the base 1000 for θ_i
                 ("def rope(x, positions):\n"
                  "    half = x.shape[-1] // 2\n"
                  "    angle = positions[:, None].double() * 1000.0 ** (-2 * torch.arange(half) / x.shape[-1])\n"
                  "    a, b = x[..., :half], x[..., half:]\n"
                  "    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=-1)\n"
                  "answer = rope", "the base is 10000")],
        # "RoPE is relative, so a shift changes nothing": the rotated values carry their own angle into the heads
        "10.3": ("answer = set()", "turned by its own position"),
    },
    # 11 · Inside a real pretrained transformer
    "11": {
        "11.1": ('prediction = "different"', "sets every [PAD] key's score to -inf"),
        "11.2": ("def head_rows(weight, bias, h, num_heads):\n    return weight[h::num_heads], bias[h::num_heads]\n"
                 "answer = head_rows", "contiguous block of rows"),
        # the tokenizer's int64 mask with the query axis: refused by the attention functions
        "11.3": ("def keep_mask(attention_mask):\n    return attention_mask[:, None, :]\nanswer = keep_mask",
                 "refuse an integer mask"),
    },
    # 12 · Attention in today's models
    "12": {
        # "a cap only ever squashes": scores far inside (-cap, cap) barely move, and the weights with them
        "12.1": ('prediction = "both"', "tanh(t) ≈ t only while t is small"),
        # the library's top-left alignment: the newest queries sit at n_k - n_q + r, not at r
        "12.2": ("def window_mask(n_q, n_k, window):\n"
                 "    i = torch.arange(n_q)[:, None]\n"
                 "    j = torch.arange(n_k)[None, :]\n"
                 "    return (j <= i) & (j > i - window)\n"
                 "answer = window_mask", "query row r sits at position n_k - n_q + r"),
        # the sink added to the denominator as a number, not as exp(sink)
        "12.3": ("def sink_softmax(scores, sinks):\n"
                 "    e = torch.exp(scores)\n"
                 "    return e / (sinks[:, None, None] + e.sum(dim=-1, keepdim=True))\n"
                 "answer = sink_softmax", "it enters the softmax as exp(sinks[h])"),
        # Bloom's form, slope * j: equal after a causal softmax, not as a bias
        "12.4": ("def alibi(num_heads, n):\n"
                 "    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)\n"
                 "    return slopes[:, None, None] * torch.arange(n)[None, None, :].expand(num_heads, n, n)\n"
                 "answer = alibi", "Bloom's form differs from it by slope * i"),
    },
    # 13 · The cache that does not grow
    "13": {
        "13.1": [
            # K and V counted as in a multi-head cache: the latent is one vector for both
            ("def mla_cache_bytes(num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, seq_len, dtype_bytes):\n"
             "    return 2 * num_layers * seq_len * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes\n"
             "answer = mla_cache_bytes", "no factor 2"),
            # a rotary key per head: it is one vector shared by every head
            ("def mla_cache_bytes(num_layers, num_heads, kv_lora_rank, qk_rope_head_dim, head_dim, seq_len, dtype_bytes):\n"
             "    return num_layers * seq_len * (kv_lora_rank + num_heads * qk_rope_head_dim) * dtype_bytes\n"
             "answer = mla_cache_bytes", "not num_heads times")],
        # divided by the normaliser from before this token's update
        "13.2": [("def step(state, normalizer, phi_q, phi_k, v):\n"
                  "    new_state = state + phi_k[..., :, None] * v[..., None, :]\n"
                  "    out = (phi_q[..., None, :] @ new_state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True)\n"
                  "    return out, new_state, normalizer + phi_k\n"
                  "answer = step", "before you divide"),
                 # φ applied again to features the exercise hands in already mapped
                 ("def step(state, normalizer, phi_q, phi_k, v):\n"
                  "    phi_q, phi_k = F.elu(phi_q) + 1, F.elu(phi_k) + 1\n"
                  "    state = state + phi_k[..., :, None] * v[..., None, :]\n"
                  "    normalizer = normalizer + phi_k\n"
                  "    return (phi_q[..., None, :] @ state)[..., 0, :] / (phi_q * normalizer).sum(-1, keepdim=True), state, normalizer\n"
                  "answer = step", "without elu(x) + 1")],
        # S alone: the normaliser z forgotten
        "13.3": ("prediction = 64 * 64 * 4", "also keeps the normaliser z"),
        # the decay forgotten: the delta rule's transition without the gate
        "13.4": [("def transition(k, log_decay, beta):\n"
                  "    kk = k[..., :, None] * k[..., None, :]\n"
                  "    return torch.eye(k.shape[-1], dtype=k.dtype) - beta[..., None, None] * kk\n"
                  "answer = transition", "multiply the whole matrix by α_t = exp(log_decay)"),
                 # k @ k, the inner product (one number), where k kᵀ is the outer product
                 ("def transition(k, log_decay, beta):\n"
                  "    kk = k @ k\n"
                  "    return log_decay.exp() * (torch.eye(k.shape[-1], dtype=k.dtype) - beta * kk)\n"
                  "answer = transition", "k @ k is the inner product")],
        # "the delta rule adds too": both memories return the sum
        "13.5": ('prediction = ("old + new", "old + new")', "the delta rule adds k (v_new - v_old)"),
    },
    # 14 · Two heads that compose
    "14": {
        # the weight on the earlier copy itself: a duplicate-token score, not the token after the copy
        "14.1": ("def my_induction_match(weights, tokens):\n"
                 "    N = tokens.shape[1]\n"
                 "    same = tokens[:, :, None] == tokens[:, None, :]\n"
                 "    copies = (same & torch.ones(N, N, dtype=torch.bool).tril(-1)).to(weights.dtype)[:, None, None]\n"
                 "    on = (weights * copies).sum(dim=-1)\n"
                 "    rows = (copies.sum(dim=-1) > 0).to(weights.dtype)\n"
                 "    return (on * rows).sum(dim=(0, -1)) / rows.sum(dim=(0, -1))\n"
                 "answer = my_induction_match", "key j + 1, not key j"),
        # "the other heads cover for it": but the induction heads' keys need what it wrote
        "14.2": ('prediction = "same"', "which key would the induction head's query match"),
        # every position scored, also those whose next token no model can know
        "14.3": ("def knockout_loss(model, tokens, layer, head):\n"
                 "    kept_heads = torch.ones(len(model.layers), model.layers[0].num_heads)\n"
                 "    kept_heads[layer, head] = 0.0\n"
                 "    with torch.no_grad():\n"
                 "        logits = model(tokens, keep_heads=kept_heads)\n"
                 "    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)).item()\n"
                 "answer = knockout_loss", "keep only the positions lab.repeated_part(tokens) marks"),
    },
}
