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

.PHONY: help setup system assets run test lint format bench bench-smoke soak clean distclean

help:
	@echo "make run     set up, then start the daemon on $(CONFIG)"
	@echo "make test    set up, then ruff, mypy and pytest (not soak, not gpu)"
	@echo "make setup   system packages (as root), $(VENV), assets"
	@echo "make lint    ruff check, ruff format --check, mypy"
	@echo "make format  apply ruff fixes and formatting"
	@echo "make bench   the full benchmark into benchmarks/results (\$$BENCH_ARGS overrides)"
	@echo "make bench-smoke  a 20 s benchmark into var/bench-smoke"
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
	$(BIN)/ruff check vidpipe tests benchmarks
	$(BIN)/ruff format --check vidpipe tests benchmarks
	$(BIN)/mypy

format: $(INSTALLED)
	$(BIN)/ruff check --fix vidpipe tests
	$(BIN)/ruff format vidpipe tests

# Any non-zero pytest status fails the target, including 5 (no tests collected).
test: setup lint
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m pytest -m "not soak and not gpu" $(PYTEST_ARGS)

# The bench extra's tools, installed here rather than by `pip install .[bench]`:
# openvino-model-api pins opencv-python-headless~=4.0, so its dependencies would replace the
# OpenCV 5 the daemon is built and measured on; it needs none beyond numpy and pillow.
BENCH_PIP := $(PY) -m pip install -q 'matplotlib>=3.8' && \
	$(PY) -m pip install -q --no-deps 'openvino-model-api>=0.4.7'

bench: setup
	$(BENCH_PIP)
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m benchmarks --suite full --out benchmarks/results $(BENCH_ARGS)

bench-smoke: setup
	$(BENCH_PIP)
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m benchmarks --suite smoke --out var/bench-smoke $(BENCH_ARGS)

soak: setup
	VIDPIPE_ASSETS="$(ASSETS)" $(PY) -m pytest -m soak $(PYTEST_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find vidpipe tests -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
