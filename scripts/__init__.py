"""Maintainer commands, each run as a module from the repository's root: ``python -m scripts.NAME``."""
