# The two commands of the README's Quick start, plus benchmarks. Each target creates or updates
# .venv on first use (Python 3.10+ with pip is all a fresh machine needs).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test fuzz-load bench bench-full bench-smoke bench-torch bench-jax bench-history bench-compare \
	compare warmup generate clean

$(VENV)/.installed-%: pyproject.toml
	@test -x $(PY) || { echo "Creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "Installing tapejit with its [$*] extra into $(VENV) (pip: about a minute the first time)"
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[$*]"
	@touch $@

demo: $(VENV)/.installed-demo
	@$(PY) -m jit.warmup
	$(PY) examples/fit_ode.py

# NumPy picks a loop per CPU for its transcendentals (AVX-512, AVX2, baseline) and OpenBLAS a
# kernel per CPU core: the whole suite runs a second time with every target NumPy dispatches off
# (its baseline loops) and OpenBLAS's Nehalem kernels (SSE only, no FMA; any x86-64 CPU NumPy 2
# runs on has them), so a test that holds on one CPU family only fails on any machine.
LOWERED_DISPATCH = $(shell $(PY) -c "import numpy as np; \
	m = getattr(np, '_core', None) or np.core; print(' '.join(m._multiarray_umath.__cpu_dispatch__))")
LOWERED = NPY_DISABLE_CPU_FEATURES="$(LOWERED_DISPATCH)" OPENBLAS_CORETYPE=Nehalem
# the kernels' Python fallbacks (NUMBA_DISABLE_JIT=1) against the same checks as compiled
NOJIT_TESTS := tests/test_table.py tests/test_tangent.py tests/test_forward_sweep.py

# Each leg runs even when one before it fails; `make test` then fails, naming the failed legs.
test: $(VENV)/.installed-test
	@$(PY) -m jit.warmup
	@failed=; \
	leg() { printf '\n== %s: %s\n' "$$1" "$$2"; eval "$$2" || failed="$$failed, $$1"; }; \
	leg "tests" "$(PY) -m pytest -q"; \
	leg "tests without the JIT" "NUMBA_DISABLE_JIT=1 $(PY) -m pytest -q $(NOJIT_TESTS)"; \
	leg "tests on lowered dispatch" '$(LOWERED) $(PY) -m pytest -q -p no:cacheprovider'; \
	if [ -n "$$failed" ]; then echo "make test: failed: $${failed#, }"; exit 1; fi

# tape.load of hostile files (docs/security.md): every field of saved tapes of several shapes
# set to hostile values, one field per case (tests/_fuzz_load.py; `make test` runs a sample of
# 2,500 in tests/test_load_fuzz.py). Each case must be refused at load or replay to a value and
# a gradient that agree; a hang ends the run (a per-case watchdog). N cases (0: all ~10,000,
# ~40 s on 2 cores) in an order set by SEED; the last case run is named if the run fails.
SEED ?= 0
FUZZ_LOG := $(or $(TMPDIR),/tmp)/tapejit-fuzz-load.log

fuzz-load: N = 0
fuzz-load: $(VENV)/.installed-test
	$(PY) -m jit.warmup
	$(PY) -W ignore tests/_fuzz_load.py $(N) $(SEED) > $(FUZZ_LOG); status=$$?; \
	grep -v '^case ' $(FUZZ_LOG); \
	if [ $$status -ne 0 ]; then echo "last case: $$(grep '^case ' $(FUZZ_LOG) | tail -n 1)"; fi; \
	exit $$status

# asv against the working tree (environment "existing" = .venv, tapejit installed editable),
# single-threaded BLAS like the anchors in WORKLOADS.md. `bench`: every benchmark once (quick
# numbers); `bench-full`: asv's normal sampling; `bench-smoke`: every benchmark once, nothing
# saved, non-zero exit if any benchmark errors (skips, e.g. PyTorch absent, are fine) -- for CI.
# `compare`: tapejit vs PyTorch (TORCH_PYTHON) vs NumPy primal vs hand-written, side by side.
ASV := cd asv_bench && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ../$(PY) -m asv
TORCH_PYTHON ?= /tmp/torchenv/bin/python

bench: $(VENV)/.installed-bench
	$(ASV) machine --yes >/dev/null
	$(ASV) run --python=same --quick --show-stderr

bench-full: $(VENV)/.installed-bench
	$(ASV) machine --yes >/dev/null
	$(ASV) run --python=same --show-stderr

bench-smoke: $(VENV)/.installed-bench
	$(ASV) machine --yes >/dev/null
	$(ASV) check --python=same
	$(ASV) run --python=same --quick --dry-run --show-stderr --durations 5

# The asv suite inside a throwaway virtualenv that has torch==2.13.0: the PyTorch column appears
# beside tapejit's in the same run (tapejit is installed there editable; torch stays out of .venv).
bench-torch:
	$(TORCH_PYTHON) -m pip install --quiet -e . asv
	$(TORCH_PYTHON) -m jit.warmup
	cd asv_bench && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(TORCH_PYTHON) -m asv machine --yes >/dev/null && \
		OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(TORCH_PYTHON) -m asv run --python=same --bench bench_workloads --show-stderr

# The compiled-replay benchmarks beside JAX's jit (W2-W4) in one asv run, inside a throwaway
# virtualenv that has jax (tapejit installed there editable; jax stays out of .venv).
JAX_PYTHON ?= /tmp/peerenv/bin/python

bench-jax:
	$(JAX_PYTHON) -m pip install --quiet -e . asv jax
	$(JAX_PYTHON) -m jit.warmup
	cd asv_bench && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(JAX_PYTHON) -m asv machine --yes >/dev/null && \
		OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(JAX_PYTHON) -m asv run --python=same --show-stderr \
		--bench "bench_compiled|bench_fit|bench_targets|W[234][A-Za-z]*Jax"

# Performance history (docs/benchmarking.md): the last N commits of BRANCH, each built and installed
# by asv into a virtualenv (asv_bench/asv.history.conf.json; PyPI needed once for numba/numpy),
# Numba warmed per commit, HISTORY_BENCH timed with asv's normal sampling; commits already in
# asv_bench/results-history are skipped, so re-running only measures new commits. Then
# `asv publish` writes the HTML report to asv_bench/html (open index.html, or `asv preview`).
N ?= 5
BRANCH ?= main
HISTORY_BENCH ?= bench_workloads\..*\.(time|peakmem)_tapejit_grad|bench_workloads\.W1Lorenz\.time_numpy_primal|bench_kernels\.(Record|ReverseSweep)\.time_
ASVH := $(ASV) --config asv.history.conf.json

bench-history: $(VENV)/.installed-bench
	$(ASV) machine --yes >/dev/null
	@mkdir -p asv_bench/.asv
	git rev-list --first-parent -n $(N) $(BRANCH) > asv_bench/.asv/history-hashes.txt
	($(ASVH) run --skip-existing --show-stderr --bench '$(HISTORY_BENCH)' \
		HASHFILE:.asv/history-hashes.txt); status=$$?; \
	($(ASVH) publish) && echo "report: asv_bench/html/index.html" && exit $$status

# Regression gate before merging (docs/benchmarking.md): the working tree against BASE on a fast
# subset (asv_bench/gate.py: tapejit gradients W1-W5, recording, reverse sweep), both sides in
# .venv, alternated ROUNDS times; exits 1 if any benchmark is slower than BASE by more than
# FACTOR (1.75, from the noise study in docs/benchmarking.md). ~2 min on the 2-core VM.
BASE ?= main
FACTOR ?= 1.75
ROUNDS ?= 4

bench-compare: $(VENV)/.installed-bench
	$(ASV) machine --yes >/dev/null
	$(PY) asv_bench/gate.py --base $(BASE) --factor $(FACTOR) --rounds $(ROUNDS)

compare: $(VENV)/.installed-bench
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(PY) asv_bench/compare.py --torch-python $(TORCH_PYTHON) --jax-python $(JAX_PYTHON) --markdown

warmup: $(VENV)/.installed-test
	$(PY) -m jit.warmup

generate:
	$(PY) -m jit._generate
	$(PY) -m jit._generate_tangent
	$(PY) -m jit._generate_special
	$(PY) -m tape._coverage

clean:
	rm -rf .numba_cache .pytest_cache .hypothesis
