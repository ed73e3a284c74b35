"""How a verdict prints: lines that JupyterLab never has to break (it would break them mid-word), broken at spaces,
with no word, number or shape split and continuation lines indented (attn_helpers/checks/_core.py).

Every wrong answer of ``tests/notebooks/exercise_data.py`` and every likely mistake a checker names are held to the
same lines in ``tests/notebooks/test_exercises.py``, which runs them through the lessons' own checkers.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import checks
from attn_helpers.checks._core import (INDENT, LINE_WIDTH, NOT_ATTEMPTED, Verdict, checker, columns, compare_tensors,
                                       fit_lines, say, wrong)
from attn_helpers.checks._predict import PREDICT_NOT_ATTEMPTED, prediction_checker
from tools.verdict_lines import line_problems as verdict_line_problems

SHAPE = re.compile(r"\[\d+(?:, \d+)*\]")
LONG_HINT = ("the heads are split from the last axis: reshape to (B, N, H, head_dim) and then transpose(1, 2), so a "
             "(1, 8, 192) input with 8 heads of 24 features gives q of shape [1, 8, 8, 24] and the scores of shape "
             "[1, 8, 8, 8]; add up the weights over the keys to check that each row sums to one")


def test_the_limit_is_a_width_a_laptop_shows():
    # JupyterLab at 1366 x 768 with the file browser open fits 118 columns of stream output (measured, see _core.py)
    assert 60 <= LINE_WIDTH < 118


def test_a_long_hint_prints_in_lines_that_fit_without_splitting_a_word():
    verdict = wrong("your q has the right values but the heads in the wrong place: " + "the split " * 8, LONG_HINT)
    assert columns(verdict.plain().splitlines()[1]) > LINE_WIDTH  # the old one-line hint did not fit
    printed = str(verdict)
    assert verdict_line_problems(printed, verdict.plain()) == []
    assert len(printed.splitlines()) > 3


def test_shapes_tuples_and_calls_are_never_split():
    printed = str(wrong("x", LONG_HINT))
    lines = printed.splitlines()
    for piece in ("[1, 8, 8, 24]", "[1, 8, 8, 8]", "(B, N, H, head_dim)", "transpose(1, 2)", "(1, 8, 192)"):
        assert any(piece in line for line in lines), (piece, printed)
    # at every width, a shape stays on one line
    message = "largest difference at [1, 8, 192] and at [13, 4, 100, 16] of the weights (B, H, N, N) " * 3
    for width in range(40, 90):
        shapes = [s for line in fit_lines(message, width=width).splitlines() for s in SHAPE.findall(line)]
        assert shapes == SHAPE.findall(message), width


def test_prose_in_brackets_still_breaks():
    text = "word " * 10 + "(the largest difference between your answer and the expected one is 0.5 here)"
    lines = fit_lines(text, width=50).splitlines()
    assert all(columns(line) <= 50 for line in lines), lines


def test_continuation_lines_are_indented_and_the_hint_continues_under_its_first_word():
    printed = str(wrong("a message long enough to take two lines " * 3, LONG_HINT)).splitlines()
    hint_at = next(i for i, line in enumerate(printed) if line.startswith(INDENT + "Hint: "))
    assert printed[0].startswith("❌ Not yet: ")
    assert all(line.startswith(INDENT) and not line.startswith(INDENT + " ") for line in printed[1:hint_at])
    assert hint_at > 1 and len(printed) > hint_at + 1
    assert all(line.startswith(INDENT + " " * len("Hint: ")) and line[len(INDENT) + 6] != " "
               for line in printed[hint_at + 1:])


def test_wide_signs_count_two_columns():
    assert columns("✅ ok") == 5
    text = "✅ Correct! " + "abcd " * 30
    assert all(columns(line) <= 40 for line in fit_lines(text, width=40).splitlines())
    assert fit_lines("✅ " + "a" * 37, width=40).count("\n") == 0  # 2 + 1 + 37 columns fit exactly
    assert fit_lines("✅ " + "a " * 18 + "bc", width=40).count("\n") == 1  # 41 columns do not


def test_a_word_longer_than_a_line_is_kept_whole():
    word = "x" * 120
    assert fit_lines(f"see {word} here").split() == ["see", word, "here"]


def test_a_multi_line_message_keeps_its_lines_and_indents_their_continuations():
    message = "all 2 buggy lines found.\n   line 5: " + "the scores are divided by the full width " * 3
    printed = str(Verdict(True, message)).splitlines()
    assert printed[0] == "✅ Correct! all 2 buggy lines found."
    assert printed[1].startswith("   line 5: ")
    assert all(line.startswith("      ") for line in printed[2:]) and len(printed) > 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet="abcdefghij_-.:=", min_size=1, max_size=14),
                          st.lists(st.integers(0, 4096), min_size=1, max_size=5).map(str),
                          st.sampled_from(["✅", "⏳", "softmax(dim=-1)", "(3, H, head_dim)",
                                           "(largest difference"])),
                min_size=1, max_size=40),
       st.integers(30, 100))
def test_any_text_fits_keeps_its_words_and_its_shapes(words, width):
    text = " ".join(words)
    printed = fit_lines(text, width=width)
    assert printed.split() == text.split()
    for line in printed.splitlines():
        # a line is too wide only when it holds one unbreakable piece: a word, or a shape or call with its spaces
        outside_groups = re.sub(r"\[[^\[\]]*\]|\([^()]*\)", "", line.strip())
        assert columns(line) <= width or " " not in outside_groups, (width, line)
    # every shape that fits on a continuation line is on one line (a longer one breaks after a comma)
    kept = [s for line in printed.splitlines() for s in SHAPE.findall(line)]
    assert all(s in kept for s in SHAPE.findall(text) if len(s) <= width - len(INDENT)), (width, printed)


def test_checkers_print_the_wrapped_verdict_and_the_wrapped_not_attempted_lines():
    @checker
    def judge(answer):
        return compare_tensors(answer, torch.zeros(1, 8, 192), name="your q", likely_mistakes={
            "the heads are taken from the wrong axis": (torch.ones(1, 8, 192), LONG_HINT)})

    @prediction_checker
    def predict(answer):
        return wrong("x", LONG_HINT)

    long_line = "⏳ Not attempted yet: " + "write the answer in the cell above " * 5
    for call, plain in ((lambda: judge(torch.ones(1, 8, 192)), judge.judge(torch.ones(1, 8, 192)).plain()),
                        (lambda: predict(torch.ones(1)), predict.judge(torch.ones(1)).plain()),
                        (lambda: judge(None), NOT_ATTEMPTED), (lambda: predict(None), PREDICT_NOT_ATTEMPTED),
                        (lambda: say(long_line), long_line)):
        out = io.StringIO()
        with redirect_stdout(out):
            call()
        assert verdict_line_problems(out.getvalue(), plain) == []
        assert out.getvalue().count("\n") > 1 or columns(plain) <= LINE_WIDTH  # a line too long was wrapped


def test_the_shipped_helpers_verdicts_fit():
    for verdict in (checks.checker(lambda a: wrong(f"{a}", LONG_HINT)).judge("x"),
                    compare_tensors(torch.ones(13, 4, 100, 16), torch.ones(13, 4, 100, 17)),
                    compare_tensors(torch.ones(2, 3), torch.zeros(2, 3), name="your weights of every head")):
        assert verdict_line_problems(str(verdict), verdict.plain()) == []
