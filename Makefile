# calib: every set-up step is here. `make demo` and `make test` work on a fresh machine with
# Python >= 3.11 and access to the package registry: each creates .venv if missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CALIB  := $(BIN)/calib
DEMO   := demo_output
# The test and lint tools (and the runtime versions CI runs) are pinned here; pyproject.toml
# keeps the runtime ranges. `make lock` refreshes the pins on purpose.
LOCK   := requirements/lock.txt
LOWEST := .venv-lowest
# Tests of the numbers (not of the command line): run again under other BLAS kernels and one
# thread, since results must not depend on the CPU's summation order.
NUMERIC_TESTS := calib_cli/core $(filter-out tests/test_cli_% tests/test_docs.py \
                 tests/test_architecture.py tests/test_io.py,$(wildcard tests/test_*.py))

.DEFAULT_GOAL := help
.PHONY: help install demo test test-slow test-kernels test-engines test-lowest check lint format typecheck \
        lock bench sample-data clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "calib needs Python >= 3.11 (set PYTHON=python3.11)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip -c $(LOCK)
	$(BIN)/python -m pip install --quiet -e '.[dev,plot]' -c $(LOCK)
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install calib with its test tools

demo: $(STAMP) ## Run the whole pipeline on sample_data/, printing what each step finds
	@CALIB=$(CALIB) OUT=$(DEMO) sh sample_data/demo.sh

# Most tests run the installed calib in a subprocess: its bytecode is written once before
# them (compileall writes it even under PYTHONDONTWRITEBYTECODE, which some shells and CI
# images set), so that no subprocess compiles calib's modules again (0.03-0.05 s each).
BYTECODE = $(BIN)/python -m compileall -q calib_cli
# pytest likewise keeps the test modules it rewrites (for its assertion messages) as bytecode
# in tests/__pycache__, unless PYTHONDONTWRITEBYTECODE is set: then every run rewrites them
# again, 4-5 s in each worker. The test runs keep them whatever the shell says.
PYTEST = PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

test: $(STAMP) ## Run the test suite (all but the slow checks, which test-slow runs)
	@$(BYTECODE)
	$(PYTEST) -q -n 2 --dist worksteal -m "not slow"

test-slow: $(STAMP) ## Run the slow checks (interval coverage over many repetitions, big fits)
	@$(BYTECODE)
	$(PYTEST) -q -n 2 --dist worksteal -m slow

test-kernels: $(STAMP) ## The numeric tests under the Haswell and Prescott BLAS kernels, one thread, no AVX-512
	@$(BYTECODE)
	@if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then \
	  echo "OPENBLAS_CORETYPE=Haswell"; OPENBLAS_CORETYPE=Haswell $(PYTEST) -q -n 2 --dist worksteal -m "not slow" $(NUMERIC_TESTS) || exit 1; \
	else echo "no AVX2 on this CPU: the Haswell kernel cannot run here"; fi
	OPENBLAS_CORETYPE=Prescott $(PYTEST) -q -n 2 --dist worksteal -m "not slow" $(NUMERIC_TESTS)
	OPENBLAS_NUM_THREADS=1 $(PYTEST) -q -n 2 --dist worksteal -m "not slow" $(NUMERIC_TESTS)
	NPY_DISABLE_CPU_FEATURES="$$($(BIN)/python -c 'from tests.conftest import NO_AVX512; print(NO_AVX512)')" $(PYTEST) -q -n 2 --dist worksteal -m "not slow" $(NUMERIC_TESTS)

test-engines: $(STAMP) ## The emitted SQL in Spark local mode (pytest -m spark; needs Java 17)
	$(PYTEST) -q -p no:cacheprovider -m spark

test-lowest: ## Run the tests at the lowest runtime versions pyproject.toml allows (own venv)
	@test -x $(LOWEST)/bin/python || $(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python requirements/lowest.py > $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip -c $(LOCK)
	$(LOWEST)/bin/python -m pip install --quiet -e '.[dev,plot]' -c $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip list 2>/dev/null | grep -iE '^(numpy|scipy|polars|typer|rich|threadpoolctl|matplotlib) '
	PYTHONDONTWRITEBYTECODE= $(LOWEST)/bin/pytest -q -n 2 --dist worksteal -p no:cacheprovider

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check calib_cli tests bench sample_data
	$(BIN)/ruff format --check calib_cli tests bench sample_data

format: $(STAMP) ## Format the code with ruff
	$(BIN)/ruff format calib_cli tests bench sample_data
	$(BIN)/ruff check --fix calib_cli tests bench sample_data

typecheck: $(STAMP) ## mypy --strict on the package
	$(BIN)/mypy --strict calib_cli

check: lint typecheck test ## lint, type-check and test

lock: ## Refresh $(LOCK) to the newest versions pyproject.toml allows (on purpose, then test)
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --upgrade pip
	.venv-lock/bin/python -m pip install --quiet '.[dev,plot,bench]'
	{ echo "# The test and lint toolchain (and the runtime versions CI tests against), pinned."; \
	  echo "# Refresh on purpose with 'make lock'; pyproject.toml keeps the runtime ranges."; \
	  .venv-lock/bin/python -m pip freeze --all | grep -viE '^(calib-cli|setuptools)[=@ ]'; } > $(LOCK)
	rm -rf .venv-lock
	@echo "wrote $(LOCK); run 'make install test' to use it"

bench: $(STAMP) ## Benchmarks against reference implementations (ratios)
	$(BIN)/python -m pip install --quiet -e '.[dev,plot,bench]' -c $(LOCK)
	$(BIN)/python bench/run_all.py

sample-data: $(STAMP) ## Regenerate sample_data/ (deterministic)
	$(BIN)/python sample_data/make_sample_data.py

clean: ## Remove the virtual environment, caches and demo output
	rm -rf $(VENV) $(LOWEST) $(DEMO) .pytest_cache .mypy_cache .ruff_cache .hypothesis
