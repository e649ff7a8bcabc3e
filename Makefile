# The two commands of the README's Quick start, plus benchmarks. Each target creates or updates
# .venv on first use (Python 3.10+ with pip is all a fresh machine needs).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export NUMBA_CACHE_DIR ?= $(CURDIR)/.numba_cache

.PHONY: demo test test-nojit bench warmup generate clean

$(VENV)/.installed-%: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$*]"
	@touch $@

demo: $(VENV)/.installed-demo
	$(PY) -m jit.warmup
	$(PY) examples/fit_ode.py

test: $(VENV)/.installed-test
	$(PY) -m jit.warmup
	$(PY) -m pytest -q
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -q tests/test_table.py

bench: $(VENV)/.installed-bench
	cd asv_bench && ../$(PY) -m asv run --python=same --quick --show-stderr -E existing:../$(PY)

warmup: $(VENV)/.installed-test
	$(PY) -m jit.warmup

generate:
	$(PY) -m jit._generate

clean:
	rm -rf .numba_cache .pytest_cache .hypothesis
