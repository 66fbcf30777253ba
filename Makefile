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

ASSET_GROUPS ?= model,videos,images,nanodet,reid
ASSETS_FILE := $(VENV)/.assets-dir
# The assets directory resolved by `python -m vidpipe.assets` during setup (../shared/assets,
# $$VIDPIPE_ASSETS or the user cache), read by the shell when a recipe runs.
ASSETS = $$(cat $(ASSETS_FILE))

# A CPU build of PyTorch, kept out of the venv (mypy and the daemon's "torch is missing" paths
# see none), for the GPU postprocessing tests that run on CPU tensors too. PyPI has only CUDA
# builds (several GB); the CPU wheel comes from a local wheel directory (pip's find-links, as on
# our machines) or not at all.
TORCH_CPU := $(VENV)/torch-cpu
TORCH_CPU_WHEEL ?= torch==2.13.0+cpu

CONFIG ?= configs/demo.yaml
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: help setup system assets run test test-torch-cpu int8-speed lint format bench \
	bench-smoke soak clean distclean

help:
	@echo "make run     set up, then start the daemon on $(CONFIG)"
	@echo "make test    set up, then ruff, mypy and pytest (not soak, not gpu; GPU pre- and"
	@echo "             postprocessing on CPU tensors where a CPU wheel of PyTorch is at hand),"
	@echo "             and ends with int8-speed"
	@echo "make setup   system packages (as root), $(VENV), assets"
	@echo "make int8-speed  what an INT8 model (vidpipe optimize) saves per inference here"
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
	$(MAKE) --no-print-directory test-torch-cpu
	$(MAKE) --no-print-directory int8-speed

# The GPU decode, score filter and NMS against the CPU decoders, and the GPU letterbox against
# the CPU one, on CPU tensors (tests/gpu/conftest.py: VIDPIPE_TORCH_DEVICE=cpu). Skipped, with
# a notice, where no CPU wheel of PyTorch can be installed; a failing test fails the target.
test-torch-cpu: setup
	@if PYTHONPATH=$(TORCH_CPU) $(PY) -c 'import torch' 2>/dev/null || \
	    $(PY) -m pip install -q --target $(TORCH_CPU) '$(TORCH_CPU_WHEEL)'; then \
	  PYTHONPATH=$(TORCH_CPU) VIDPIPE_TORCH_DEVICE=cpu VIDPIPE_ASSETS="$(ASSETS)" \
	    $(PY) -m pytest -m gpu tests/gpu/test_gpu_postprocess_gpu.py \
	    tests/gpu/test_gpu_preprocess_gpu.py tests/gpu/test_crops_gpu.py \
	    tests/gpu/test_torch_cache_gpu.py $(PYTEST_ARGS); \
	else \
	  echo "NOTICE: no CPU wheel of PyTorch ($(TORCH_CPU_WHEEL)) here: the GPU pre- and" \
	    "postprocessing tests on CPU tensors did not run (scripts/gpu-tests.sh runs them on a GPU)"; \
	fi

# What INT8 is worth on this machine, printed last so that a test log ends with it. Not a test:
# nothing is asserted, and a failure is a notice (the suite tests `vidpipe optimize` itself).
# 60 frames calibrate a model of the same graph as 300 would, so its speed is the same; its
# agreement figure is from few frames and the model is forced out: both are thrown away.
INT8_CLIP := videos/one-by-one-person-detection.mp4
int8-speed: setup
	@echo "INT8 on this machine: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
	  "$$(nproc) cores, $$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' \
	  | grep -xE 'avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_tile' | xargs)"
	@tmp=$$(mktemp -d); \
	if ! VIDPIPE_ASSETS="$(ASSETS)" $(BIN)/vidpipe optimize -c $(CONFIG) -o $$tmp/int8.xml \
	    --clips "$(ASSETS)/$(INT8_CLIP)" --frames 60 --force --speed-seconds 10 \
	    2>&1 | grep -E 'CPU per inference|^vidpipe optimize:'; then \
	  echo "NOTICE: vidpipe optimize did not report this machine's INT8 speed"; \
	else \
	  echo "(the speeds are this machine's; the agreement is from 60 frames only)"; \
	fi; rm -rf "$$tmp"

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
