"""Interactive explorers (filled in by the lessons)."""
