"""Checkers for 07 · The complete layer: where a ``qkv`` entry goes, the parameter count, the bugs of a listing,
dropout on the weights (a prediction) and the whole multi-head attention class written by hand."""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import Tensor, nn

from ..core import MultiHeadAttention
from ..lab import attention_parameters, local_random
from ._core import Verdict, as_whole, checker, compare_tensors, correct, wrong
from ._function import judge_function
from ._guard import TORCH_ATTENTION, Watch, library, run_watching
from ._predict import prediction_checker

__all__ = ["SUSPECT_LAYER", "numbered_listing", "check_qkv_entry", "check_mha_parameter_count",
           "check_suspect_lines", "DROPOUT_CHOICES", "check_dropout_prediction", "check_mha_class"]


_WHOLE = "should be a whole number, got {!r}."
_AN_INT = "a count of numbers is an int."


@checker
def check_qkv_entry(answer: Any) -> Verdict:
    """Exercise 7.1: ``source(part, b, h, n, e, chan, num_heads)``, the ``qkv`` index ``qkv_heads[part, b, h, n, e]``
    holds; any PyTorch or NumPy call is refused (a tensor laid out like ``qkv_heads`` would look the answer up)."""
    follow = "follow one number through reshape(B, N, 3, H, head_dim) and then permute(2, 0, 3, 1, 4)."
    cases = []
    for B, N, chan, H in ((2, 3, 12, 3), (1, 5, 8, 4), (3, 2, 10, 1), (2, 4, 18, 2)):  # (B, N, chan, num_heads)
        hd = chan // H
        qkv = torch.arange(B * N * 3 * chan).reshape(B, N, 3 * chan)  # each entry its own flat index
        qkv_heads = qkv.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, N, head_dim)
        for part, b, h, n, e in torch.cartesian_prod(*(torch.arange(n) for n in qkv_heads.shape)).tolist():
            flat = int(qkv_heads[part, b, h, n, e])
            expected = (flat // (N * 3 * chan), flat // (3 * chan) % N, flat % (3 * chan))
            features = {h * 3 * hd + part * hd + e: "the 3*chan features are laid out as (3, H, head_dim): all of "
                                                    "q's heads, then all of k's, then all of v's.",
                        h * hd + e: "q, k and v sit side by side in the 3*chan features: add part*chan.",
                        part * chan + e * H + h: "each head's head_dim features are neighbours: head h starts at "
                                                 "h*head_dim."}

            def judge(got: Any, at: str = f"qkv_heads[{part}, {b}, {h}, {n}, {e}]", expected: tuple = expected,
                      features: dict = features, swapped: tuple = (n, b) if n != b else ()) -> Verdict:
                if not (isinstance(got, (tuple, list)) and len(got) == 3):
                    return wrong(f"returned {got!r:.60}, not (batch, token, feature).",
                                 "return a tuple of three whole numbers.")
                if tuple(got) == expected:
                    return correct()
                what = f"{at} is qkv{list(expected)}; you gave {list(got)}."
                if tuple(got[:2]) == swapped:
                    return wrong(what, "the batch index comes first in qkv, then the token: (b, n, ...).")
                return wrong(what, features.get(got[2], follow))
            cases.append(((part, b, h, n, e, chan, H), f"source{(part, b, h, n, e, chan, H)}", judge))
    return judge_function(
        answer, cases, watched=library() | TORCH_ATTENTION | Watch(packages={"torch": "PyTorch's", "numpy": "NumPy's"}),
        example="source(part, b, h, n, e, chan, num_heads)", lines=follow, raised=follow,
        calls="your function uses {}: work the index out with whole numbers (a tensor or array laid out like "
              "qkv_heads would look it up instead).",
        success="every entry at four sizes (1 to 4 heads): qkv_heads[part, b, h, n, e] is "
                "qkv[b, n, part*chan + h*head_dim + e].")


#: What counts a layer's numbers instead of computing them.
_COUNTING = Watch({nn.Module.__init__: "a module it builds", nn.Module.parameters: ".parameters()",
                   nn.Module.named_parameters: ".named_parameters()", nn.Module.state_dict: ".state_dict()",
                   torch.numel: "PyTorch's numel", torch.Tensor.numel: "PyTorch's Tensor.numel"})


@checker
def check_mha_parameter_count(answer: Any, module: nn.Module) -> Verdict:
    """Exercise 7: ``answer(d_model, num_heads)``, ``MultiHeadAttention``'s parameter count from a formula."""
    d, H = module.d_model, module.num_heads
    expected = sum(p.numel() for p in module.parameters())
    if not callable(answer):
        value = as_whole(answer, f"the parameter count {_WHOLE}", _AN_INT)
        said = "is right for this layer" if value == expected else "is one number"
        return wrong(f"{value:,} {said}, but the exercise asks for a function of d_model and num_heads.",
                     "write answer = lambda d_model, num_heads: ... with a formula, so it can be tried at other sizes.")
    # (d_model, num_heads): this layer's, then a small layer to GPT-2's
    sizes = ((d, H), *[size for size in ((8, 2), (64, 4), (200, 5), (768, 12)) if size != (d, H)])

    def judge(got: Any, d_model: int, num_heads: int) -> Verdict:
        at = f"at d_model = {d_model}, num_heads = {num_heads}: "
        value = as_whole(got, f"{at}your function's result {_WHOLE}", _AN_INT)
        right = sum(attention_parameters(d_model, d_model, qkv_bias=True).values())  # four biased Linears
        if value == right:
            return correct()
        hd, d_ = d_model // num_heads, d_model
        single = ("looks like the parameters of a single head.", "count whole Linear(d_model, d_model) layers: the "
                  "head split is a reshape, not a smaller layer.")
        known = {4 * d_ * d_: ("= 4·d_model² counts the four matrices only.",
                               "each of the four Linear layers also has a bias of d_model numbers."),
                 3 * d_ * d_ + 3 * d_: ("counts q_proj, k_proj and v_proj only.",
                                        "the output projection out_proj is a fourth Linear(d_model, d_model)."),
                 **({num_heads * right: (f"is one full layer per head, times {num_heads}.", "the heads share the "
                                         "projections: each head only gets a slice of d_model columns."),
                     4 * d_ * hd + 4 * hd: single, 4 * d_ * hd: single} if num_heads > 1 else {})}
        if value in known:
            said, hint = known[value]
            return wrong(f"{at}{value:,} {said}", hint)
        if (d_model, num_heads) != (d, H):
            return wrong(f"{at}your function gives {value:,}, the layer holds {right:,} (at d_model = {d} it was right).",
                         "the count must follow d_model: no number of this lesson's layer may be written in.")
        return wrong(f"{at}{value:,} is not the number of learnable numbers.",
                     "each Linear(d_in, d_out) holds d_in·d_out matrix entries and d_out biases; this layer has four.")

    with local_random(0):  # a layer it builds (refused) draws from a local generator, not the notebook's
        return judge_function(
            answer, [(size, "", lambda got, size=size: judge(got, *size)) for size in sizes],
            watched=_COUNTING | library(), example="answer(d_model, num_heads)",
            calls="your function uses {}: that counts the numbers of a layer instead of computing them.",
            lines="write the count from the four Linear(d_model, d_model) layers, with d_model and num_heads only.",
            raised="the function takes two numbers, d_model and num_heads, and returns a whole number.",
            success=f"{expected:,} = 4·d_model² + 4·d_model for d_model = {d}, and right at {len(sizes) - 1} more "
                    f"sizes (d_model up to {max(s[0] for s in sizes)}); the heads add nothing.")


#: The listing of exercise 7.5, one line of code a string (its review, :data:`_REVIEW`, apart).
SUSPECT_LAYER: tuple[str, ...] = (
    'class SuspectAttention(nn.Module):',
    '    def __init__(self, dim, chan, num_heads=1, qk_scale=None, dropout=0.1):',
    '        super().__init__()',
    '        self.num_heads, self.head_dim = num_heads, chan // num_heads',
    '        self.scale = qk_scale or chan ** -0.5',
    '        self.qkv = nn.Linear(dim, 3 * chan, bias=False)',
    '        self.proj = nn.Linear(chan, chan)',
    '',
    '    def forward(self, x):',
    '        B, N, _ = x.shape',
    '        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)  # (B, N, 3, H, head_dim)',
    '        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, N, head_dim)',
    '        weights = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-2)  # (B, H, N, N)',
    '        merged = (weights @ v).transpose(1, 2).reshape(B, N, -1)  # (B, N, chan)',
    '        return self.proj(merged) + v.transpose(1, 2).reshape(B, N, -1)  # (B, N, chan)',
)


#: The review of :data:`SUSPECT_LAYER` by line number (from 1): ``(is_bug, explanation, hint)``; other lines are fine.
#: tests/checks/test_layer.py proves that fixing exactly the bugs gives the library's ``Attention``.
_REVIEW: dict[int, tuple[bool, str, str]] = {
    2: (True, "dropout is accepted and stored nowhere that forward reads: asking for dropout changes nothing "
              "(walkthrough 004's actv and device, again).", "check that every argument of __init__ is used somewhere."),
    4: (False, "head_dim = chan // num_heads is right (a check that num_heads divides chan would help, but the reshape "
               "on line 11 fails loudly anyway).", ""),
    5: (True, "two bugs: `qk_scale or ...` replaces qk_scale=0.0 by the default (walkthrough 000), and the default uses "
              "chan, the width of all heads, instead of head_dim (walkthrough 004).",
        "try qk_scale=0.0 in your head, and ask which vectors the scale's width belongs to."),
    6: (False, "one fused Linear(dim, 3*chan) makes q, k and v at once, as in walkthrough 000.", ""),
    7: (False, "the output projection maps the merged heads (chan wide) to chan.", ""),
    11: (False, "the 3*chan features are laid out as (3, H, head_dim), so this reshape is right.", ""),
    12: (False, "unpacking a tensor splits its first axis, which the permute made the q/k/v axis.", ""),
    13: (True, "softmax(dim=-2) normalises each key's column, not each query's row: the attention weights of one query "
               "no longer sum to one.", "ask over which axis the attention weights of one query must sum to one."),
    14: (False, "transpose then reshape merges the heads back (reshape copies when needed; view would fail).", ""),
    15: (False, "the skip (the tensor added at the end) is merged v because x is dim wide and the output chan wide "
                "(walkthrough 000's design).", ""),
}


def numbered_listing(listing: tuple[str, ...] = SUSPECT_LAYER) -> str:
    """Exercise 7: the listing's code with line numbers from 1, as the exercise shows it."""
    return "\n".join(f"{i:>2}  {line}".rstrip() for i, line in enumerate(listing, start=1))


@checker
def check_suspect_lines(answer: Any) -> Verdict:
    """Exercise 7: the set of line numbers of :data:`SUSPECT_LAYER` that hold a bug."""
    def whole(n: Any) -> bool:
        return isinstance(n, numbers.Integral) and not isinstance(n, bool)

    items = [answer] if whole(answer) else answer
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__") or not all(whole(n) for n in items):
        return wrong(f"give a set of line numbers like {{1, 2}}, got {answer!r}.", "list the numbers of the buggy lines.")
    picked = {int(n) for n in items}
    notes = {i: _REVIEW.get(i, (False, "", "")) for i in range(1, len(SUSPECT_LAYER) + 1)}
    buggy = {i for i, (is_bug, _, _) in notes.items() if is_bug}
    outside = sorted(n for n in picked if not 1 <= n <= len(SUSPECT_LAYER))
    if outside:
        return wrong(f"the listing has lines 1 to {len(SUSPECT_LAYER)}; {outside} are outside it.", "use the printed numbers.")
    if picked == buggy:
        found = "\n".join(f"   line {i}: {notes[i][1]}" for i in sorted(buggy))
        return correct(f"all {len(buggy)} buggy lines found.\n{found}")
    # a wrong set hears why its first fine line is fine, how many more there are, and the hint of each missed bug,
    # never the line of a bug
    fine = sorted(picked - buggy)
    missed = sorted(buggy - picked)
    said = []
    if fine:
        first = fine[0]
        others = (f" {len(fine) - 1} more line{'s' if len(fine) > 2 else ''} of your set hold{'' if len(fine) > 2 else 's'}"
                  " no bug either." if len(fine) > 1 else "")
        said.append(f"line {first} holds no bug: {notes[first][1] or 'nothing on it can go wrong.'}{others}")
    if missed:
        said.append(f"{'Your' if fine else 'your'} set still misses {len(missed)} buggy line{'s' if len(missed) > 1 else ''}.")
    hints = [notes[i][2] for i in missed if notes[i][2]]
    return wrong(" ".join(said),
                 " / ".join(hints) if hints else "take out the lines that hold no bug; the others are right.")


DROPOUT_CHOICES = ("unchanged", "scaled up", "scaled down")


@prediction_checker(choices=DROPOUT_CHOICES)
def check_dropout_prediction(choice: str, weights_train: Tensor, weights_eval: Tensor, p: float) -> Verdict:
    """Prediction 7: are the weights dropout keeps ``"unchanged"``, ``"scaled up"`` or ``"scaled down"``?"""
    kept = (weights_train != 0) & (weights_eval != 0)
    ratio = (weights_train[kept] / weights_eval[kept]).median().item()
    happened = "unchanged" if abs(ratio - 1) < 1e-4 else ("scaled up" if ratio > 1 else "scaled down")
    dropped = ((weights_train == 0) & (weights_eval != 0)).float().mean().item()
    facts = (f"{dropped:.0%} of the attention weights became 0 and every kept one was multiplied by {ratio:.4f} "
             f"(1 / (1 - p) = {1 / (1 - p):.4f})")
    if choice == happened:
        return correct(f"{facts}, so a row's expected sum stays 1 even though each row's actual sum moves.")
    return wrong(f"{facts}: the kept attention weights are {happened}.",
                 "dropout zeroes a share p of the attention weights; to keep each row's sum right on average, it divides the "
                 "rest by 1 - p.")


_MHA_CONFIGS = ((2, 5, 8, 2), (3, 7, 12, 3), (1, 4, 6, 1), (2, 6, 16, 4))  # (B, N, d_model, num_heads)


def _variant(layer: MultiHeadAttention, x: Tensor, *, scale: Any = None, split_transpose: bool = True,
             merge_transpose: bool = True, softmax_dim: int = -1, out_proj: bool = True, skip: bool = False) -> Tensor:
    """``layer(x)`` computed step by step, with one step changed the way a typical mistake changes it (``scale``: a
    number, or a function of ``d_model`` and ``head_dim`` giving it)."""
    B, N, d_model = x.shape
    H, hd = layer.num_heads, layer.head_dim

    def split(t: Tensor) -> Tensor:  # (B, N, d_model) -> (B, H, N, head_dim)
        return t.reshape(B, N, H, hd).transpose(1, 2) if split_transpose else t.reshape(B, H, N, hd)

    q, k, v = (split(proj(x)) for proj in (layer.q_proj, layer.k_proj, layer.v_proj))
    scale = hd ** -0.5 if scale is None else scale(d_model, hd) if callable(scale) else scale
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, N, N)
    heads = scores.softmax(dim=softmax_dim) @ v  # (B, H, N, head_dim)
    merged = heads.transpose(1, 2).reshape(B, N, d_model) if merge_transpose else heads.reshape(B, N, d_model)
    out = layer.out_proj(merged) if out_proj else merged  # (B, N, d_model)
    return out + x if skip else out


_MHA_MISTAKES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("the scores were scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)", {"scale": lambda d, hd: d ** -0.5},
     "each head's dot products sum over head_dim features, so scale by head_dim ** -0.5 (lesson 05's scale bug)."),
    ("the scores were not scaled at all", {"scale": 1.0},
     "multiply q @ k.transpose(-2, -1) by head_dim ** -0.5 before the softmax."),
    ("the scores were multiplied by sqrt(head_dim) instead of divided", {"scale": lambda d, hd: hd ** 0.5},
     "the scale is head_dim ** -0.5, the inverse of the square root."),
    ("the heads were split with reshape(B, H, N, head_dim), without the transpose", {"split_transpose": False},
     "split with reshape(B, N, H, head_dim) and then transpose(1, 2): each head must get a slice of every token's "
     "features, not a block of tokens."),
    ("the heads were merged with reshape(B, N, d_model), without transposing them back first",
     {"merge_transpose": False},
     "merge with transpose(1, 2) (back to (B, N, H, head_dim)) and then reshape(B, N, d_model)."),
    ("the heads were split with reshape(B, H, N, head_dim) and merged with reshape(B, N, d_model), both "
     "without a transpose", {"split_transpose": False, "merge_transpose": False},
     "the shapes fit, but each head gets whole tokens (section 5.5 of lesson 05): split with reshape(B, N, H, "
     "head_dim) then transpose(1, 2), and merge with transpose(1, 2) then reshape(B, N, d_model)."),
    ("the softmax ran over the queries (dim=-2) instead of the keys", {"softmax_dim": -2},
     "each query's attention weights must sum to one: softmax(dim=-1)."),
    ("the output projection out_proj was left out", {"out_proj": False},
     "finish with self.out_proj(merged)."),
    ("the input x was added to the output (a skip connection)", {"skip": True},
     "the layer returns self.out_proj(merged) alone, as nn.MultiheadAttention does: the skip connection belongs to "
     "the block around it (7.6's TransformerBlock), not to the attention layer."),
)


_WRITE_IT = ("write each step with nn.Linear and tensor operations (reshape, transpose, @, softmax): the split, "
             "the scaled scores, the softmax, weights @ v and the merge are the exercise.")
@checker
def check_mha_class(answer: Any) -> Verdict:
    """Exercise 7: a class ``answer(d_model, num_heads)`` with ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``,
    given a ``MultiHeadAttention``'s parameters and compared with it and ``nn.MultiheadAttention``."""
    if not (isinstance(answer, type) and issubclass(answer, nn.Module)):
        return wrong(f"the answer should be your class (an nn.Module subclass, not an instance), got {answer!r}.",
                     "end the cell with answer = MyMultiHeadAttention (the class itself, no parentheses).")
    if issubclass(answer, (MultiHeadAttention, nn.MultiheadAttention)):
        return wrong(f"{answer.__name__} is (or builds on) a library's multi-head attention layer.",
                     _WRITE_IT)
    torch_gap = 0.0
    for B, N, d_model, num_heads in _MHA_CONFIGS:
        g = torch.Generator().manual_seed(7 * d_model + num_heads)
        with torch.device("meta"):  # its parameters drawn from g like a fresh nn.Linear's
            reference = MultiHeadAttention(d_model, num_heads)
        reference = reference.to_empty(device="cpu").eval()
        with torch.no_grad():
            for p in reference.parameters():
                p.uniform_(-d_model ** -0.5, d_model ** -0.5, generator=g)
        try:
            with local_random(0):  # the learner's layers draw their first weights from a local generator
                mine = answer(d_model, num_heads)
        except Exception as problem:
            return wrong(f"{answer.__name__}({d_model}, {num_heads}) failed: {type(problem).__name__}: {problem}.",
                         "__init__(self, d_model, num_heads) must build the layer from its two arguments.")
        missing = [n for n in ("q_proj", "k_proj", "v_proj", "out_proj") if not isinstance(getattr(mine, n, None), nn.Linear)]
        if missing:
            return wrong(f"your layer has no nn.Linear named {', '.join(missing)}.",
                         "build self.q_proj, self.k_proj, self.v_proj and self.out_proj, each nn.Linear(d_model, d_model), "
                         "so their parameters can be copied in.")
        try:
            with torch.no_grad():
                for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    getattr(mine, n).load_state_dict(getattr(reference, n).state_dict())
        except RuntimeError as problem:
            return wrong(f"the parameters of a MultiHeadAttention({d_model}, {num_heads}) do not fit your layers: "
                         f"{str(problem).splitlines()[-1].strip()}", "each projection is nn.Linear(d_model, d_model) with a bias.")
        mine.eval()
        inside = [type(m).__name__ for m in mine.modules() if isinstance(m, (MultiHeadAttention, nn.MultiheadAttention))]
        if inside:
            return wrong(f"your layer holds a {inside[0]}, a library's multi-head attention layer.", _WRITE_IT)
        x = torch.randn(B, N, d_model, generator=g)
        with torch.no_grad():
            try:
                got, seen = run_watching(mine, (x,), library() | TORCH_ATTENTION)
                if seen:
                    return wrong(f"your forward calls {seen[0]}, which does part of the exercise for you.", _WRITE_IT)
            except Exception as problem:
                return wrong(f"forward on x of shape {[B, N, d_model]} with {num_heads} heads failed: "
                             f"{type(problem).__name__}: {problem}.",
                             "follow the shapes: (B, N, d_model) -> (B, H, N, head_dim) -> scores (B, H, N, N) -> back.")
            expected = reference(x)
            with local_random(0):  # to_torch builds PyTorch's layer, whose own first weights
                pytorch = reference.to_torch()(x, x, x, need_weights=False)[0]  # draw (then overwritten by the copy)
        if not isinstance(got, Tensor):
            return wrong(f"forward returned a {type(got).__name__}, not a tensor.", "return the output tensor only.")
        if got.shape != expected.shape:
            return wrong(f"on x of shape {[B, N, d_model]} with {num_heads} heads your layer returned shape "
                         f"{list(got.shape)}, expected {list(expected.shape)}.",
                         "merge the heads back to (B, N, d_model) before out_proj.")
        with torch.no_grad():
            mistakes = {cause: (_variant(reference, x, **change), hint) for cause, change, hint in _MHA_MISTAKES}
        verdict = compare_tensors(got, expected, name=f"with d_model={d_model}, {num_heads} heads, your output",
                                  likely_mistakes=mistakes, atol=1e-5, rtol=1e-4,
                                  hint="print the shape after every line and compare with the shape trace of 7.2.")
        if not verdict.ok:
            return verdict
        torch_gap = max(torch_gap, (got - pytorch).abs().max().item())
    agrees = "within 1e-5 too" if torch_gap < 1e-5 else f"only to {torch_gap:.3g}"
    return correct(f"on {len(_MHA_CONFIGS)} sizes (d_model 6 to 16, 1 to 4 heads) your class gives MultiHeadAttention's "
                   f"outputs within 1e-5 after copying its parameters; nn.MultiheadAttention's agree with yours {agrees}.")
