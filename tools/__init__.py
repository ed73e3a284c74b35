"""Harness code that tests, scripts and benchmarks share, outside the package (it is not installed).

Imported from the repository's root: pytest puts the root on its path (``pythonpath`` in
``pyproject.toml``); scripts and benchmarks run as modules from the root (``python -m scripts.NAME``).

* ``background``: child processes whose outcome a test checks, started when the tests are known.
* ``browser_support``: real JupyterLab in headless Chromium (browser tests, README pictures, latency benchmark).
* ``colab_standin`` and ``colab_probe``: Colab's own package versions, the helpers installed as Colab does.
* ``nbval_run``: strict nbval over several notebooks in a child pytest, read back per notebook and cell.
* ``verdict_lines``: whether a checker's printed verdict fits a learner's output area (the checks' and exercises' tests).
"""
