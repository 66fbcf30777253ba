#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels that the GPU machine's image lacks, for its
# Python (3.12, x86-64 manylinux): pydantic and its dependencies, onnx2torch, paho-mqtt,
# norfair-enough (tracking; rich and scipy are in the image) and pynvvideocodec (NVDEC).
# scripts/gpu-tests.sh installs them
# from this folder with --no-index. One version of each; the image's own torch, numpy, onnx,
# opencv, aiohttp, prometheus-client and pyyaml are used as they are.
# Usage: scripts/gpu-wheels.sh [DIR]   (default .whl; about 30 MB)
set -euo pipefail
DIR=${1:-.whl}
PY=${PYTHON:-python3}
mkdir -p "$DIR"
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
  manylinux1_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64)
args=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d "$DIR")
for p in "${PLATFORMS[@]}"; do args+=(--platform "$p"); done
# Versions pinned together: pydantic-core must be the one that this pydantic requires.
WHEELS=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0
  onnx2torch==1.5.15 paho-mqtt==2.2.0 norfair-enough==2.4.3
  pynvvideocodec==2.2.4
)
"$PY" -m pip download -q "${args[@]}" "${WHEELS[@]}"
ls -l "$DIR"
du -sh "$DIR"
