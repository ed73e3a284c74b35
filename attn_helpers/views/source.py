"""``show_source(fn)``: print a helper's code next to its use, so no lesson's idea happens off screen."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

__all__ = ["show_source", "source_text"]


def source_text(fn: Callable[..., Any], *, docstring: bool = False) -> str:
    """Lesson 10: The source of ``fn`` (a function or class), without its docstring unless ``docstring=True``."""
    if not callable(fn):
        raise TypeError(f"fn must be a function or class, got {type(fn).__name__}")
    text = textwrap.dedent(inspect.getsource(fn))
    if docstring:
        return text.rstrip()
    body = ast.parse(text).body[0]
    first = body.body[0] if getattr(body, "body", None) else None  # type: ignore[attr-defined]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = text.splitlines()
        del lines[first.lineno - 1:first.end_lineno]
        text = "\n".join(lines)
    return text.rstrip()


def show_source(fn: Callable[..., Any], *, docstring: bool = False) -> None:
    """Lessons 01, 05 and 08-14: Print the code of ``fn`` (its docstring left out unless ``docstring=True``)."""
    print(source_text(fn, docstring=docstring))
