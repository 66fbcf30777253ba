#!/usr/bin/env bash
# Everything that needs the GPU, in one call of the device machine:
#   tests/gpu (golden, sync-free enqueue, routing, memory, multi-GPU, TensorRT if present),
#   then the benchmark (tight loop vs stream set; 1080p 25 fps streams with real decode).
#   golden: `vidpipe detect` through the stream set at f32 and f16, JSON lines kept in OUT_DIR
#   (check them with tests/golden.py's rule at any margins).
# Usage: scripts/gpu-tests.sh ASSETS_DIR OUT_DIR [tests|golden|bench|all] [CAMERAS]
set -uo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?out dir}; WHAT=${3:-all}; CAMERAS=${4:-8,16,24,32,48,64}
export VIDPIPE_ASSETS=$ASSETS PYTHONUNBUFFERED=1
rc=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu-info.txt"
python3 -c 'import torch, cuda.bindings, onnx2torch; print("torch", torch.__version__, "cuda-bindings", cuda.bindings.__version__)' | tee -a "$OUT/gpu-info.txt"
if [[ $WHAT == tests || $WHAT == all ]]; then
  python3 -m pytest tests/gpu -v -s -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/gpu-tests.log" || rc=1
fi
if [[ $WHAT == golden || $WHAT == all ]]; then
  for prec in f32 f16; do
    printf 'model: {path: %s, labels: %s, score_threshold: 0.30, iou_threshold: 0.45}\ninference: {type: torch, streams: 2, max_batch: 4, precision: %s}\n' \
      "$ASSETS/models/yolox_nano.onnx" "$ASSETS/models/coco80.txt" $prec > "/tmp/golden-$prec.yaml"
    python3 -m vidpipe.cli detect --config "/tmp/golden-$prec.yaml" \
      $(python3 -c 'import json,sys; print(" ".join(sys.argv[1]+"/images/"+json.loads(l)["source"] for l in open(sys.argv[1]+"/images/expected.jsonl") if l.strip()))' "$ASSETS") \
      > "$OUT/golden-$prec.jsonl" || rc=1
  done
fi
if [[ $WHAT == bench || $WHAT == all ]]; then
  python3 -m vidpipe.cli bench-gpu --model "$ASSETS/models/yolox_nano.onnx" \
    --labels "$ASSETS/models/coco80.txt" --images "$ASSETS/images" \
    --clip "$ASSETS/videos/car-detection.mp4" --cameras "$CAMERAS" \
    --json "$OUT/bench-gpu.json" 2>&1 | tee "$OUT/bench-gpu.log" || rc=1
fi
exit $rc
