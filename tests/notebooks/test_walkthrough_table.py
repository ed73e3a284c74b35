"""Lesson 00's table of the four walkthroughs lists, for each, every lesson whose text or code names it.

A learner uses the table to find where a walkthrough is quoted or rebuilt; a lesson that names it and is
missing from the table (a reader found 01 missing from 004's row) sends them past it.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
ROW = re.compile(r"^\| (\d{3}) \|.*\| ([0-9a, ]+) \|$", re.MULTILINE)


def lessons_naming(walkthrough: str) -> list[str]:
    """The lessons (``"01"``, ``"03a"``, ...) other than 00 whose cell sources say "walkthrough <number>"."""
    named = re.compile(rf"\bwalkthrough {walkthrough}\b", re.IGNORECASE)
    found = []
    for path in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        lesson = path.name.split("_")[0]
        cells = nbformat.read(path, as_version=4).cells
        if lesson != "00" and any(named.search(cell.source) for cell in cells):
            found.append(lesson)
    return found


def table_rows() -> dict[str, list[str]]:
    cells = nbformat.read(NOTEBOOKS_DIR / "00_orientation.ipynb", as_version=4).cells
    table = next(cell.source for cell in cells if "| walkthrough | what it shows |" in cell.source)
    return {number: [s.strip() for s in lessons.split(",")] for number, lessons in ROW.findall(table)}


def test_the_walkthrough_table_lists_every_lesson_that_names_each_walkthrough():
    rows = table_rows()
    assert sorted(rows) == ["000", "001", "002", "004"], rows
    for number, lessons in rows.items():
        assert lessons == lessons_naming(number), (
            f"00's table lists walkthrough {number} in lessons {lessons}; the lessons that name it are "
            f"{lessons_naming(number)}")
