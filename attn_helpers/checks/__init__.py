"""Exercise checkers (filled in by the lessons)."""
