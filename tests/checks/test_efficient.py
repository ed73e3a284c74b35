"""Lesson 09's checkers (attn_helpers/checks/efficient.py): each learner's function runs on more cases than the
exercise's, each typical mistake is named, and the library's answer is refused under any name."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import KVCache, online_softmax, repeat_kv_heads
from attn_helpers.checks import (check_cache_flops_prediction, check_generate_with_cache, check_kv_cache_size,
                                 check_online_softmax_step, check_repeat_kv)
from attn_helpers.lab import TinyCausalLM, generate_greedy, kv_cache_bytes


def _random_model(seed: int = 0, vocab: int = 11) -> TinyCausalLM:
    torch.manual_seed(seed)
    return TinyCausalLM(vocab, d_model=16, num_heads=2).eval()


_SIZES = dict(num_layers=28, chan=3584, num_heads=28, num_kv_heads=4, seq_len=32768, dtype_bytes=2)


def _formula(num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes):
    return 2 * num_layers * num_kv_heads * seq_len * (chan // num_heads) * dtype_bytes


def _cache_lambda(expression):
    """A learner's cache_bytes whose body is ``expression`` (in the six parameter names)."""
    return eval(f"lambda num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes: {expression}",
                {"kv_cache_bytes": kv_cache_bytes})


_KV = kv_cache_bytes  # the library's formula under another name: the checker must still refuse it


@pytest.mark.parametrize(("answer", "ok", "says"), [
    (_formula, True, "right for three more models"),
    (_cache_lambda("2 * num_layers * num_heads * seq_len * (chan // num_heads) * dtype_bytes"), False,
     "not chan"),  # the query heads counted
    (_cache_lambda("2 * num_layers * num_kv_heads * seq_len * chan * dtype_bytes"), False, "chan // num_heads"),
    # reader j1: head_dim from the key/value heads gives the same bytes as counting the query heads; named first
    (_cache_lambda("2 * num_layers * num_kv_heads * seq_len * (chan // num_kv_heads) * dtype_bytes"), False,
     "head_dim = chan // num_kv_heads"),
    (_cache_lambda("num_layers * num_kv_heads * seq_len * (chan // num_heads) * dtype_bytes"), False,
     "keys AND values"),
    (_cache_lambda("num_layers * num_kv_heads * seq_len * (chan // num_heads) * dtype_bytes * 8"), False,
     "two things"),  # no x2 and bits: both named
    # with the exercise's float16 this gives the same number as forgetting the values: the other models tell
    (_cache_lambda("2 * num_layers * num_kv_heads * seq_len * (chan // num_heads)"), False, "left out dtype_bytes"),
    (_cache_lambda("2 * num_layers * num_kv_heads * seq_len * (chan // num_heads) * 2"), False,
     "For num_layers=12"),  # float16 hard-coded
    (lambda **sizes: 1879048192, False, "For num_layers=12"),  # the exercise's number, copied
    (_cache_lambda("kv_cache_bytes(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=chan // num_heads, "
                   "seq_len=seq_len, dtype_bytes=dtype_bytes)"), False, "calls kv_cache_bytes"),
    (lambda num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes: _KV(
        num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=chan // num_heads, seq_len=seq_len,
        dtype_bytes=dtype_bytes), False, "calls kv_cache_bytes"),  # an alias: seen at run time
    (kv_cache_bytes, False, "calls kv_cache_bytes"),
    (_KV, False, "calls kv_cache_bytes"),
    (1879048192, False, "should be a function"),
    (lambda layers: 1, False, "keep the six parameter names"),
])
def test_kv_cache_size_checker_runs_the_learners_formula_on_several_models(answer, ok, says):
    verdict = check_kv_cache_size.judge(answer, **_SIZES)
    assert verdict.ok is ok, verdict
    assert says in verdict.message + verdict.hint


@pytest.mark.parametrize(("answer", "ok", "says"), [
    (lambda k, num_heads: k.repeat_interleave(num_heads // k.shape[1], dim=1), True, "right for multi-query"),
    (lambda k, num_heads: k.repeat(1, num_heads // k.shape[1], 1, 1), False, "repeat_interleave(3, dim=1)"),
    (lambda k, num_heads: k.repeat_interleave(3, dim=1), False, "from the shapes"),  # the exercise's 3, hard-coded
    (lambda k, num_heads: k.repeat_interleave(num_heads // k.shape[1], dim=2), False, "along dim=1"),
    (lambda k, num_heads: repeat_kv_heads(k, num_heads), False, "calls repeat_kv_heads"),
    (lambda k, num_heads, rk=repeat_kv_heads: rk(k, num_heads), False, "calls repeat_kv_heads"),  # an alias
    (repeat_kv_heads, False, "calls repeat_kv_heads"),
    (torch.zeros(1, 6, 3, 2), False, "should be a function"),
])
def test_repeat_kv_checker_runs_the_learners_function_on_several_shapes(answer, ok, says):
    verdict = check_repeat_kv.judge(answer, torch.randn(1, 2, 3, 2), 6)
    assert verdict.ok is ok, verdict
    assert says in verdict.message + verdict.hint


def _fold(rescale_sum: bool = True, rescale_acc: bool = True, inverted: bool = False, running_max: bool = True):
    """A learner's fold, right or with one typical mistake."""

    def fold(state, block):
        m, l, acc = state  # m (), l (), acc (head_dim,)
        s, v = block  # s (b,), v (b, head_dim)
        m_new = torch.maximum(m, s.max()) if running_max else s.max()
        factor = torch.exp(m_new - m) if inverted else torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        return m_new, (l * factor if rescale_sum else l) + p.sum(), (acc * factor if rescale_acc else acc) + p @ v

    return fold


def _recomputed(softmax):
    """A fold that ignores the state and weighs the block alone with ``softmax``."""
    return lambda state, block: (block[0].max(), torch.tensor(1.0), softmax(block[0]) @ block[1])


def _unshifted(state, block):
    """Right in exact arithmetic, but exp(s) underflows to 0 when every score is far below 0."""
    m, l, acc = state
    s, v = block
    m_new = torch.maximum(m, s.max())
    p = torch.exp(s) / torch.exp(m_new)
    return m_new, l * torch.exp(m - m_new) + p.sum(), acc * torch.exp(m - m_new) + p @ v


_ROW = torch.tensor([-1.0, 0.5, 2.0, 1.0, 3.0, -0.5, 4.0, 0.0, 5.0, 1.5])  # the max rises in every block of 4
_VALUES = torch.arange(30.0).reshape(10, 3) / 10


@pytest.mark.parametrize(("answer", "ok", "says"), [
    (_fold(), True, "three more queries"),
    (_fold(rescale_sum=False, rescale_acc=False), False, "Block 1 (keys 4-7): the new state (m, l, acc) matches "
                                                         "what you get when you added the block without rescaling"),
    (_fold(rescale_acc=False), False, "rescale it by the same"),
    (_fold(rescale_sum=False), False, "rescaled the running weighted sum but not the running sum"),
    (_fold(inverted=True), False, "Block 0 (keys 0-3): the new state (m, l, acc) matches what you get when you "
                                  "rescaled by exp(m_new - m), upside down"),
    (_fold(running_max=False), False, "For 7 keys in blocks of 3, block 1 (keys 3-5): the new state (m, l, acc) "
                                      "matches what you get when you took the block's max as the new m"),
    # reader g05: the block's terms not taken relative to the max at all
    (lambda state, block: (torch.maximum(state[0], block[0].max()), state[1] + block[0].exp().sum(),
                           state[2] + block[0].exp() @ block[1]), False, "you added exp(s), not exp(s - m_new)"),
    (_unshifted, False, "For 9 keys in blocks of 2, every score near -150, block 0 (keys 0-1): the new state (m, l, acc) "
                   "matches what you get when you took exp(s) before subtracting the max"),
    (_recomputed(lambda s: torch.softmax(s, dim=-1)), False, "calls torch.softmax"),
    (_recomputed(lambda s: s.softmax(-1)), False, "calls Tensor.softmax"),
    (_recomputed(lambda s: torch.exp(s - s.logsumexp(-1))), False, "calls Tensor.logsumexp"),
    (_recomputed(lambda s: online_softmax(s[None], block_size=4)[0]), False, "calls attn_helpers' online_softmax"),
    # a fold that moves m only: the checker compares every part of the state after every block
    (lambda state, block: (block[0].max(), *state[1:]), False, "Block 0 (keys 0-3): the new l"),
    (lambda state, block: state[:2], False, "fold returned 2 values; expected the new state"),
    (lambda state, block: block.shape, False, "unpack the two inputs"),
    (torch.zeros(3), False, "should be a function"),
])
def test_online_softmax_step_checker_checks_the_state_after_every_block(answer, ok, says):
    verdict = check_online_softmax_step.judge(answer, _ROW, _VALUES, 4)
    assert verdict.ok is ok, verdict
    assert says in verdict.message + verdict.hint, verdict


def test_repeat_kv_checker_refuses_transformers_repeat_kv():
    """The exercise's answer in another library, one search away: refused as the library's own is."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    verdict = check_repeat_kv.judge(lambda k, num_heads: llama.repeat_kv(k, num_heads // k.shape[1]),
                                    torch.randn(1, 2, 3, 2), 6)
    assert not verdict.ok and "transformers' repeat_kv" in verdict.message, verdict


def _loop(prefill: bool = True, refeed: bool = False, rerun: bool = False):
    """A learner's generate_with_cache, right or with one typical mistake."""

    def generate_with_cache(model, prompt, num_new):
        cache = KVCache(max_tokens=prompt.shape[1] + num_new)
        tokens = prompt
        if rerun:
            for _ in range(num_new):
                tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
            return tokens
        logits = model.step(prompt if prefill else prompt[:, -1:], cache)[:, -1]
        for _ in range(num_new):
            newest = logits.argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, newest], dim=1)
            logits = model.step(tokens if refeed else newest, cache)[:, -1]
        return tokens

    return generate_with_cache


def _prompt_one_by_one(model, prompt, num_new):
    """Fills the cache right, but one prompt token per step: not the prefill the exercise asks for."""
    cache = KVCache(max_tokens=prompt.shape[1] + num_new)
    tokens = prompt
    for i in range(prompt.shape[1]):
        logits = model.step(prompt[:, i:i + 1], cache)[:, -1]
    for _ in range(num_new):
        newest = logits.argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, newest], dim=1)
        logits = model.step(newest, cache)[:, -1]
    return tokens


def _new_cache_each_step(model, prompt, num_new):
    """Makes a new (empty) cache for every step, so it feeds the whole sequence every time."""
    tokens = prompt
    for _ in range(num_new):
        cache = KVCache(max_tokens=tokens.shape[1])
        newest = model.step(tokens, cache)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, newest], dim=1)
    return tokens


@pytest.mark.parametrize(("answer", "ok", "says"), [
    (_loop(), True, "the same 12 tokens as the loop without the cache"),
    (_new_cache_each_step, False, "create the cache once, before the prefill"),
    (_prompt_one_by_one, False, "one call that feeds the whole prompt at once (feeding it one token at a time fills "
                                "the same cache, in 3 calls instead of one)"),
    (_loop(prefill=False), False, "the cache never saw the whole prompt's keys and values"),
    (_loop(refeed=True), False, "each step feeds only the newest token"),
    (_loop(rerun=True), False, "the loop without the cache"),
    (lambda model, prompt, num_new: prompt, False, "expected a tensor of shape [2, 15]"),
    (42, False, "the answer should be a function"),
    (lambda model, prompt, num_new: generate_greedy(model, prompt, num_new, use_cache=True), False,
     "calls generate_greedy, the library's answer"),
    (lambda model, prompt, num_new, gg=generate_greedy: gg(model, prompt, num_new, use_cache=True), False,
     "calls generate_greedy, the library's answer"),  # an alias: seen while the function runs
    (generate_greedy, False, "calls generate_greedy, the library's answer"),
])
def test_generate_with_cache_checker_names_the_mistake(answer, ok, says):
    model = _random_model(4)
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    verdict = check_generate_with_cache.judge(answer, model, prompt, 12)
    assert verdict.ok is ok
    assert says in verdict.message + verdict.hint


def test_generate_with_cache_checker_leaves_the_model_untouched():
    model = _random_model(5)
    check_generate_with_cache.judge(_loop(), model, torch.tensor([[1, 2]]), 3)
    assert "step" not in vars(model) and "forward" not in vars(model)  # the checker recorded calls on a copy


@pytest.mark.parametrize(("prediction", "ok", "says"), [
    (1024, True, "1,024 times as many"), (1000, True, "1,024 times as many"), (1024 ** 2, False, "not t²"),
    (1, False, "every one of the t tokens again"), (10, False, "count the rows"), ("many", False, "should be a number"),
])
def test_cache_flops_prediction_checker(prediction, ok, says):
    verdict = check_cache_flops_prediction.judge(prediction, 142_606_336, 139_264, 1024)
    assert verdict.ok is ok and says in verdict.message + verdict.hint
