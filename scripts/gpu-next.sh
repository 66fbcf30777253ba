#!/usr/bin/env bash
# The H200 runs still owed (README, "Next on the H200"), in one device call, run through
# gpu-tests.sh's exec so that the wheelhouse is installed and the imports checked first:
#   scripts/gpu-clip.sh ASSETS car-1080p25.mp4        # here, once (the GPU machine has no ffmpeg)
#   scripts/gpu-wheels.sh .whl --pack                 # here, once
#   WHEELS=.whl scripts/gpu-tests.sh ASSETS OUT exec bash scripts/gpu-next.sh ASSETS OUT CLIP
# About 9 minutes of device time. Each step appends its output to OUT/next.log and writes
# OUT/next-NAME.jsonl (a device call brings back at most 8 files); a failed step is reported
# and the rest still run. Exit code: 1 if any step failed.
set -uo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?out dir}; CLIP=${3:?1080p25 clip}
rc=0
step() {  # step NAME COMMAND...: run, log, remember a failure
  local name=$1; shift
  echo "== $name: $*"
  local log=$OUT/next-$name.tmp
  "$@" > "$log" 2>&1 || { echo "!! $name failed"; rc=1; }
  { echo "== $name: $*"; cat "$log"; } >> "$OUT/next.log"
  tail -n 15 "$log"; rm -f "$log"
}
daemon() {  # daemon NAME CAMERAS [OPTION...]: gpu_daemon with prefetch on nvdec cameras
  local name=$1 cams=$2; shift 2
  step "$name" timeout 200 python3 -m vidpipe.bench.gpu_daemon \
    --model "$ASSETS/models/yolox_nano.onnx" --labels "$ASSETS/models/coco80.txt" \
    --clip "$CLIP" --decoders nvdec --warmup 6 --window 10 --nvdec-prefetch 4 \
    --cameras "$cams" --json "$OUT/next-$name.jsonl" "$@"
}
VIDPIPE_GPU_CLIP=$CLIP step prefetch-tests timeout 110 python3 -m pytest -q -p no:cacheprovider \
  -o addopts="" tests/gpu/test_nvdec_prefetch_gpu.py
daemon prefetch-1proc 48,56,64
daemon prefetch-160-4mps 160 --processes 4 --mps --shard-assignment balanced
daemon prefetch-136-3mps 136 --processes 3 --mps --shard-assignment balanced
daemon prefetch-160-5mps 160 --processes 5 --mps --shard-assignment balanced
exit $rc
