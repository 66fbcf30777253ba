#!/usr/bin/env bash
# The GPU benchmark's clip: car-detection.mp4 upscaled to 1920x1080, 25 fps, H.264 (High, no
# B-frames, as IP cameras send it), a keyframe every 50 frames, the index first (faststart: a
# truncated copy still opens). Made here with ffmpeg (the GPU
# machine has none) and carried with the tree.
# CODEC=hevc makes the same clip in H.265 (libx265, Main, no B-frames, the same keyframes).
# Usage: [CODEC=h264|hevc] scripts/gpu-clip.sh ASSETS_DIR OUT.mp4 [SECONDS]
set -euo pipefail
ASSETS=${1:?assets dir}; OUT=${2:?output mp4}; SECONDS_=${3:-20}
case ${CODEC:-h264} in
  h264) ENC=(-c:v libx264 -preset veryfast -crf 26 -profile:v high -bf 0 -g 50 -keyint_min 50
             -sc_threshold 0) ;;
  hevc) ENC=(-c:v libx265 -preset veryfast -crf 28 -profile:v main -tag:v hvc1
             -x265-params "log-level=error:bframes=0:keyint=50:min-keyint=50:scenecut=0") ;;
  *) echo "CODEC must be h264 or hevc, not ${CODEC}" >&2; exit 2 ;;
esac
ffmpeg -v error -y -i "$ASSETS/videos/car-detection.mp4" -t "$SECONDS_" -an \
  -vf "scale=1920:1080:flags=bicubic,fps=25" "${ENC[@]}" -pix_fmt yuv420p -movflags +faststart "$OUT"
ffprobe -v error -show_entries stream=codec_name,profile,width,height,r_frame_rate,nb_frames \
  -of compact "$OUT"
