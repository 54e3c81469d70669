# The Geometry of Positional Encodings: set-up, book build and tests.
#
#   make book       set up (.venv, posgeo, MathJax and the chart libraries), execute every chapter, sync the
#                   jupytext pairs, build the HTML into _build/html
#   make test       set up, then unit tests + doctests + jupytext pair check, nbval on every
#                   chapter (strict, training cells within their tolerance), the cross-kernel
#                   check, HTML build (no execution) and the browser test
#   make test-kernels  the cross-kernel check alone: chapters 1, 4 and 6 under two other CPU kernel paths
#   make test-browser  the browser test alone, on the book already built (make html)
#   make test-fast  set up, then the unit tests and doctests that are not marked slow
#   make benchmarks run the six benchmark scripts (minutes; POSGEO_DATA_DIR needed), store
#                   their JSON in benchmarks/results/ and regenerate book/benchmarks.md
#   make benchmarks-page  regenerate book/benchmarks.md from the stored results only
#   make p2-learned train chapter 11's decoder without positional encoding until it learns P2's tasks and
#                   the counting control (15 runs, two at a time: 56 minutes on 2 CPU cores; resumable)
#                   into book/data/ch11_learned.csv and book/data/ch11_learned_curves.csv, then analyses each
#                   model (probes, interventions, kernel fit; the weights kept in the cache, so a model is
#                   trained again only where the cache lacks it) into book/data/ch11_learned_analysis.csv
#   make p2-learned-extra  the same for addition with 6 layers, with width 64 and from other embedding stds
#                   (12 runs, about 50 minutes) into book/data/ch11_learned_{deep,width64,init_0.002,init_0.2}*.csv
#   make p2-learned-long  addition, indexing and sorting trained 2.5 times longer, 10,000 steps (9 runs, about
#                   75 minutes) into book/data/ch11_learned_long*.csv
#   make p1-controls  the controls of P1's training claims (about 3 hours on 2 cores): chapter 10's controlled
#                   runs (masked tokens of IMDB and SST-2, 16 tables x 5 seeds: P_MDS against its permuted rows,
#                   random tables, the corrected distances, other scales; the merge test of every learned table;
#                   resumable) into book/data/ch10_controls*.{csv,json}; chapter 7's low-rank trade-off on IMDB at
#                   128 positions (9 tables x 3 seeds, resumable) into book/data/ch07_lowrank_imdb*; chapter 5's
#                   merge-penalty sweep (5 strengths x 4 runs x 5 seeds) into book/data/ch05_sweep.csv; chapter 8's
#                   linearised model (30 runs) into book/data/ch08_linearised.csv; chapter 7's ring/line/mixture
#                   tables (15 runs) into book/data/ch07_cross.csv (the last three are rewritten whole, the
#                   sweep beside the other two)
#   P2's scale needs a GPU: OUT=folder tools/gpu_p2_full.sh [SECONDS] (see the script; it is not a make target)
#   P1's controls at full scale too: make p1-gpu-prepare here, then OUT=folder tools/gpu_p1_controls.sh there
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

.PHONY: help setup sync execute html book test test-fast test-unit test-nb test-kernels test-browser clean clean-cache \
        benchmarks benchmarks-page p2-learned p2-learned-extra p2-learned-long p1-controls p1-gpu-prepare

help:
	@echo "make book       set up, execute every chapter, build the HTML (_build/html/index.html)"
	@echo "make test       set up, then every test: unit + doctests, pair check, nbval, kernels, HTML build, browser"
	@echo "make test-fast  set up, then the unit tests and doctests not marked slow"
	@echo "make test-kernels  nbval on chapters 1, 4 and 6 under two other CPU kernel paths (within the tolerances)"
	@echo "make html       build the HTML from the stored outputs (no execution)"
	@echo "make benchmarks run the benchmark scripts and regenerate book/benchmarks.md (needs POSGEO_DATA_DIR)"
	@echo "make benchmarks-page  regenerate book/benchmarks.md from benchmarks/results/*.json"
	@echo "make p2-learned  train chapter 11's NoPE decoder on every task x seed not yet in book/data/ch11_learned.csv (2 processes)"
	@echo "make p2-learned-extra  chapter 11's 6-layer and initialisation runs (addition)"
	@echo "make p2-learned-long   chapter 11's 10,000-step runs of addition, indexing and sorting"
	@echo "make p1-controls  P1's training controls (chapters 5, 7, 8, 10), resumable; about 3 hours on 2 cores"
	@echo "make p1-gpu-prepare  pickle the full-scale controls' corpora for tools/gpu_p1_controls.sh on a GPU"
	@echo "make clean      remove _build (keeps .venv, node_modules and .cache)"
	@echo "make clean-cache  remove the result cache (POSGEO_CACHE_DIR; entries are keyed on posgeo's code, so edits never reuse stale ones)"

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
	@echo "[$$($(NOW))] set-up: MathJax, vega, vega-lite, vega-embed (npm ci)"
	npm ci --no-audit --no-fund
	test -f node_modules/mathjax/es5/tex-mml-chtml.js
	test -f node_modules/vega-embed/build/vega-embed.min.js
	touch $@

setup: $(SETUP_STAMP) $(NPM_STAMP)
	@mkdir -p "$(POSGEO_CACHE_DIR)"

# ---------------------------------------------------------------- book
sync: setup
	jupytext --sync $(CHAPTERS)

# Chapters run single-threaded (OMP_NUM_THREADS=1, for reproducible outputs), so BOOK_JOBS of
# them run at once, one per core (default: 2, this project's 2-core machines). They share the
# result cache, whose writes are atomic; a chapter that needs another's cached result before it
# exists computes it itself (the same numbers).
BOOK_JOBS ?= 2
# The stored outputs are the AVX2 kernel path's: an AVX-512 machine told to use AVX2 code
# (ATen, MKL, oneDNN, OpenBLAS's Haswell kernels, numpy's loops without AVX-512) reproduces
# them exactly, and on an AVX2 machine these settings are its own. So `make execute` gives
# the same outputs on either, and nbval (which runs on the machine's own path) compares the
# reader's machine with that reference. EXECUTE_ENV= executes on the machine's own path.
EXECUTE_ENV ?= OPENBLAS_CORETYPE=Haswell NPY_DISABLE_CPU_FEATURES=X86_V4,AVX512_ICL,AVX512_SPR \
               ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
execute: sync
	@printf '%s\n' $(CHAPTERS) | xargs -P $(BOOK_JOBS) -I{} env $(EXECUTE_ENV) sh -c '\
	  echo "[$$(date +%H:%M:%S)] executing {}"; \
	  jupyter nbconvert --to notebook --execute --inplace --log-level=WARN \
	    --ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=1800 "{}" \
	  && echo "[$$(date +%H:%M:%S)] done {}"'
	jupytext --sync $(CHAPTERS)

# The API reference (book/api_library.md, api_experiments.md, api_audit.md) is generated during the build by tools/posgeo_api.py:
# the library (posgeo.__all__, module by module), then posgeo.experiments, then posgeo.audit;
# book/benchmarks.md is generated by `make benchmarks`.
html: setup
	@echo "[$$($(NOW))] building the HTML (no execution)"
	jupyter-book build . $(JB_FLAGS)
	test -f _build/html/_static/mathjax/tex-mml-chtml.js
	test -f _build/html/_static/posgeo-vega/vega-embed.min.js
	@echo "[$$($(NOW))] example audit report: posgeo audit sst2 (all-MiniLM-L6-v2, 48 positions)"
	posgeo audit sst2 --positions 48 --out _build/html/audit/sst2-minilm --no-progress > /dev/null
	test -f _build/html/audit/sst2-minilm/report.html
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
# -p nbtolerance (tests/nbtolerance.py): cells tagged "stochastic" (training outputs) compare
# their numbers within the cell's "tolerance" metadata; every other cell is strict nbval.
NBVAL_CACHE_DIR ?= $(CURDIR)/_build/nbval-cache
# The chapters are spread over BOOK_JOBS pytest-xdist workers, a whole notebook per worker
# (--dist loadfile: its cells share one kernel); the plugin's summary gathers every worker's cells.
NBVAL := $(PYTEST) -p nbtolerance --nbval --nbval-current-env
test-nb: setup
	@echo "[$$($(NOW))] nbval (strict; training cells within their tolerance) on every chapter, $(BOOK_JOBS) at a time"
	@if [ -n "$(NBVAL_CACHE_DIR)" ]; then rm -rf "$(NBVAL_CACHE_DIR)"; fi
	POSGEO_CACHE_DIR="$(or $(NBVAL_CACHE_DIR),$(POSGEO_CACHE_DIR))" $(NBVAL) -n $(BOOK_JOBS) --dist loadfile $(CHAPTERS)

# The cross-kernel check: chapters re-run by nbval under CPU kernel paths other than the one
# that computed their stored outputs, each from an empty cache, in parallel: chapter 4 (the
# quickest that trains), and chapters 1 and 6 (linear algebra whose float64 rounding reaches
# their tables and charts). Two paths, neither of them any real machine's own, so the check
# means the same on an AVX2 or an AVX-512 host: ATen's generic kernels with OpenBLAS's
# Sandybridge (AVX) kernels; and ATen's AVX2 kernels with MKL, oneDNN and OpenBLAS held to
# SSE code paths and numpy's SIMD loops to its x86-64-v2 baseline. Each run must pass with
# the tolerances (cells tagged "stochastic") and must actually differ from the stored outputs
# in some tagged cell (--nbtolerance-require-difference), or it would show nothing.
# A path's variables are joined by "+" (a value may hold commas).
KERNEL_CHAPTERS ?= book/01_introduction.ipynb book/02_permutation_equivariance.ipynb book/06_sinusoids_circulant.ipynb
KERNEL_PATHS := default:ATEN_CPU_CAPABILITY=default+OPENBLAS_CORETYPE=Sandybridge \
                sse:ATEN_CPU_CAPABILITY=avx2+MKL_ENABLE_INSTRUCTIONS=SSE4_2+ONEDNN_MAX_CPU_ISA=SSE41+OPENBLAS_CORETYPE=Nehalem+NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL,AVX512_SPR
KERNEL_DIR := $(CURDIR)/_build/kernel-check
test-kernels: setup
	@echo "[$$($(NOW))] cross-kernel check: nbval with tolerances on $(KERNEL_CHAPTERS) under other CPU kernel paths"
	@rm -rf "$(KERNEL_DIR)"; mkdir -p "$(KERNEL_DIR)"; \
	pids=""; \
	for spec in $(KERNEL_PATHS); do \
	  name=$${spec%%:*}; vars=$${spec#*:}; vars=$${vars//+/ }; \
	  echo "[$$($(NOW))]   $$name: $$vars (log: $(KERNEL_DIR)/$$name.log)"; \
	  ( rc=0; env $$vars POSGEO_CACHE_DIR="$(KERNEL_DIR)/cache-$$name" \
	      $(NBVAL) --nbtolerance-require-difference -p no:cacheprovider $(KERNEL_CHAPTERS) \
	      > "$(KERNEL_DIR)/$$name.log" 2>&1 || rc=$$?; echo $$rc > "$(KERNEL_DIR)/$$name.rc" ) & \
	  pids="$$pids $$!"; \
	done; \
	wait $$pids; \
	failed=""; \
	for spec in $(KERNEL_PATHS); do \
	  name=$${spec%%:*}; vars=$${spec#*:}; \
	  echo "---------------- $$name: $${vars//+/ }"; \
	  sed -n '/nbtolerance: cells tagged/,$$p' "$(KERNEL_DIR)/$$name.log"; \
	  if [ "$$(cat "$(KERNEL_DIR)/$$name.rc")" != 0 ]; then failed="$$failed $$name"; cat "$(KERNEL_DIR)/$$name.log"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "[$$($(NOW))] cross-kernel check FAILED:$$failed"; exit 1; fi; \
	echo "[$$($(NOW))] cross-kernel check passed"

test-browser: setup
	@echo "[$$($(NOW))] browser test"
	$(PYTEST) tests/browser

# Every phase runs even when an earlier one fails, so one run reports everything; the
# target fails if any phase failed. Each phase prints its duration.
test: setup
	@echo "[$$($(NOW))] make test: start"
	@failed=""; \
	for phase in test-unit test-nb test-kernels html test-browser; do \
	  t0=$$SECONDS; \
	  $(MAKE) --no-print-directory $$phase || failed="$$failed $$phase"; \
	  echo "[$$($(NOW))] $$phase took $$((SECONDS - t0)) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "[$$($(NOW))] make test: FAILED:$$failed"; exit 1; fi; \
	echo "[$$($(NOW))] make test: all passed"

test-fast: setup
	$(PYTEST) tests --ignore=tests/browser --doctest-modules companion/src/posgeo -m "not slow"

# ---------------------------------------------------------------- benchmarks
# Minutes of CPU: run on a quiet machine. bench_marginals.py reads IMDB from POSGEO_DATA_DIR.
benchmarks: setup
	@echo "[$$($(NOW))] benchmarks (results -> benchmarks/results/, page -> book/benchmarks.md)"
	$(BIN)/python benchmarks/report.py run --render

benchmarks-page: setup
	$(BIN)/python benchmarks/report.py render

# ---------------------------------------------------------------- data files
# Chapter 11's decoder without positional encoding trained until it learns P2's four tasks and the counting
# control (_ch11.LEARNED: 5 tasks x 3 seeds, two processes of one thread). Resumable: runs already in the
# table are kept, a run cut short restarts from its last checkpoint; other settings are refused.
p2-learned: setup
	cd book && $(BIN)/python _ch11.py learned data/ch11_learned.csv --jobs 2
	cd book && $(BIN)/python _ch11.py analyse data/ch11_learned.csv --jobs 2

p2-learned-extra: setup
	cd book && $(BIN)/python _ch11.py learned data/ch11_learned_deep.csv --tasks addition --set n_layers=6 --jobs 2
	cd book && $(BIN)/python _ch11.py analyse data/ch11_learned_deep.csv --tasks addition --set n_layers=6 --jobs 2
	cd book && $(BIN)/python _ch11.py learned data/ch11_learned_width64.csv --tasks addition --set d_model=64 n_heads=4 d_ff=128 --jobs 2
	cd book && $(BIN)/python _ch11.py analyse data/ch11_learned_width64.csv --tasks addition --set d_model=64 n_heads=4 d_ff=128 --jobs 2
	cd book && for std in 0.002 0.2; do \
	  $(BIN)/python _ch11.py learned data/ch11_learned_init_$$std.csv --tasks addition --set init_std=$$std --jobs 2 && \
	  $(BIN)/python _ch11.py analyse data/ch11_learned_init_$$std.csv --tasks addition --set init_std=$$std --jobs 2 || exit 1; \
	done

p2-learned-long: setup
	cd book && $(BIN)/python _ch11.py learned data/ch11_learned_long.csv --tasks addition indexing sorting --set steps=10000 --jobs 2

P1_LOWRANK = corpora=imdb:128 cls_encodings= seeds=0,1,2 \
  "encodings=none,learned,lowrank k=1,lowrank k=4,lowrank k=16,lowrank k=2,lowrank k=8,lowrank k=32,lowrank k=64"
P1_GPU_LOWRANK = corpora=imdb:256 cls_encodings= \
  "encodings=none,learned,lowrank k=1,lowrank k=4,lowrank k=16,lowrank k=64,lowrank k=2,lowrank k=8,lowrank k=32"
P1_GPU_CONTROLS = corpora=imdb:64,sst2:32 d_model=128 n_heads=8 n_layers=4 d_ff=512 steps=3000 cls_steps=1000 \
  batch_size=128 lr=0.001 top_k=2000
p1-controls: setup
	cd book && $(BIN)/python _ch10_controls.py run data/ch10_controls.csv --jobs 2
	cd book && $(BIN)/python _ch10_controls.py run data/ch07_lowrank_imdb.csv --set $(P1_LOWRANK) --jobs 2
	@# the three one-core parts, two at a time (the sweep beside the other two); a failure fails the target
	cd book && { env $(EXECUTE_ENV) OMP_NUM_THREADS=1 $(BIN)/python _ch05.py sweep & sweep=$$!; \
	  $(BIN)/python _ch08.py linearised data/ch08_linearised.csv && \
	  $(BIN)/python _ch07.py cross data/ch07_cross.csv; rest=$$?; wait $$sweep && exit $$rest; }

# The same controls at full scale need a GPU: this pickles their corpora for the GPU machine (no data there);
# then OUT=folder tools/gpu_p1_controls.sh [SECONDS] there (see the script).
p1-gpu-prepare: setup
	mkdir -p .gpu
	cd book && $(BIN)/python _ch10_controls.py prepare ../.gpu/p1_lowrank_256.pkl.gz --set $(P1_GPU_LOWRANK)
	cd book && $(BIN)/python _ch10_controls.py prepare ../.gpu/p1_controls_full.pkl.gz --set $(P1_GPU_CONTROLS)

clean:
	rm -rf _build

# Results are cached by their inputs and by the code that computed them (posgeo's sources and a
# chapter helper's file are part of every key): this only frees the disk.
clean-cache:
	rm -rf "$(POSGEO_CACHE_DIR)"
