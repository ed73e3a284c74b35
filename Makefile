# Attention, step by step — the project's commands.
#   make lab        set up .venv if needed, then open the series in JupyterLab (localhost only)
#   make test       set up .venv if needed, then run every test (unit, notebooks, browser)
#   make notebooks  re-execute every notebook from a clean kernel and save its outputs
#   make bench / make bench-attention   explorer redraw times / plain vs tiled vs PyTorch attention
# Only Python 3.10+ is needed beforehand; everything else comes from PyPI.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 8888
NB     ?= notebooks/*.ipynb
CHROMIUM ?= $(firstword $(wildcard /usr/bin/chromium /usr/bin/chromium-browser))
# JupyterLab refuses to run as root unless told; only then is the flag added.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# Variables that leak from the shell into a kernel and change what a notebook prints.
CLEAN_ENV := env -u MPLBACKEND -u PYTHONWARNINGS

.PHONY: setup lab test notebooks bench bench-attention clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

setup: $(STAMP)

lab: setup
	@echo "Opening JupyterLab on notebooks/ (bound to 127.0.0.1); the URL with its token follows."
	cd notebooks && $(CLEAN_ENV) ../$(BIN)/jupyter lab --ip 127.0.0.1 --port $(PORT) $(ROOT_FLAG) 00_orientation.ipynb

test: setup
	@if [ -z "$(CHROMIUM)" ]; then echo "browser tests skipped: install Chromium (Debian/Ubuntu: sudo apt-get install chromium) to run them"; fi
	$(CLEAN_ENV) CHROMIUM="$(CHROMIUM)" $(BIN)/python -m pytest
	@echo "Screenshots of the browser run (if any): $(CURDIR)/build/screenshots"

notebooks: setup
	$(CLEAN_ENV) $(BIN)/python scripts/run_notebooks.py --update-readme README.md $(NB)

bench: setup
	$(BIN)/python benchmarks/widgets.py

bench-attention: setup
	$(BIN)/python benchmarks/attention.py --threads 1

clean:
	rm -rf build .pytest_cache
