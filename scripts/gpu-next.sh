#!/usr/bin/env bash
# GPU measurements still owed, run through gpu-tests.sh's exec so that the wheelhouse is
# installed and the imports checked first; a device call runs at most 10 minutes, so pick
# the steps that fit one call:
#   scripts/gpu-clip.sh ASSETS car-1080p25.mp4        # here, once (the GPU machine has no ffmpeg)
#   CODEC=hevc scripts/gpu-clip.sh ASSETS car-1080p25-hevc.mp4   # for the hevc step
#   scripts/gpu-wheels.sh .whl --pack                 # here, once
#   WHEELS=.whl scripts/gpu-tests.sh ASSETS OUT exec bash scripts/gpu-next.sh ASSETS OUT CLIP [STEPS]
# STEPS (default "tests"): each step appends its output to OUT/next.log; JSON results go to
# OUT/next-*.jsonl (a device call brings back at most 8 files). A failed step is reported and
# the rest still run. Seconds are rough, on an H100/H200 with 16 host cores.
#   tests      tests/gpu, all of it (about 360 s); TESTS names some of its files instead
#   streamset  the stream set against the tight loop at batch 64, f16, three fresh processes
#   table      `vidpipe run` (processes auto) at 64, 80, 96 and 128 cameras (about 400 s)
#   overload   one process at 40, 60 and 120 cameras: 1.5x and 3x its count (about 200 s)
#   overload-shed  one process at 60, 120 and 180 cameras (1, 2 and 3 times its count) with
#              groups of pictures shed before NVDEC (capture.shed_gops), then 120 and 180
#              with the share moved without its hold after a move and its slow rise near the
#              last fall (--share-rule plain), each over 30 s: a camera's share comes in whole
#              groups of pictures (about 330 s; one JSON file, each line says share_rule and
#              traces the share)
#   overload-scale  one process at 60, 90 and 180 cameras shedding groups (its count, 1.5
#              and 3 times it), each over 30 s (about 230 s); SCALE_CAMERAS picks the counts
#   overload-wake  120 and 180 cameras shedding groups, the wait for frames ended at the
#              hand-over (as shipped), then at the scheduler's wake-up (--share-rule woken),
#              each over 30 s (about 330 s; one JSON file); WAKE_CAMERAS=180: 180 only
#   overload-groups  180 cameras shedding groups, a reader thread per camera against one
#              per 8 cameras (capture.nvdec_group_size), each over 30 s (about 170 s);
#              GROUP_SIZES="8": the grouped point only
#   overload-procs  one process at 90 and 180 cameras (PROC_CAMERAS) whose NVDEC cameras
#              demux and decode in DECODE_PROCESSES (4) decode processes
#              (capture.nvdec_processes), then 60 and 180 (THREAD_CAMERAS) on the camera threads as
#              shipped: the same run's capacity and baseline; each over 30 s (about 260 s)
#   overload-letgo  decode processes (DECODE_PROCESSES) at PROC_CAMERAS (90,180) letting go,
#              uncopied and unsent, the frames the capture workers would drop (as shipped),
#              then SENDALL_CAMERAS (180) sending every frame (capture.skip_unused_frames:
#              false): the same run's capacity and baseline; each over 30 s (about 220 s)
#   overload-procs-groups  decode processes (DECODE_PROCESSES) whose realtime file cameras are
#              read 8 to a thread in the daemon's process (capture.nvdec_group_size) at
#              PROC_CAMERAS (90,180), then ALONE_CAMERAS (180) with a thread each: the
#              same run's baseline; each over 30 s (about 220 s)
#   overload-trees  one process with DECODE_PROCESSES (4) decode processes at TREE_CAMERAS
#              (270) in each tree of TREES ("this=." by default; NAME=DIR pairs, each DIR a
#              copy of vidpipe/, benchmarks/*.py and tests/{__init__,fake_gpu}.py, such as
#              `git archive REV` makes): an A/B on one warm machine. TREE_WARMUP (8) and
#              TREE_WINDOW (20) seconds; `nvidia-smi dmon` samples SM and NVDEC load into
#              OUT/dmon-NAME-N.txt; results in OUT/next-overload-trees.jsonl, each line with a
#              "tree" field
#   read-cost  what a capture worker's reader thread spends a frame read from a decode process
#              (benchmarks.remote_read_cost on the clip, real PyNvVideoCodec): READ_COST_CAMERAS
#              (1,32,90) cameras at once, DECODE_PROCESSES (4); OUT/next-read-cost.jsonl
#   box-overload  `vidpipe run` (processes auto) past what the box decodes: BOX_CAMERAS
#              (default 240: 1.5 times the 160 that one H200's NVDEC carries), 20 s window
#              (about 100 s)
#   hevc       `vidpipe run` on the H.265 clip (CLIP with -hevc before .mp4) at 160 and 200
#   hold       160 cameras with tracking, held 500 s in 10 windows (the most one call allows)
#   holdbg     the same held 600 s, started detached; this call returns after HOLD_WAIT_S
#              (540) and `holdwait`, the next call on the warm machine, collects the result
#   letterbox  GPU time of one batch's letterbox, PyTorch form against the kernel
#   f16, f32   the stream set at f16 (host and device inputs, 2 and 4 streams); f32 x3
#   startup    seconds from `vidpipe run` until the first and every camera streams, and the
#              first frame is inferred: 32 cameras with the model opened first, then 32 and
#              160 at the default (cameras stream while the model loads); about 150 s
#   profile    py-spy's per-thread samples of the f16 host-input point (py-spy from the
#              wheelhouse: gpu-wheels.sh --py-spy)
# Exit code: 1 if any step failed.
set -uo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?out dir}; CLIP=${3:?1080p25 clip}
STEPS=${4:-tests}
HOLD_DIR=/tmp/vidpipe-hold  # outside the tree: it outlives the call on a warm machine
M=$ASSETS/models/yolox_nano.onnx; L=$ASSETS/models/coco80.txt
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
box() {  # box NAME CLIP CAMERAS [OPTION...]: `vidpipe run` as a service runs it (gpu_box)
  local name=$1 clip=$2 cams=$3; shift 3
  step "$name" python3 -m benchmarks.gpu_box --model "$M" --labels "$L" --clip "$clip" \
    --cameras "$cams" --precision f16 --max-batch 64 --batch-timeout-ms 20 \
    --json "$OUT/next-box.jsonl" "$@"
}
overload() {  # overload NAME FILE [OPTION...]: one process past its count, OUT/next-FILE.jsonl
  local name=$1 file=$2; shift 2
  step "$name" python3 -X faulthandler -m benchmarks.overload --device cuda --model "$M" \
    --labels "$L" --clip "$CLIP" --json "$OUT/next-$file.jsonl" "$@"
}
trees() {  # the overload-trees step: every tree of TREES at every count of TREE_CAMERAS
  local pair name dir n dmon
  for n in ${TREE_CAMERAS:-270}; do
    for pair in ${TREES:-this=.}; do
      name=${pair%%=*}; dir=$(cd "${pair#*=}" && pwd) || { echo "!! no tree $pair"; rc=1; continue; }
      nvidia-smi dmon -s u -d 2 > "$OUT/dmon-$name-$n.txt" 2>&1 & dmon=$!
      (cd "$dir" && PYTHONPATH=$dir${PYTHONPATH:+:$PYTHONPATH} step "trees-$name-$n" \
        python3 -X faulthandler -m benchmarks.overload --device cuda --model "$M" \
        --labels "$L" --clip "$CLIP" --cameras "$n" --nvdec-processes "${DECODE_PROCESSES:-4}" \
        --warmup "${TREE_WARMUP:-8}" --window "${TREE_WINDOW:-20}" --json "/tmp/trees-$name.jsonl"
        exit $rc) \
        || rc=1
      kill "$dmon" 2>/dev/null; wait "$dmon" 2>/dev/null
      [[ -f /tmp/trees-$name.jsonl ]] && python3 -c 'import json,sys
for line in open(sys.argv[2]): print(json.dumps({"tree": sys.argv[1], **json.loads(line)}))' \
        "$name" "/tmp/trees-$name.jsonl" >> "$OUT/next-overload-trees.jsonl"
      rm -f "/tmp/trees-$name.jsonl"
    done
  done
}
for s in $STEPS; do
  case $s in
    tests) VIDPIPE_GPU_CLIP=$CLIP step tests python3 -m pytest -q -rfE -p no:cacheprovider \
      ${TESTS:-tests/gpu} --durations=8 ;;
    streamset) for r in 1 2 3; do bench "f16-host-$r" f16 host 2; done ;;
    table) box table "$CLIP" 64,80,96,128 --warmup 8 --window 16 ;;
    overload) overload overload overload --cameras 40,60,120 --warmup 6 --window 10 ;;
    overload-shed)  # NVDEC groups shed before decoding, the share moved by two rules
      overload overload-60,120,180 overload-shed --cameras 60,120,180 --warmup 10 --window 30
      overload overload-plain overload-shed --cameras 120,180 --share-rule plain \
        --warmup 10 --window 30 ;;
    overload-scale)  # the count, 1.5 and 3 times it, as shipped
      overload overload-scale overload-scale --cameras "${SCALE_CAMERAS:-60,90,180}" \
        --warmup 10 --window 30 ;;
    overload-wake)  # where a wait for frames ends: at the hand-over, or at the wake-up
      for rule in idle woken; do
        overload "overload-$rule" overload-wake --cameras "${WAKE_CAMERAS:-120,180}" \
          --share-rule "$rule" --warmup 10 --window 30; done ;;
    overload-groups)  # 180 cameras shedding groups: a reader thread each, or 8 per thread
      for g in ${GROUP_SIZES:-1 8}; do
        overload "overload-groups-$g" overload-groups --cameras 180 --nvdec-group-size "$g" \
          --warmup 10 --window 30; done ;;
    overload-procs)  # the camera threads' demux and decode moved into decode processes
      overload overload-procs overload-procs --cameras "${PROC_CAMERAS:-90,180}" \
        --nvdec-processes "${DECODE_PROCESSES:-4}" --warmup 10 --window 30
      overload overload-threads overload-procs --cameras "${THREAD_CAMERAS:-60,180}" \
        --warmup 10 --window 30 ;;
    overload-letgo)  # decode processes letting go the frames the workers would drop
      overload overload-letgo overload-letgo --cameras "${PROC_CAMERAS:-90,180}" \
        --nvdec-processes "${DECODE_PROCESSES:-4}" --warmup 10 --window 30
      overload overload-sendall overload-letgo --cameras "${SENDALL_CAMERAS:-180}" \
        --nvdec-processes "${DECODE_PROCESSES:-4}" --no-skip-unused-frames --warmup 10 --window 30 ;;
    overload-procs-groups)  # decode processes with 8 cameras a reader thread, then without
      overload overload-procs-groups overload-procs-groups --cameras "${PROC_CAMERAS:-90,180}" \
        --nvdec-processes "${DECODE_PROCESSES:-4}" --nvdec-group-size 8 --warmup 10 --window 30
      overload overload-procs-alone overload-procs-groups --cameras "${ALONE_CAMERAS:-180}" \
        --nvdec-processes "${DECODE_PROCESSES:-4}" --warmup 10 --window 30 ;;
    overload-trees) trees ;;
    read-cost) step read-cost python3 -m benchmarks.remote_read_cost --clip "$CLIP" \
      --cameras "${READ_COST_CAMERAS:-1,32,90}" --decode-processes "${DECODE_PROCESSES:-4}" \
      --frames 8000 --repeats 2 --json "$OUT/next-read-cost.jsonl" ;;
    box-overload) box box-overload "$CLIP" "${BOX_CAMERAS:-240}" --warmup 10 --window 20 ;;
    hevc) box hevc "${CLIP%.mp4}-hevc.mp4" 160,200 --warmup 10 --window 15 ;;
    hold) box hold "$CLIP" 160 --tracking --warmup 15 --window 500 --periods 10 ;;
    holdbg)  # the 10-minute hold over two calls: started detached, this call waits in it
      mkdir -p "$HOLD_DIR" && rm -f "$HOLD_DIR"/hold.*
      setsid nohup python3 -m benchmarks.gpu_box --model "$M" --labels "$L" --clip "$CLIP" \
        --cameras 160 --precision f16 --max-batch 64 --batch-timeout-ms 20 --tracking \
        --warmup 15 --window 600 --periods 12 --json "$HOLD_DIR/hold.jsonl" \
        > "$HOLD_DIR/hold.log" 2>&1 < /dev/null &
      echo $! > "$HOLD_DIR/hold.pid"
      sleep "${HOLD_WAIT_S:-540}"; cp "$HOLD_DIR/hold.log" "$OUT/next-hold.log"
      tail -n 20 "$HOLD_DIR/hold.log" ;;
    holdwait)  # the next call, on the same warm machine: wait for the hold, keep its results
      pid=$(cat "$HOLD_DIR/hold.pid" 2>/dev/null) || { echo "!! no hold was started"; rc=1; }
      while [[ -n ${pid:-} ]] && kill -0 "$pid" 2>/dev/null; do sleep 5; done
      cp "$HOLD_DIR"/hold.log "$HOLD_DIR"/hold.jsonl "$OUT"/ 2>/dev/null
      tail -n 20 "$HOLD_DIR/hold.log"; [[ -s $HOLD_DIR/hold.jsonl ]] || rc=1 ;;
    letterbox) step letterbox python3 -m benchmarks.gpu_letterbox --batch 64 --size 1920x1080
      step letterbox-720p python3 -m benchmarks.gpu_letterbox --batch 64 --size 1280x720 ;;
    f16) bench f16-host f16 host 2,4; bench f16-device f16 device 2,4 ;;
    f32) for r in 1 2 3; do bench "f32-host-$r" f32 host 2; done ;;
    startup) for a in --model-first ''; do  # the first run converts the model into the cache
      step "startup${a}" python3 -m benchmarks.startup --inference torch --decoder nvdec \
        --cameras 32 --clip "$CLIP" --model "$M" --labels "$L" $a; done
      step startup-160 python3 -m benchmarks.startup --inference torch --decoder nvdec \
        --cameras 160 --clip "$CLIP" --model "$M" --labels "$L" ;;
    profile) step profile "${SITE:-/tmp/vidpipe-site}/bin/py-spy" record -r 250 --threads --nonblocking -f raw \
      -o "$OUT/next-profile.txt" -- python3 -m benchmarks.gpu \
      --model "$ASSETS/models/yolox_nano.onnx" --labels "$ASSETS/models/coco80.txt" \
      --images "$ASSETS/images" --batches 64 --streams 2 --precision f16 --inputs host \
      --cameras '' --seconds 8 --json /tmp/next-profile.json ;;
    *) echo "!! unknown step $s"; rc=1 ;;
  esac
done
exit $rc
