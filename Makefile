# vidpipe. `make run` starts the demo daemon, `make test` runs every gate; both set up the
# system packages, the virtualenv and the assets first, doing only what is missing.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# Re-run `pip install` only when pyproject.toml is newer than this stamp.
INSTALLED := $(VENV)/.installed-dev

ASSET_GROUPS ?= model,videos,images
ASSETS_FILE := $(VENV)/.assets-dir
# The assets directory resolved by `python -m vidpipe.assets` during setup (../shared/assets,
# $$VIDPIPE_ASSETS or the user cache), read by the shell when a recipe runs.
ASSETS = $$(cat $(ASSETS_FILE))

CONFIG ?= configs/demo.yaml
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: help setup system assets run test lint format bench soak clean distclean

help:
	@echo "make run     set up, then start the daemon on $(CONFIG)"
	@echo "make test    set up, then ruff, mypy and pytest (not soak, not gpu)"
	@echo "make setup   system packages (as root), $(VENV), assets"
	@echo "make lint    ruff check, ruff format --check, mypy"
	@echo "make format  apply ruff fixes and formatting"
	@echo "make bench   vidpipe bench \$$BENCH_ARGS"
	@echo "make soak    the long soak tests (pytest -m soak)"
	@echo "make clean   caches and build outputs; distclean also removes $(VENV)"

setup: system $(INSTALLED) assets

system:
	scripts/setup-system.sh

$(PY): | system
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[dev]'
	touch $@

assets: $(INSTALLED)
	$(PY) -m vidpipe.assets --groups $(ASSET_GROUPS) > $(ASSETS_FILE).tmp
	mv $(ASSETS_FILE).tmp $(ASSETS_FILE)

run: setup
	VIDPIPE_ASSETS="$(ASSETS)" $(BIN)/vidpipe run --config $(CONFIG)

lint: $(INSTALLED)
	$(BIN)/ruff check vidpipe tests
	$(BIN)/ruff format --check vidpipe tests
	$(BIN)/mypy

format: $(INSTALLED)
	$(BIN)/ruff check --fix vidpipe tests
	$(BIN)/ruff format vidpipe tests

# Any non-zero pytest status fails the target, including 5 (no tests collected).
test: setup lint
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m pytest -m "not soak and not gpu" $(PYTEST_ARGS)

bench: setup
	VIDPIPE_ASSETS="$(ASSETS)" $(BIN)/vidpipe bench $(BENCH_ARGS)

soak: setup
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m pytest -m soak $(PYTEST_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find vidpipe tests -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
