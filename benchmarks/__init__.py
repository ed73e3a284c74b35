"""Speed and memory measurements, printed as ratios; each runs as a module from the repository's root:
``python -m benchmarks.NAME`` (``make bench``, ``make bench-attention``)."""
