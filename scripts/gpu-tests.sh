#!/usr/bin/env bash
# Everything that needs the GPU, in one call of the device machine:
#   1. installs, from the wheelhouse carried with the tree (scripts/gpu-wheels.sh made it),
#      what the machine's image lacks, with --no-index (nothing can be fetched there);
#   2. imports every module the GPU path needs and STOPS (exit 3) if one fails;
#   3. tests/gpu (golden, NVDEC, GPU pre/postprocessing, sync-free enqueue, routing, memory,
#      multi-GPU, TensorRT if present), then golden `vidpipe detect` runs and the benchmark.
#   golden: `vidpipe detect` through the stream set at f32 and f16, JSON lines kept in OUT_DIR
#   (check them with tests/golden.py's rule at any margins).
# Usage: scripts/gpu-tests.sh ASSETS_DIR OUT_DIR [tests|golden|bench|all|daemon] [CAMERAS]
#        scripts/gpu-tests.sh ASSETS_DIR OUT_DIR exec COMMAND [ARG...]
#   daemon (not part of all): python3 -m benchmarks.gpu_daemon, the daemon's camera count.
#   exec: install and check the imports as for the tests, then run COMMAND with that
#   environment (one device call that measures more than one thing); its exit code is ours.
# The wheelhouse may come packed (`gpu-wheels.sh --pack`: WHEELS.tar.xz, which fits in one
# 64 MiB carry with the tree); it is unpacked first.
# Environment: WHEELS (default .whl), SITE (install target, default /tmp/vidpipe-site),
#   PYTEST_ARGS (what pytest runs, default tests/gpu), VIDPIPE_GPU_CLIP (1080p clip),
#   GPU_DAEMON_ARGS (more options of gpu_daemon, e.g. "--decoders nvdec --processes 3 --mps
#   --shard-assignment balanced").
# Exit code: 0 all passed; 1 a test, golden run or benchmark failed; 2 the wheel install
# failed; 3 an import failed.
set -uo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?out dir}; WHAT=${3:-all}
if [[ $WHAT == exec ]]; then
  shift 3
  (($#)) || { echo "usage: $0 ASSETS_DIR OUT_DIR exec COMMAND [ARG...]" >&2; exit 2; }
  CAMERAS=
else
  CAMERAS=${4:-8,16,24,32,48,64}
fi
WHEELS=${WHEELS:-.whl}; SITE=${SITE:-/tmp/vidpipe-site}
export VIDPIPE_ASSETS=$ASSETS PYTHONUNBUFFERED=1
mkdir -p "$OUT"
rc=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu-info.txt"

if [[ ! -d $WHEELS && -f $WHEELS.tar.xz ]]; then
  mkdir -p "$WHEELS" && tar -C "$WHEELS" -xJf "$WHEELS.tar.xz" || {
    echo "FATAL: unpacking the wheelhouse $WHEELS.tar.xz failed" >&2
    exit 2
  }
fi
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHEELS"/*.whl; then
    echo "FATAL: installing the wheelhouse $WHEELS into $SITE failed" >&2
    exit 2
  fi
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
else
  echo "note: no wheels in $WHEELS; using the image's packages only" >&2
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

if ! python3 - <<'PY' 2>&1 | tee -a "$OUT/gpu-info.txt"; then
import importlib
import sys

needed = [
    "torch", "cuda.bindings", "onnx", "onnx2torch", "pydantic", "paho.mqtt.client",
    "norfair", "PyNvVideoCodec", "av", "vidpipe.cli", "vidpipe.infer.torch_executor",
    "vidpipe.capture.nvdec", "vidpipe.capture.nvdec_source", "vidpipe.preprocess.gpu",
    "vidpipe.postprocess.gpu", "vidpipe.daemon", "vidpipe.secondary.gpu",
    "vidpipe.infer.torch_embedder", "vidpipe.preprocess.crops",
]
failed = []
for name in needed:
    try:
        mod = importlib.import_module(name)
        print(f"import {name}: ok {getattr(mod, '__version__', '')}")
    except BaseException as exc:  # noqa: BLE001 - report every failure, then fail
        failed.append(name)
        print(f"import {name}: FAILED: {type(exc).__name__}: {exc}")
import torch

print("cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
if failed or not torch.cuda.is_available():
    print("FATAL: cannot run the GPU tests:", ", ".join(failed) or "no CUDA device")
    sys.exit(1)
PY
  echo "FATAL: an import failed (see above); nothing was run" >&2
  exit 3
fi

if [[ $WHAT == tests || $WHAT == all ]]; then
  # shellcheck disable=SC2086
  python3 -m pytest -v -s -p no:cacheprovider -o addopts="" ${PYTEST_ARGS:-tests/gpu} 2>&1 \
    | tee "$OUT/gpu-tests.log" || rc=1
fi
if [[ $WHAT == golden || $WHAT == all ]]; then
  for prec in f32 f16; do
    printf 'model: {path: %s, labels: %s, score_threshold: 0.30, iou_threshold: 0.45}\ninference: {type: torch, precision: %s, advanced: {streams: 2, max_batch: 4}}\n' \
      "$ASSETS/models/yolox_nano.onnx" "$ASSETS/models/coco80.txt" $prec > "/tmp/golden-$prec.yaml"
    python3 -m vidpipe.cli detect --config "/tmp/golden-$prec.yaml" \
      $(python3 -c 'import json,sys; print(" ".join(sys.argv[1]+"/images/"+json.loads(l)["source"] for l in open(sys.argv[1]+"/images/expected.jsonl") if l.strip()))' "$ASSETS") \
      > "$OUT/golden-$prec.jsonl" || rc=1
  done
fi
if [[ $WHAT == bench || $WHAT == all ]]; then
  python3 -m benchmarks.gpu --model "$ASSETS/models/yolox_nano.onnx" \
    --labels "$ASSETS/models/coco80.txt" --images "$ASSETS/images" \
    --clip "${VIDPIPE_GPU_CLIP:-$ASSETS/videos/car-detection.mp4}" --cameras "$CAMERAS" \
    --json "$OUT/bench-gpu.json" 2>&1 | tee "$OUT/bench-gpu.log" || rc=1
fi
if [[ $WHAT == daemon ]]; then
  # the daemon itself: real-time looping cameras, nvdec against pyav, GPU pre/postprocessing
  # shellcheck disable=SC2086
  python3 -m benchmarks.gpu_daemon --model "$ASSETS/models/yolox_nano.onnx" \
    --labels "$ASSETS/models/coco80.txt" \
    --clip "${VIDPIPE_GPU_CLIP:-$ASSETS/videos/car-detection.mp4}" --cameras "$CAMERAS" \
    ${GPU_DAEMON_ARGS:-} --json "$OUT/gpu-daemon.jsonl" 2>&1 | tee "$OUT/gpu-daemon.log" || rc=1
fi
if [[ $WHAT == exec ]]; then
  "$@" || rc=$?
fi
exit $rc
