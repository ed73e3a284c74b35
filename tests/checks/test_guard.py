"""The checkers' one library-refusal guard (attn_helpers/checks/_guard.py), their one "answer must be a
function" verdict, and what every checker keeps to: the global random state untouched, no private name
imported from another room."""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attn_helpers
from attn_helpers import checks, core, lab
from attn_helpers.checks._guard import (LIBRARY_ATTENTION, MASK_BUILDERS, TORCH_ATTENTION, Watch, codes_called, library,
                                        run_watching)

CHECKS = Path(checks.__file__).parent
LAYER = attn_helpers.MultiHeadAttention(8, 2)


# ------------------------------------------------------------------------------ the watch list


def test_library_watches_every_function_and_method_the_rooms_export_but_the_mask_builders():
    watched = library()
    for name in [*core.__all__, *lab.__all__]:
        obj = getattr(core, name, None) or getattr(lab, name)
        if inspect.isfunction(obj):
            code = inspect.unwrap(obj).__code__  # a context manager (one_thread): its own code, not contextlib's
            assert (watched.name(code) == f"attn_helpers' {name}") is (name not in MASK_BUILDERS), name
    assert watched.name(core.MultiHeadAttention.forward.__code__) == "attn_helpers' MultiHeadAttention.forward"
    assert watched.name(lab.BertEncoder.forward.__code__) == "attn_helpers' BertEncoder.forward"
    assert watched.name(nn.Module.__call__.__code__) == ""  # PyTorch's own methods are not the library's
    assert watched.name(lab.one_thread.__code__) == ""  # contextlib's wrapper, shared by every context manager


def test_library_names_only_what_it_is_asked_for_and_refuses_an_unknown_name():
    watched = library(("padding_mask",))  # a mask builder, asked for by name
    assert set(watched.values()) == {"attn_helpers' padding_mask"}
    with pytest.raises(ValueError, match="'nonexistent' is exported by neither"):
        library(("nonexistent",))


def test_a_watch_recognises_aliases_copies_partials_layers_and_torchs_ops_by_their_name():
    watched = library(("split_heads", "Attention")) | TORCH_ATTENTION
    alias = core.split_heads
    assert watched.itself(alias) == "attn_helpers' split_heads"
    assert watched.itself(functools.partial(core.split_heads, num_heads=2)) == "attn_helpers' split_heads"
    assert watched.itself(core.Attention(8, 8, 2)).startswith("attn_helpers' Attention")
    assert watched.itself(torch.nn.MultiheadAttention(8, 2)) == "torch.nn.MultiheadAttention"
    assert watched.itself(torch.ops.aten._scaled_dot_product_attention_math) == (
        "torch.ops.aten._scaled_dot_product_attention_math")
    flex = pytest.importorskip("torch.nn.attention.flex_attention").flex_attention  # PyTorch 2.5 and later
    assert watched.itself(flex) == "torch.nn.attention.flex_attention.flex_attention"  # a fresh reader: it passed
    assert watched.itself(torch.softmax) == ""  # a C function without a watched word
    assert watched.itself(lambda x: x) == "" and watched.itself([1, 2]) == ""  # unhashable: not watched


def test_joining_and_narrowing_watches_keeps_names_and_packages():
    joined = Watch({core.split_heads: "split"}, packages={"numpy": "NumPy's"}) | LIBRARY_ATTENTION
    assert joined.packages == {"numpy": "NumPy's"}
    assert joined.name(core.split_heads.__code__) == "split"
    narrowed = joined.without([core.split_heads])
    assert narrowed.name(core.split_heads.__code__) == "" and narrowed.packages == joined.packages


def test_a_name_watches_a_function_defined_outside_the_package_only():
    def measure_depths():
        return 1

    watched = Watch({"measure_depths": "measure_depths"})
    assert watched.name(measure_depths.__code__) == "measure_depths"
    assert run_watching(lambda: measure_depths(), (), watched)[1] == ["measure_depths"]
    assert watched.name(core.split_heads.__code__) == ""


# ------------------------------------------------------------------------------ the guard at run time


def test_run_watching_sees_calls_under_any_name_and_in_call_order():
    split, merge = core.split_heads, core.merge_heads
    watched = library(("split_heads", "merge_heads")) | TORCH_ATTENTION
    x = torch.randn(2, 3, 8)
    result, called = run_watching(lambda t: merge(F.scaled_dot_product_attention(*(split(t, 2),) * 3)), (x,), watched)
    assert result.shape == x.shape
    assert called == ["attn_helpers' split_heads", "F.scaled_dot_product_attention", "attn_helpers' merge_heads"]
    _, called = run_watching(lambda t: t.softmax(-1), (x,), watched)
    assert called == []


def test_run_watching_counts_a_call_only_when_its_test_passes():
    watched = Watch({core.Attention: "the layer with a mask"})
    layer, x = core.Attention(8, 8, 2), torch.randn(1, 4, 8)
    only_if = {core.Attention: lambda args: args.get("mask") is not None}
    assert run_watching(layer, (x,), watched, only_if=only_if)[1] == []
    assert run_watching(lambda t: layer(t, core.causal_mask(4)), (x,), watched, only_if=only_if)[1] == [
        "the layer with a mask"]


def test_run_watching_removes_its_watch_when_the_function_raises_and_silences_warnings():
    before = sys.getprofile()
    with pytest.raises(ZeroDivisionError):
        run_watching(lambda: 1 / 0, (), LIBRARY_ATTENTION)
    assert sys.getprofile() is before
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_watching(lambda: warnings.warn("noise") or 3, (), LIBRARY_ATTENTION) == (3, [])


def test_codes_called_lists_the_python_functions_a_call_runs():
    seen = codes_called(core.split_heads, torch.zeros(1, 2, 4), 2)
    assert core.split_heads.__code__ in seen and core.merge_heads.__code__ not in seen


def test_the_guard_is_built_in_one_module_only():
    """No checker module profiles or reads code objects of its own: they all go through _guard."""
    for path in CHECKS.glob("*.py"):
        if path.name == "_guard.py":
            continue
        text = path.read_text()
        for word in ("setprofile", "settrace", "co_filename", "getsource", "__code__"):
            assert word not in text, f"{path.name} uses {word}"


# ------------------------------------------------------------------------------ "the answer should be a function"


_FUNCTION_CHECKERS = [
    (checks.check_split_heads, ()), (checks.check_merge_heads, ()), (checks.check_head_shapes, ()),
    (checks.check_multi_head_function, ()), (checks.check_qkv_entry, ()), (checks.check_layer_grad, ()),
    (checks.check_attention_function, ()), (checks.check_rope, ()), (checks.check_row_entropy, ()),
    (checks.check_scaled_scores, ()), (checks.check_self_attention_weights, ()),
    (checks.check_repeat_kv, (torch.zeros(1, 2, 3, 2), 4)),
    (checks.check_online_softmax_step, (torch.zeros(3), torch.zeros(3, 2), 2)),
    (checks.check_keep_mask, (torch.ones(1, 3, dtype=torch.long),)),
    (checks.check_head_rows, (nn.Linear(4, 4), torch.zeros(1, 2, 4), 2)),
    (checks.check_pattern_match, (torch.zeros(2, 3, 3), torch.zeros(3, 3))), (checks.check_skip_through_v, ()),
]


@pytest.mark.parametrize("check, args", _FUNCTION_CHECKERS, ids=lambda c: getattr(c, "__name__", ""))
def test_every_function_exercise_says_the_same_words_about_an_answer_that_is_no_function(check, args):
    verdict = check.judge(torch.zeros(2, 3), *args)
    assert not verdict.ok and verdict.message == "the answer should be a function, got a tensor of shape [2, 3]."
    assert "(no brackets): the checker calls it on inputs of its own." in verdict.hint
    verdict = check.judge(42, *args)
    assert verdict.message == "the answer should be a function, got int 42."


def test_the_function_message_is_written_once():
    texts = [path.read_text() for path in CHECKS.glob("*.py")]
    assert sum(text.count("should be a function") for text in texts) == 1


# ------------------------------------------------------------------------------ what every checker keeps to


def _by_hand_class() -> type:
    class ByHand(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.h = num_heads
            self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

        def forward(self, x):
            B, N, d = x.shape
            q, k, v = (p(x).reshape(B, N, self.h, d // self.h).transpose(1, 2)
                       for p in (self.q_proj, self.k_proj, self.v_proj))
            heads = torch.softmax(q @ k.mT * (d // self.h) ** -0.5, dim=-1) @ v
            return self.out_proj(heads.transpose(1, 2).reshape(B, N, d))
    return ByHand


@pytest.mark.parametrize("run", [
    lambda: checks.check_mha_class.judge(_by_hand_class()),
    lambda: checks.check_mha_parameter_count.judge(lambda d, h: 4 * d * d + 4 * d, LAYER),
    lambda: checks.check_mha_parameter_count.judge(lambda d, h: sum(p.numel() for p in nn.Linear(d, h).parameters()),
                                                   LAYER),  # refused, after building a layer of its own
    lambda: checks.check_head_shapes.judge(lambda B, N, dim, chan, H: {
        "head_dim": chan // H, "qkv_heads": [3, B, H, N, chan // H], "scores": [B, H, N, N]}),
    lambda: checks.check_layer_grad.judge(lambda s, x, L, layer: 1.0),
])
def test_checkers_that_build_layers_leave_the_global_random_state_untouched(run):
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    run()
    assert torch.equal(state, torch.random.get_rng_state())


def test_mha_class_is_still_judged_right_and_wrong_with_its_own_generator():
    assert checks.check_mha_class.judge(_by_hand_class()).ok


def test_no_checker_imports_a_private_name_from_another_room():
    for path in CHECKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:  # from ..room import ...
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from ..{node.module}"


def test_a_likely_mistake_in_another_dtype_is_compared_not_a_crash():
    # the answer is compared in the expected dtype (float16 here), a mistake computed in float64
    expected = torch.tensor([0.0, -65504.0], dtype=torch.float16)
    mistake = torch.tensor([0.0, 1.0], dtype=torch.float64)
    verdict = checks.compare_tensors(torch.tensor([0.0, 1.0], dtype=torch.float16), expected,
                                     likely_mistakes={"the mask is added as 1/0": (mistake, "block with -inf.")})
    assert not verdict.ok and "the mask is added as 1/0" in verdict.message


@pytest.mark.parametrize("typo", [lambda x: torch.lg(x), lambda x: undefined_helper(x)])  # noqa: F821
def test_a_function_that_misnames_something_is_told_to_check_the_spelling(typo):  # reader q00
    verdict = checks.check_self_attention_weights.judge(typo)
    assert not verdict.ok and ("AttributeError" in verdict.message or "NameError" in verdict.message), verdict
    assert "check its spelling" in verdict.hint and "read the sizes" not in verdict.hint, verdict


def test_a_function_that_misuses_its_input_keeps_the_exercises_own_hint():
    verdict = checks.check_online_softmax_step.judge(lambda state, block: block.shape, torch.randn(10),
                                                     torch.randn(10, 3), 4)
    assert not verdict.ok and "AttributeError" in verdict.message and "unpack the two inputs" in verdict.hint, verdict


@pytest.mark.parametrize("check, answer, args, words", [  # reader g00: a raised function's hint names its mistake
    # an axis counted from the front, on an input with no batch axis
    (checks.check_scaled_scores, lambda q, k_t: q @ k_t / q.shape[2] ** 0.5, (), "count the axes from the end"),
    (checks.check_split_qkv, lambda t: tuple(t[:, :, i * t.shape[-1] // 3:(i + 1) * t.shape[-1] // 3] for i in range(3)),
     (), "qkv[..., a:b]"),
    (checks.check_split_qkv, lambda t: t.split(t.shape[2] // 3, dim=-1), (), "chan = qkv.shape[-1] // 3"),  # h00
    # positions and lengths compared without the axes that let them broadcast (section 3.4.2)
    (checks.check_padding_keep_mask, lambda lengths, n: (torch.arange(n) >= n - lengths)[:, None, :],
     (torch.tensor([3, 5]), 6, "left"), "positions[None, :] and lengths[:, None]"),
    # no exercise hint of its own for this error: the default says to follow the shapes, not to read the sizes
    (checks.check_padding_keep_mask, lambda lengths, n: lengths.reshape(n), (torch.tensor([3, 5]), 6, "left"),
     "print their shapes inside your function"),
])
def test_a_function_that_raised_is_hinted_at_its_own_mistake(check, answer, args, words):
    verdict = check.judge(answer, *args)
    assert not verdict.ok and "raised" in verdict.message and words in verdict.hint, verdict
    assert "read the sizes" not in verdict.hint and ".mT" not in verdict.hint, verdict
