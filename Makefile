# calib: every set-up step is here. `make demo` and `make test` work on a fresh machine with
# Python >= 3.11 and access to the package registry: each creates .venv if missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CALIB  := $(BIN)/calib
DEMO   := demo_output

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast check lint format typecheck bench sample-data clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "calib needs Python >= 3.11 (set PYTHON=python3.11)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install calib with its test tools

demo: $(STAMP) ## Run the whole pipeline on sample_data/, printing what each step finds
	@CALIB=$(CALIB) OUT=$(DEMO) sh sample_data/demo.sh

test: $(STAMP) ## Run the whole test suite
	$(BIN)/pytest -q -n 2

test-fast: $(STAMP) ## Run the tests without the slow statistical ones
	$(BIN)/pytest -q -n 2 -m "not slow"

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check calib_cli tests bench sample_data
	$(BIN)/ruff format --check calib_cli tests bench sample_data

format: $(STAMP) ## Format the code with ruff
	$(BIN)/ruff format calib_cli tests bench sample_data
	$(BIN)/ruff check --fix calib_cli tests bench sample_data

typecheck: $(STAMP) ## mypy --strict on the package
	$(BIN)/mypy --strict calib_cli

check: lint typecheck test ## lint, type-check and test

bench: $(STAMP) ## Benchmarks against reference implementations (ratios)
	$(BIN)/python bench/run_all.py

sample-data: $(STAMP) ## Regenerate sample_data/ (deterministic)
	$(BIN)/python sample_data/make_sample_data.py

clean: ## Remove the virtual environment, caches and demo output
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache .hypothesis
