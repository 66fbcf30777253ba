#!/usr/bin/env bash
# The H200 runs still owed (README, "Next on the H200"), in one device call, run through
# gpu-tests.sh's exec so that the wheelhouse is installed and the imports checked first:
#   scripts/gpu-clip.sh ASSETS car-1080p25.mp4        # here, once (the GPU machine has no ffmpeg)
#   scripts/gpu-wheels.sh .whl --pack                 # here, once
#   WHEELS=.whl scripts/gpu-tests.sh ASSETS OUT exec bash scripts/gpu-next.sh ASSETS OUT CLIP [STEPS]
# STEPS (default "tests letterbox f16 f32"; also "profile", "nvdec"): each step appends its
# output to OUT/next.log; the bench-gpu documents are lines of OUT/next-points.jsonl (a device
# call brings back at most 8 files). A failed step is reported and the rest still run.
#   tests      the GPU letterbox kernel against the PyTorch form, and the daemon's NVDEC tests
#   letterbox  GPU time of one batch's letterbox, PyTorch form against the kernel
#   f16, f32   the stream set against the tight loop at batch 64 (benchmarks.gpu), f16 with host and
#              device inputs; f32 three fresh processes at 2 streams (the >= 0.95 goal)
#   profile    py-spy's per-thread samples of the f16 host-input point (where the host goes;
#              py-spy comes with the wheelhouse, into $SITE/bin)
#   nvdec      the daemon's NVDEC camera count at 176 and 168 on 5 processes (each held once)
# Exit code: 1 if any step failed.
set -uo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?out dir}; CLIP=${3:?1080p25 clip}
STEPS=${4:-tests letterbox f16 f32}
rc=0
step() {  # step NAME COMMAND...: run, log, remember a failure
  local name=$1; shift
  echo "== $name: $*"
  local log=$OUT/next-$name.tmp
  "$@" > "$log" 2>&1 || { echo "!! $name failed"; rc=1; }
  { echo "== $name: $*"; cat "$log"; } >> "$OUT/next.log"
  tail -n 15 "$log"; rm -f "$log"
}
bench() {  # bench NAME PRECISION INPUTS STREAMS: benchmarks.gpu at batch 64, a line of next-points
  local doc=/tmp/next-$1.json
  step "$1" python3 -m benchmarks.gpu --model "$ASSETS/models/yolox_nano.onnx" \
    --labels "$ASSETS/models/coco80.txt" --images "$ASSETS/images" --batches 64 \
    --streams "$4" --precision "$2" --inputs "$3" --cameras '' --json "$doc"
  [[ -f $doc ]] && python3 -c 'import json,sys; print(json.dumps({"name": sys.argv[1],
    **json.load(open(sys.argv[2]))}))' "$1" "$doc" >> "$OUT/next-points.jsonl"
}
daemon() {  # daemon NAME SECONDS DECODER CAMERAS [OPTION...]: gpu_daemon, prefetch on nvdec
  local name=$1 limit=$2 decoder=$3 cams=$4; shift 4
  step "$name" timeout "$limit" python3 -m benchmarks.gpu_daemon \
    --model "$ASSETS/models/yolox_nano.onnx" --labels "$ASSETS/models/coco80.txt" \
    --clip "$CLIP" --decoders "$decoder" --warmup 6 --window 10 --nvdec-prefetch 4 \
    --cameras "$cams" --json "$OUT/next-daemon.jsonl" "$@"
}
for s in $STEPS; do
  case $s in
    tests) VIDPIPE_GPU_CLIP=$CLIP step tests python3 -m pytest -q -s -p no:cacheprovider \
      -o addopts="" tests/gpu/test_gpu_preprocess_gpu.py tests/gpu/test_nvdec_daemon_gpu.py ;;
    letterbox) step letterbox python3 -m benchmarks.gpu_letterbox --batch 64 --size 1920x1080
      step letterbox-720p python3 -m benchmarks.gpu_letterbox --batch 64 --size 1280x720 ;;
    f16) bench f16-host f16 host 2,4; bench f16-device f16 device 2,4 ;;
    f32) for r in 1 2 3; do bench "f32-host-$r" f32 host 2; done ;;
    profile) step profile "${SITE:-/tmp/vidpipe-site}/bin/py-spy" record -r 250 --threads --nonblocking -f raw \
      -o "$OUT/next-profile.txt" -- python3 -m benchmarks.gpu \
      --model "$ASSETS/models/yolox_nano.onnx" --labels "$ASSETS/models/coco80.txt" \
      --images "$ASSETS/images" --batches 64 --streams 2 --precision f16 --inputs host \
      --cameras '' --seconds 8 --json /tmp/next-profile.json ;;
    nvdec) shards="--mps --shard-assignment balanced"
      daemon nvdec-176-5 150 nvdec 176 --processes 5 $shards
      daemon nvdec-168-5 150 nvdec 168 --processes 5 $shards ;;
    *) echo "!! unknown step $s"; rc=1 ;;
  esac
done
exit $rc
