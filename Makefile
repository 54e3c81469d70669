# The Geometry of Positional Encodings: set-up, book build and tests.
#
#   make book       set up (.venv, posgeo, MathJax), execute every chapter, sync the
#                   jupytext pairs, build the HTML into _build/html
#   make test       set up, then unit tests + doctests + jupytext pair check, strict nbval on
#                   every chapter, HTML build (no execution) and the browser test
#   make test-browser  the browser test alone, on the book already built (make html)
#   make test-fast  set up, then the unit tests and doctests that are not marked slow
#
# Set-up is shared and idempotent: a stamp file (newer than companion/pyproject.toml,
# tools/constraints.txt and this Makefile) makes a re-run quick.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
SETUP_STAMP := $(VENV)/.posgeo-setup.stamp
NPM_STAMP := node_modules/.posgeo-npm.stamp
CHAPTERS = $(sort $(wildcard book/*.ipynb))
PIP := $(BIN)/python -m pip
PIP_INSTALL := $(PIP) install -c tools/constraints.txt
JB_FLAGS ?= --warningiserror --keep-going
PYTEST := $(BIN)/python -m pytest

# Deterministic, quiet execution: nbconvert (make book) and nbval (make test) must see the
# same environment so that the stored outputs are reproduced exactly.
export PATH := $(BIN):$(PATH)
export TQDM_DISABLE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export HF_DATASETS_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TOKENIZERS_PARALLELISM := false
export PYTHONHASHSEED := 0
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Local corpora: POSGEO_DATA_DIR is passed through as it is (unset: the Hugging Face hub).
# Cache of expensive results: inside the repository unless set.
export POSGEO_CACHE_DIR ?= $(CURDIR)/.cache/posgeo

NOW = date +%H:%M:%S

.PHONY: help setup sync execute html book test test-fast test-unit test-nb test-browser clean clean-cache

help:
	@echo "make book       set up, execute every chapter, build the HTML (_build/html/index.html)"
	@echo "make test       set up, then every test: unit + doctests, pair check, nbval, HTML build, browser"
	@echo "make test-fast  set up, then the unit tests and doctests not marked slow"
	@echo "make html       build the HTML from the stored outputs (no execution)"
	@echo "make clean      remove _build (keeps .venv, node_modules and .cache)"
	@echo "make clean-cache  remove the result cache (POSGEO_CACHE_DIR); do it after changing posgeo"

# ---------------------------------------------------------------- set-up
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(SETUP_STAMP): $(BIN)/python companion/pyproject.toml tools/constraints.txt Makefile
	@echo "[$$($(NOW))] set-up: python packages"
	$(PIP_INSTALL) torch==2.13.0
	$(PIP_INSTALL) -e "companion[test,book]"
	$(BIN)/python -c "import torch, sys; v = torch.__version__; print('torch', v); sys.exit(0 if v.startswith('2.13.0') else 'torch ' + v + ' was installed; this project needs torch==2.13.0')"
	touch $@

$(NPM_STAMP): package.json package-lock.json
	@echo "[$$($(NOW))] set-up: MathJax (npm ci)"
	npm ci --no-audit --no-fund
	test -f node_modules/mathjax/es5/tex-mml-chtml.js
	touch $@

setup: $(SETUP_STAMP) $(NPM_STAMP)
	@# Build matplotlib's font cache now, so its one-time notice never lands in a cell output.
	$(BIN)/python -c "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"
	@mkdir -p "$(POSGEO_CACHE_DIR)"

# ---------------------------------------------------------------- book
sync: setup
	jupytext --sync $(CHAPTERS)

execute: sync
	@for nb in $(CHAPTERS); do \
	  echo "[$$($(NOW))] executing $$nb"; \
	  jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=1800 "$$nb"; \
	done
	jupytext --sync $(CHAPTERS)

html: setup
	@echo "[$$($(NOW))] building the HTML (no execution)"
	jupyter-book build . $(JB_FLAGS)
	test -f _build/html/_static/mathjax/tex-mml-chtml.js
	@echo "[$$($(NOW))] book: $(CURDIR)/_build/html/index.html"

book: execute
	$(MAKE) --no-print-directory html

# ---------------------------------------------------------------- tests
test-unit: setup
	@echo "[$$($(NOW))] unit tests, doctests, pair check"
	$(PYTEST) tests --ignore=tests/browser --doctest-modules companion/src/posgeo

# nbval recomputes every chapter from an EMPTY result cache (as CI does on a fresh clone), so
# a stale .cache/posgeo can never make a local run pass where CI would fail.
# NBVAL_CACHE_DIR= (empty) reuses POSGEO_CACHE_DIR instead: quicker, but not what CI sees.
NBVAL_CACHE_DIR ?= $(CURDIR)/_build/nbval-cache
test-nb: setup
	@echo "[$$($(NOW))] nbval (strict) on every chapter"
	@if [ -n "$(NBVAL_CACHE_DIR)" ]; then rm -rf "$(NBVAL_CACHE_DIR)"; fi
	POSGEO_CACHE_DIR="$(or $(NBVAL_CACHE_DIR),$(POSGEO_CACHE_DIR))" $(PYTEST) --nbval --nbval-current-env $(CHAPTERS)

test-browser: setup
	@echo "[$$($(NOW))] browser test"
	$(PYTEST) tests/browser

# Every phase runs even when an earlier one fails, so one run reports everything; the
# target fails if any phase failed. Each phase prints its duration.
test: setup
	@echo "[$$($(NOW))] make test: start"
	@failed=""; \
	for phase in test-unit test-nb html test-browser; do \
	  t0=$$SECONDS; \
	  $(MAKE) --no-print-directory $$phase || failed="$$failed $$phase"; \
	  echo "[$$($(NOW))] $$phase took $$((SECONDS - t0)) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "[$$($(NOW))] make test: FAILED:$$failed"; exit 1; fi; \
	echo "[$$($(NOW))] make test: all passed"

test-fast: setup
	$(PYTEST) tests --ignore=tests/browser --doctest-modules companion/src/posgeo -m "not slow"

clean:
	rm -rf _build

# Results are cached by inputs and package version only: clear the cache after changing
# posgeo's code, before `make book`, so the stored outputs are what a fresh run computes.
clean-cache:
	rm -rf "$(POSGEO_CACHE_DIR)"
