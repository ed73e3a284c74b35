"""Checkers for 09 · Efficient attention: one query's attention in one pass over blocks (the online softmax), a KV
cache's size, repeating key/value heads, what the cache saves (a prediction) and a greedy generation loop with a KV
cache; the library's answer refused."""

from __future__ import annotations

import math
from collections.abc import Callable
from copy import deepcopy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core import grouped_query_attention, repeat_kv_heads
from ..lab import generate_greedy, kv_cache_bytes
from ._core import Verdict, as_number, checker, compare_tensors, correct, wrong
from ._function import judge_function, random_cases, whole_bytes
from ._guard import LIBRARY_ATTENTION, TRANSFORMERS, Watch
from ._predict import prediction_checker

__all__ = ["check_online_softmax_step", "check_kv_cache_size", "check_repeat_kv", "check_cache_flops_prediction",
           "check_generate_with_cache"]

_CALLS = "your function calls {}, the library's answer to this exercise."  # the refusal of every exercise of 09


def _fold(state: tuple[Tensor, Tensor, Tensor], block: tuple[Tensor, Tensor], *, rescale_sum: bool = True,
          rescale_acc: bool = True, inverted: bool = False, running_max: bool = True,
          shift: str = "before") -> tuple[Tensor, Tensor, Tensor]:
    """One block ``(s (b,), v (b, head_dim))`` folded into ``(m (), l (), acc (head_dim,))``, right or with one of
    the typical mistakes (each flag)."""
    m, l, acc = state
    s, v = block
    m_new = torch.maximum(m, s.max()) if running_max else s.max()
    factor = torch.exp(m_new - m) if inverted else torch.exp(m - m_new)
    p = torch.exp(s - m_new) if shift == "before" else torch.exp(s) / torch.exp(m_new) if shift == "after" else s.exp()
    return m_new, (l * factor if rescale_sum else l) + p.sum(), (acc * factor if rescale_acc else acc) + p @ v


_FOLD_MISTAKES = (  # cause, the flags that make it, hint
    ("you added the block without rescaling the old sum and the old weighted sum",
     {"rescale_sum": False, "rescale_acc": False},
     "both running totals were computed relative to the old max: when the max rises, multiply both by "
     "exp(m - m_new) before adding the block's terms."),
    ("you rescaled the running sum but not the running weighted sum", {"rescale_acc": False},
     "the weighted sum of values holds terms exp(s_j - m) v_j relative to the old max too: rescale it by the same "
     "exp(m - m_new) as the sum."),
    ("you rescaled the running weighted sum but not the running sum", {"rescale_sum": False},
     "the running sum holds terms exp(s_j - m) relative to the old max: rescale it by exp(m - m_new) as well."),
    ("you added exp(s), not exp(s - m_new)", {"shift": "none"},
     "l and acc hold terms relative to the running max, exp(s_j - m): the block's terms are exp(s - m_new)."),
    # before the inverted factor: both give nan on scores far below 0, where only exp(s) underflows
    ("you took exp(s) before subtracting the max", {"shift": "after"},
     "in float32 exp(s) underflows to 0 when every score is far below 0 (here near -150), and 0 / 0 is nan: "
     "subtract the max inside the exp, exp(s - m_new)."),
    ("you rescaled by exp(m_new - m), upside down", {"inverted": True},
     "the new max is at least the old one, so the factor exp(m - m_new) is at most 1; upside down it is infinite "
     "at the first block, where m = -inf."),
    ("you took the block's max as the new m", {"running_max": False},
     "m is the largest score of ALL the blocks so far: m_new = torch.maximum(m, s.max())."),
)

_BLOCK_CASES = (  # more queries: (seed, number of keys, head_dim, block_size, offset added to the scores)
    (1, 7, 2, 3, 0.0),  # the last block shorter than the others
    (2, 5, 4, 8, 0.0),  # one block holds the whole row
    (3, 9, 3, 2, -150.0),  # every score far below 0: exp(s) underflows in float32
)
_STATE_NAMES = ("m", "l", "acc")


#: The library's online softmax and attention, PyTorch's, and any softmax: the exercise is to write the update.
_SOFTMAX = Watch({torch.softmax: "torch.softmax", torch.Tensor.softmax: "Tensor.softmax", F.softmax: "F.softmax",
                  torch.special.softmax: "torch.special.softmax",
                  torch.logsumexp: "torch.logsumexp", torch.Tensor.logsumexp: "Tensor.logsumexp"})


def _judge_fold(state: tuple[Tensor, Tensor, Tensor], block: tuple[Tensor, Tensor]) -> Callable[[Any], Verdict]:
    """The judge of the state ``fold(state, block)`` returned: three tensors, each right, or a mistake named."""
    expected = _fold(state, block)
    mistakes = [(cause, _fold(state, block, **flags), hint) for cause, flags, hint in _FOLD_MISTAKES]
    hint = ("m_new = max(m, s.max()); multiply l and acc by exp(m - m_new); add exp(s - m_new).sum() to l and "
            "exp(s - m_new) @ v to acc; return m_new, l, acc.")

    def judge(got: Any) -> Verdict:
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            what = f"{len(got)} values" if isinstance(got, (tuple, list)) else type(got).__name__
            return wrong(f"fold returned {what}; expected the new state, three tensors (m, l, acc).",
                         "end the function with return m_new, l, acc.")
        verdicts = [compare_tensors(theirs, right, name=f"the new {name}", atol=1e-5, rtol=1e-4, hint=hint)
                    for name, theirs, right in zip(_STATE_NAMES, got, expected)]
        if all(verdict.ok for verdict in verdicts):
            return correct("")
        for cause, state_then, its_hint in mistakes:
            if all(compare_tensors(theirs, wrong_one, atol=1e-5, rtol=1e-4).ok
                   for theirs, wrong_one in zip(got, state_then)):
                return wrong(f"the new state (m, l, acc) matches what you get when {cause}.", its_hint)
        return next(verdict for verdict in verdicts if not verdict.ok)
    return judge


@checker
def check_online_softmax_step(answer: Any, scores: Tensor, values: Tensor, block_size: int) -> Verdict:
    """Exercise 9.2: ``fold(state, block) -> state``, one block of keys folded into a query's ``(m, l, acc)``,
    checked after every block of four queries, each started at ``(-inf, 0, 0)``."""
    queries = [(scores, values, block_size, "")] + [
        (3 * s + offset, v, b, f"For {n} keys in blocks of {b}" + (f", every score near {offset:.0f}" if offset else "")
         + ", ") for seed, n, d, b, offset in _BLOCK_CASES for s, v in [random_cases(seed, [(n,), (n, d)])]]
    cases = []
    for s, v, b, query in queries:
        state = (torch.tensor(float("-inf")), torch.tensor(0.0), torch.zeros(v.shape[-1]))
        for start in range(0, s.shape[0], b):
            block = (s[start:start + b], v[start:start + b])
            end = start + block[0].shape[0] - 1
            where = f"{query}block {start // b} (key{f's {start}-{end}' if end > start else f' {start}'})"
            cases.append(((state, block), where[0].upper() + where[1:], _judge_fold(state, block)))
            state = _fold(state, block)
    return judge_function(
        answer, cases, watched=LIBRARY_ATTENTION | _SOFTMAX, example="fold(state, block)", calls=_CALLS,
        lines="write the update yourself: m_new = max(m, block max); rescale l and acc; add the block's terms.",
        raised="unpack the two inputs: m, l, acc = state (shapes (), (), (head_dim,)) and s, v = block "
               "(shapes (b,) and (b, head_dim)).",
        success=f"after every block the state holds the running max, the running sum and the running weighted sum, "
                f"for {scores.shape[0]} keys in blocks of {block_size} and for three more queries (a short last "
                f"block, one block for the whole row, scores all far below 0), so acc / l after the last block is "
                f"softmax(scores) @ values.")


_CACHE_SIZES = (  # more models: (num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes)
    (12, 768, 12, 12, 1024, 4),  # multi-head, head_dim 64, float32
    (40, 5120, 40, 8, 4096, 2),  # grouped-query, 5 query heads per group, head_dim 128, float16
    (3, 96, 6, 1, 100, 2),  # multi-query, head_dim 16, float16
)
_CACHE_KEYS = ("num_layers", "chan", "num_heads", "num_kv_heads", "seq_len", "dtype_bytes")


_KV_WIDTH = "num_kv_heads x head_dim, with head_dim = chan // num_heads"
#: The typical wrong byte counts: cause -> (its value from the sizes and the right count, or None when it is the
#: right one, hint); :func:`check_kv_cache_size` names a cause only when its value matches on every case.
_CACHE_MISTAKES: dict[str, tuple[Callable[[dict[str, int], int], int | None], str]] = {
    # chan // num_kv_heads as head_dim and counting the query heads give the same bytes: both keys chan wide
    "you took head_dim = chan // num_kv_heads (or counted the query heads): the cached keys came out chan wide": (
        lambda s, e: e // s["num_kv_heads"] * s["num_heads"] if s["num_heads"] != s["num_kv_heads"] else None,
        f"head_dim is the width of one query head, chan // num_heads, and only the key/value heads are cached: "
        f"each layer's keys are {_KV_WIDTH} features wide, not chan."),
    "you took each key/value head to be chan wide": (
        lambda s, e: e * s["num_heads"], f"chan is the width of ALL the query heads; one head is head_dim = chan // "
                                         f"num_heads features, so each layer's keys are {_KV_WIDTH} wide."),
    "you counted the keys but not the values (or the other way round)": (
        lambda s, e: e // 2, "the cache holds keys AND values: a factor of 2."),
    "you forgot the layers": (lambda s, e: e // s["num_layers"] if s["num_layers"] > 1 else None,
                              "every layer keeps its own cache: multiply by num_layers."),
    "you counted bits instead of bytes": (lambda s, e: e * 8, "dtype_bytes is already in bytes (float16 = 2 bytes); "
                                                              "do not multiply by 8."),
    "you counted bits instead of bytes and forgot the values (or the keys)": (
        lambda s, e: e * 4, "two things: the cache holds keys AND values (a factor of 2), and dtype_bytes is already "
                            "in bytes (do not multiply by 8)."),
    "you left out dtype_bytes (counted numbers, not bytes)": (
        lambda s, e: None if s["dtype_bytes"] == 1 else e // s["dtype_bytes"],
        "each number takes dtype_bytes bytes (float16 = 2): multiply by dtype_bytes."),
    "you used 4 bytes per number whatever dtype_bytes says": (
        lambda s, e: None if s["dtype_bytes"] == 4 else e // s["dtype_bytes"] * 4,
        "multiply by dtype_bytes, the bytes of one number."),
}


@checker
def check_kv_cache_size(answer: Any, *, num_layers: int, chan: int, num_heads: int, num_kv_heads: int,
                        seq_len: int, dtype_bytes: int) -> Verdict:
    """Exercise 9: ``cache_bytes(num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes)``, one sequence's."""
    results: list[tuple[dict[str, int], int, int]] = []  # (sizes, the learner's bytes, the right bytes) per case

    def judge(got: Any, sizes: dict[str, int]) -> Verdict:
        results.append((sizes, whole_bytes(got), kv_cache_bytes(
            num_layers=sizes["num_layers"], num_kv_heads=sizes["num_kv_heads"], seq_len=sizes["seq_len"],
            head_dim=sizes["chan"] // sizes["num_heads"], dtype_bytes=sizes["dtype_bytes"])))
        return correct()

    given = (num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes)
    cases = [(sizes, ", ".join(f"{k}={v}" for k, v in sizes.items()), lambda got, sizes=sizes: judge(got, sizes))
             for sizes in (dict(zip(_CACHE_KEYS, case)) for case in (given, *_CACHE_SIZES))]
    verdict = judge_function(
        answer, cases, watched=Watch({kv_cache_bytes: "kv_cache_bytes"}), calls=_CALLS, success="",
        example="cache_bytes(num_layers, chan, num_heads, num_kv_heads, seq_len, dtype_bytes)",
        lines="write the product yourself: keys and values, layers, key/value heads, tokens, features per head "
              "(chan // num_heads), bytes.", raised="keep the six parameter names of the exercise's def line.")
    failed = [case_number for case_number, (_, got, expected) in enumerate(results) if got != expected]
    if not verdict.ok:
        return verdict
    if failed:  # shown for the first case it gets wrong
        sizes, got, expected = results[failed[0]]
        where = "" if failed[0] == 0 else f" For {', '.join(f'{k}={v}' for k, v in sizes.items())}:"
        # a mistake named only when it explains EVERY case: on one case two mistakes can give the same number (with
        # float16, forgetting the 2 bytes and forgetting the values both halve the count)
        for cause, (value, hint) in _CACHE_MISTAKES.items():
            if all(theirs == (value(case, right) or right) for case, theirs, right in results):
                return wrong(f"{where} {got:,} is what you get when {cause}.".lstrip(), hint)
        return wrong(f"{where} your function gives {got:,} bytes, expected {expected:,}.".lstrip(),
                     "section 9.5.2 gives the count (kv_cache_bytes' formula); head_dim is not among the arguments "
                     "here: work one head's width out from chan and num_heads.")
    expected = results[0][2]
    return correct(f"{expected:,} bytes = {expected / 2 ** 30:.3g} GiB for these sizes, and right for three more "
                   f"models; with one key/value head per query head it would be {num_heads // num_kv_heads} times as much.")


def _judge_repeat(k: Tensor, heads: int, first: bool) -> Any:
    per_group = heads // k.shape[1]
    mistakes = {
        "you tiled the heads with repeat (heads 0, 1, 0, 1, ...)": (
            k.repeat(1, per_group, 1, 1),
            f"query head h must use key/value head h // (H / G), so the copies of one head sit next to each "
            f"other (0, 0, ..., 1, 1, ...): use repeat_interleave({per_group}, dim=1)" if first else
            "the copies of one head must sit next to each other: repeat_interleave(H // G, dim=1)."),
        "you repeated the tokens instead of the heads": (
            k.repeat_interleave(per_group, dim=2), "the heads are axis 1 of (B, G, N, d): repeat_interleave along dim=1."),
        "you repeated the head_dim features instead of the heads": (
            k.repeat_interleave(per_group, dim=3), "the heads are axis 1 of (B, G, N, d): repeat_interleave along dim=1."),
    }

    return lambda got: compare_tensors(  # wrong values on other inputs than the exercise's: its numbers written in
        got, repeat_kv_heads(k, heads), name="your repeated k" if first else "your result", likely_mistakes=mistakes,
        **({} if first else {"hint": "work out the copies per key head from the shapes (num_heads // k.shape[1]), "
                                     "not from this exercise's numbers."}))


@checker
def check_repeat_kv(answer: Any, k: Tensor, num_heads: int) -> Verdict:
    """Exercise 9: ``repeat_heads(k (B, G, N, d), num_heads) -> (B, H, N, d)``, key/value head ``h // (H / G)``."""
    g = torch.Generator().manual_seed(5)
    more = ((1, 1, 4, 3, 4), (2, 3, 2, 2, 3), (1, 2, 5, 4, 8))  # (B, G, N, d, H): multi-query, G = H, 4 per group
    cases = [(k, num_heads)] + [(torch.randn(B, G, N, d, generator=g), H) for B, G, N, d, H in more]
    return judge_function(
        answer, [((k_case, heads), "" if i == 0 else f"for k of shape {list(k_case.shape)} and {heads} query heads",
                  _judge_repeat(k_case, heads, i == 0)) for i, (k_case, heads) in enumerate(cases)],
        watched=Watch({repeat_kv_heads: "repeat_kv_heads", grouped_query_attention: "grouped_query_attention"})
        | TRANSFORMERS,  # transformers' repeat_kv is this exercise's answer, one search away
        example="repeat_heads(k, num_heads)", calls=_CALLS,
        lines="write it with one tensor operation on the heads axis (dim=1).",
        raised="compute how many query heads share one key head from the shapes: num_heads // k.shape[1].",
        success=f"{[k.shape[0], num_heads, *k.shape[2:]]}: each of the {k.shape[1]} key/value heads serves "
                f"{num_heads // k.shape[1]} query heads in a row; right for multi-query (G = 1) and G = H too.")


@prediction_checker
def check_cache_flops_prediction(prediction: Any, flops_no_cache: int, flops_cache: int, t: int) -> Verdict:
    """Prediction 9: how many times the FLOPs of one cached step re-running the layer on all ``t`` tokens costs."""
    got = as_number(prediction, "your prediction", hint="write one number, e.g. prediction = 10.")
    ratio = flops_no_cache / flops_cache
    explain = (f"measured: {flops_no_cache:,} FLOPs re-running the layer on {t} tokens, {flops_cache:,} for one "
               f"cached step, {ratio:,.0f} times as many. Re-running recomputes all {t} rows (projections and "
               f"scores), of which only the newest is new; the cached step does one row of each.")
    if math.isclose(got, ratio, rel_tol=0.2):
        return correct(explain)
    if got > 1 and math.isclose(got, ratio * t, rel_tol=0.5):
        return wrong(f"you predicted {got:,.0f}, about t² = {t * t:,}. {explain}",
                     "the cached step is not free: its one query still meets all t cached keys, so its cost grows "
                     "like t too; the ratio of the two is t, not t².")
    if got <= 1.5:
        return wrong(f"you predicted {got:g}: about the same work. {explain}",
                     "without a cache the layer projects and attends from every one of the t tokens again.")
    return wrong(f"you predicted {got:,.4g}. {explain}",
                 "count the rows: re-running computes t output rows, the cached step one.")


@checker
def check_generate_with_cache(answer: Any, model: Any, prompt: Tensor, num_new: int) -> Verdict:
    """Exercise 9: ``generate_with_cache(model, prompt, num_new)``, greedy decoding: one prefill, then one token."""
    expected = generate_greedy(model, prompt, num_new, use_cache=False)  # (B, N_prompt + num_new)
    # a copy of model whose step and forward note each call: (kind, number of tokens, the tokens, the cache a step
    # was given, kept alive so that two calls' caches compare by identity; None for forward)
    recorder, calls = deepcopy(model), []
    step, forward = recorder.step, recorder.forward

    def recorded_step(tokens_new: Tensor, cache: Any) -> Tensor:
        calls.append(("step", int(tokens_new.shape[-1]), tokens_new.detach().clone(), cache))
        return step(tokens_new, cache)

    def recorded_forward(tokens: Tensor) -> Tensor:
        calls.append(("forward", int(tokens.shape[-1]), tokens.detach().clone(), None))
        return forward(tokens)

    recorder.step, recorder.forward = recorded_step, recorded_forward
    with torch.no_grad():
        return judge_function(
            answer, [((recorder, prompt, num_new), "", lambda got: _judge_generated(got, calls, prompt, expected))],
            watched=Watch({generate_greedy: "generate_greedy"}), calls=_CALLS,
            example="generate_with_cache(model, prompt, num_new)",
            lines="write the loop: the prefill model.step(prompt, cache), then one model.step(newest, cache) per "
                  "new token.",
            raised=lambda problem: ("each step feeds only the newest token; the cache already holds the others' keys "
                                    "and values." if "max_tokens" in str(problem) else
                                    "run your function on the prompt in a cell of its own to see where it fails."),
            success=lambda: f"the same {num_new} tokens as the loop without the cache, with "
                            f"{sum(kind == 'step' for kind, *_ in calls)} calls of model.step: the prompt's "
                            f"{prompt.shape[1]} tokens once, then one token at a time.")


def _judge_generated(got: Any, calls: list[tuple[str, int, Tensor, Any]], prompt: Tensor, expected: Tensor) -> Verdict:
    """The verdict on generated tokens, from the calls of ``model.step`` and ``model.forward`` that made them."""
    n_prompt, num_new = prompt.shape[1], expected.shape[1] - prompt.shape[1]
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        shape = list(got.shape) if isinstance(got, Tensor) else type(got).__name__
        return wrong(f"your function returned {shape}; expected a tensor of shape {list(expected.shape)}: the "
                     f"{n_prompt} prompt tokens followed by the {num_new} new ones.",
                     "return torch.cat of the prompt and every chosen token, along dim=1.")
    forwards = [c for c in calls if c[0] == "forward"]
    steps = [c for c in calls if c[0] == "step"]
    if forwards:
        return wrong(f"your function called model(tokens) {len(forwards)} times: that runs every position again, "
                     "the loop without the cache.",
                     "with the cache, call only model.step(new_tokens, cache): the prompt once, then one token.")
    if not steps:
        return wrong("your function never called model.step, so nothing went through the cache.",
                     "logits = model.step(new_tokens, cache)[:, -1] gives the next token's scores.")
    if not torch.equal(got[:, :n_prompt], prompt):
        return wrong("the returned tokens do not start with the prompt.",
                     "start from tokens = prompt and append each new token with torch.cat(..., dim=1).")
    if steps[0][1] != n_prompt:
        fed = [tokens for _, _, tokens, _ in steps[:n_prompt]]
        one_by_one = len(fed) == n_prompt and torch.equal(torch.cat(fed, dim=-1), prompt)  # a prompt token a step
        why = (f"feeding it one token at a time fills the same cache, in {n_prompt} calls instead of one"
               if one_by_one else "the cache never saw the whole prompt's keys and values")
        return wrong(f"your first model.step fed {steps[0][1]} token(s), not the {n_prompt} of the prompt: the "
                     f"exercise asks for the prefill, one call that feeds the whole prompt at once ({why}).",
                     "the prefill: logits = model.step(prompt, cache)[:, -1], once, before the loop.")
    fresh = [i for i, (_, _, _, cache) in enumerate(steps[1:], start=1) if cache is not steps[0][3]]
    if fresh:
        return wrong(f"step {fresh[0]} after the prefill was given another cache than the prefill's: a new cache "
                     "starts empty, so the tokens already seen had to be fed into it again.",
                     "create the cache once, before the prefill, and pass that same cache to every model.step.")
    later = [n for _, n, _, _ in steps[1:] if n != 1]
    if later:
        return wrong(f"after the prefill, a step fed {later[0]} tokens: tokens already in the cache were fed again.",
                     "each step feeds only the newest token; the cache already holds the others' keys and values.")
    if not torch.equal(got, expected):
        first = int((got != expected).any(dim=0).nonzero()[0])
        return wrong(f"your tokens differ from the loop without the cache from position {first} on.",
                     "feed the token you just chose (the argmax of the last position's logits), then append it.")
    return correct()
