"""What every checker shares: a *judge* (answer -> :class:`Verdict`) wrapped by :func:`checker`, which
prints the verdict in words and never raises (tests call ``check_x.judge``); :func:`compare_tensors` names likely
mistakes; answer parsers; lines that fit the output area."""

from __future__ import annotations

import functools
import numbers
import re
import textwrap
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["LINE_WIDTH", "Unreadable", "Verdict", "as_letter", "as_number", "as_shape", "as_whole", "checker",
           "columns", "compare_tensors", "correct", "error_text", "fit_lines", "judge_shape", "not_a_function", "say",
           "wrong", "NOT_ATTEMPTED"]

NOT_ATTEMPTED = "⏳ Not attempted yet: replace None with your answer and run the cell again."

# The widest line JupyterLab never breaks (its output <pre> breaks anywhere, mid-word): measured in JupyterLab 4.6 in
# Chromium at 1366 x 768 with the file browser open, 118 columns of its 13 px monospace font fit; 100 leaves room
# for a 110 % zoom and for wide glyphs (✅ counts two columns).
LINE_WIDTH = 100
INDENT = "   "  # continuation lines start under the text after the verdict's sign ("✅ " is three columns)
_KEEP = "\ue000"  # stands in, while wrapping, for a space that must not break (inside a shape or a call)
_WIDE = "\ue001"  # stands in, while wrapping, for the second column of a wide character (✅, ❌, ⏳)
_CALL_OPENS = re.compile(r"[\w.\])]")  # a "(" after one of these opens a call or an index: f(a, b), x.view(2, 3)
_TUPLE = re.compile(r"\s*[^\s,]+(?:\s*,\s*[^\s,]*)+\s*")  # (3, H, head_dim), (2,): items without spaces


def _closing(text: str, start: int) -> int:
    """The index of the bracket closing the one at ``start`` (nested pairs skipped), or -1."""
    pairs, depth = {"(": ")", "[": "]"}, []
    for i in range(start, len(text)):
        if text[i] in pairs:
            depth.append(pairs[text[i]])
        elif depth and text[i] == depth[-1]:
            depth.pop()
            if not depth:
                return i
    return -1


def _unbreakable(text: str, room: int) -> str:
    """``text`` with the spaces inside shapes, lists, tuples and calls that fit in ``room`` unbreakable."""
    out, i = [], 0
    while i < len(text):
        end = _closing(text, i) if text[i] in "([" else -1
        if end > i:
            group = text[i:end + 1]
            atomic = (text[i] == "[" or (i > 0 and _CALL_OPENS.match(text[i - 1]) is not None)
                      or _TUPLE.fullmatch(group[1:-1]) is not None)
            if atomic and len(group) <= room:
                out.append(group.replace(" ", _KEEP))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def fit_lines(text: str, *, indent: str = INDENT, width: int | None = None) -> str:
    """``text`` in lines of at most ``width`` columns (:data:`LINE_WIDTH`), broken at spaces outside shapes,
    lists, tuples and calls only; continuation lines under ``indent`` (a paragraph starting with spaces: three
    columns further in); wide characters count two."""
    width = LINE_WIDTH if width is None else width
    lines = []
    for paragraph in text.split("\n"):
        lead = paragraph[:len(paragraph) - len(paragraph.lstrip(" "))]
        follow = max(indent, lead + INDENT, key=len) if lead else indent
        marked = "".join(c + _WIDE if unicodedata.east_asian_width(c) in "WF" else c for c in paragraph)
        marked = _unbreakable(marked, width - len(follow))
        wrapped = textwrap.wrap(marked, width=width, subsequent_indent=follow, break_long_words=False,
                                break_on_hyphens=False) or [""]
        lines += [line.replace(_WIDE, "").replace(_KEEP, " ") for line in wrapped]
    return "\n".join(lines)


def columns(line: str) -> int:
    """How many character columns ``line`` takes in the browser (wide characters such as ✅ take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one answer. ``hint`` says what to look at when ``ok`` is False."""

    ok: bool
    message: str
    hint: str = ""

    def plain(self) -> str:
        """The verdict as written, one line for the message and one for the hint (what :meth:`__str__` wraps)."""
        if self.ok:
            return f"✅ Correct! {self.message}".rstrip()
        text = f"❌ Not yet: {self.message}"
        return f"{text}\n{INDENT}Hint: {self.hint}" if self.hint else text

    def __str__(self) -> str:
        """The verdict as printed: in lines that fit, a hint's continuation under its first word."""
        if self.ok or not self.hint:
            return fit_lines(self.plain())
        head = fit_lines(f"❌ Not yet: {self.message}")
        return head + "\n" + fit_lines(f"{INDENT}Hint: {self.hint}", indent=INDENT + " " * len("Hint: "))


class Unreadable(Exception):
    """Raised by a parser (:func:`as_number`, :func:`as_shape`, ...) with the message and hint of the verdict on an
    answer it cannot read (:func:`checker` and :func:`~._function.judge_function` return that verdict)."""


def correct(message: str = "") -> Verdict:
    return Verdict(True, message)


def wrong(message: str, hint: str = "") -> Verdict:
    return Verdict(False, message, hint)


def checker(judge: Callable[..., Verdict], not_attempted: str = NOT_ATTEMPTED) -> Callable[..., None]:
    """``judge`` as ``check(answer, ...)``, printing its verdict; ``None`` prints ``not_attempted``."""

    @functools.wraps(judge)
    def check(answer: Any = None, *args: Any, **kwargs: Any) -> None:
        say(judgement(answer, *args, **kwargs) if answer is not None else not_attempted)

    def judgement(answer: Any, *args: Any, **kwargs: Any) -> Verdict:
        try:
            return judge(answer, *args, **kwargs)
        except Unreadable as unreadable:
            return wrong(*unreadable.args)
        except Exception as problem:  # the learner sees words, not a traceback
            return wrong(f"this answer could not be checked ({type(problem).__name__}: {problem}).",
                         "check that the answer is the kind of object the exercise asks for.")

    check.judge = judgement  # type: ignore[attr-defined]
    return check


def say(outcome: Verdict | str) -> None:
    """Print a verdict, or a "not attempted yet" line, in lines that fit a learner's output area."""
    print(outcome if isinstance(outcome, Verdict) else fit_lines(outcome))


def as_number(answer: Any, what: str, *, hint: str) -> float:
    """``answer`` (a number or a one-element tensor) as a float (``hint``: how to get one)."""
    if isinstance(answer, Tensor):
        if answer.numel() != 1:
            raise Unreadable(f"{what} should be one number, got a tensor of shape {list(answer.shape)}.", hint)
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise Unreadable(f"{what} should be a number, got {answer!r}.", "write a number or an expression that gives one.")
    return float(answer)


def as_whole(answer: Any, said: str, hint: str) -> int:
    """``answer`` (a whole number, maybe in a one-element tensor) as an int (``said``: formatted with it)."""
    if isinstance(answer, Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or int(answer) != answer:
        raise Unreadable(said.format(answer), hint)
    return int(answer)


_WRITE_SHAPE = "write it like [13, 4, 100, 16], one number per axis."


def as_shape(answer: Any, what: str = "the shape", *, hint: str = _WRITE_SHAPE) -> list[int]:
    """A shape (a list or tuple of whole numbers, a ``torch.Size``) as a list of ints."""
    if isinstance(answer, Tensor) or isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        raise Unreadable(f"{what} should be a shape: a list or tuple of ints, got {answer!r}.", hint)
    values = list(answer)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):  # 13.0 is no size
        raise Unreadable(f"{what} should hold whole numbers only, got {values!r}.", hint)
    return [int(v) for v in values]


def judge_shape(answer: Any, expected: list[int], *, what: str = "the shape", hint: str = _WRITE_SHAPE,
                known: Mapping[tuple[int, ...], tuple[str, str]], success: str = "", order: str | None,
                other: tuple[str, str], prefix: str = "") -> Verdict:
    """The verdict on a shape (parsed by :func:`as_shape` with ``what`` and ``hint``): ``success``; a ``known``
    mistake (shape -> (what it is, hint)); the right sizes in the wrong order (``order``: its hint, if asked); else
    ``other`` (what it is, hint). A wrong shape's message starts with ``prefix``."""
    shape = as_shape(answer, what, hint=hint)
    if shape == expected:
        return correct(success)
    said, its_hint = known.get(tuple(shape), other)
    if tuple(shape) not in known and order is not None and sorted(shape) == sorted(expected):
        said, its_hint = "has the right sizes in the wrong order.", order
    return wrong(f"{prefix}{shape} {said}", its_hint)


def as_letter(answer: Any, options: Mapping[str, str]) -> str:
    """The option letter the learner chose (``"b"``, ``"B"`` and ``"(b)"`` all mean ``"b"``)."""
    letters = sorted(options)
    if not isinstance(answer, str) or answer.strip().strip("()").lower() not in options:
        raise Unreadable(f"the answer should be one of the letters {letters} as a string, got {answer!r}.",
                         f"write e.g. answer = {letters[0]!r}.")
    return answer.strip().strip("()").lower()


def not_a_function(answer: Any, example: str) -> Verdict | None:
    """The one verdict on an answer that is not the function asked for (``example``: its call), or ``None``."""
    if callable(answer) and not isinstance(answer, Tensor):
        return None
    got = (f"a tensor of shape {list(answer.shape)}" if isinstance(answer, Tensor)
           else f"{type(answer).__name__} {answer!r:.60}")
    return wrong(f"the answer should be a function, got {got}.",
                 f"define it with def {example}: ... and write answer = {example.split('(')[0]} (no brackets): "
                 "the checker calls it on inputs of its own.")


def error_text(problem: BaseException) -> str:
    """``"ValueError: first line of the message"``: an exception in one line, for a verdict."""
    first_line = str(problem).strip().splitlines()[0] if str(problem).strip() else ""
    return f"{type(problem).__name__}: {first_line}"


def compare_tensors(
    answer: Any,
    expected: Tensor,
    *,
    name: str = "your answer",
    likely_mistakes: Mapping[str, tuple[Tensor, str]] | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    success: str = "",
    hint: str = "",
) -> Verdict:
    """The learner's tensor against ``expected``; ``likely_mistakes``: cause -> (what it gives, hint)."""
    try:
        got = answer.detach() if isinstance(answer, Tensor) else torch.as_tensor(answer)
    except Exception:
        return wrong(f"{name} should be a tensor, got {type(answer).__name__}.",
                     "the exercise asks for a torch.Tensor; build it with torch operations.")
    expected = expected.detach()
    if got.dtype != expected.dtype and (got.is_floating_point() or expected.is_floating_point()):
        got = got.to(expected.dtype)

    def same(a: Tensor, b: Tensor) -> bool:
        if a.dtype != b.dtype and (a.is_floating_point() or b.is_floating_point()):  # a mistake in float64, say
            b = b.to(a.dtype)
        return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))

    if same(got, expected):
        return correct(success or f"{name} has shape {list(expected.shape)} and the right values.")
    for cause, (mistake, its_hint) in (likely_mistakes or {}).items():
        if same(got, mistake.detach()):
            return wrong(f"{name} matches what you get when {cause}.", its_hint)
    if got.shape != expected.shape:
        return wrong(f"{name} has shape {list(got.shape)}, expected {list(expected.shape)}.",
                     hint or "print the shapes of your inputs and follow each operation's shape.")
    hint = hint or "recompute step by step and compare each intermediate with the lesson's."
    if got.dtype == torch.bool or expected.dtype == torch.bool:  # booleans cannot be subtracted: count them
        differ = int((got != expected.to(got.dtype)).sum())
        return wrong(f"{name} has the right shape {list(got.shape)} but {differ} of its {got.numel()} entries "
                     "differ.", hint)
    difference = (got - expected).abs().max().item()
    return wrong(f"{name} has the right shape {list(got.shape)} but different values "
                 f"(largest difference {difference:.3g}).", hint)
