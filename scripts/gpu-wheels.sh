#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels that the GPU machine's image lacks, for its
# Python (3.12, x86-64 manylinux): pydantic and its dependencies, onnx2torch, paho-mqtt,
# norfair-enough (tracking; rich and scipy are in the image), pynvvideocodec (NVDEC), av (PyAV,
# the CPU capture), and with --py-spy, py-spy (to see where the daemon's threads spend their
# time; 2.8 MB that the 64 MiB carry of tree, assets and packed wheels has no room for).
# pynvvideocodec's wheel is repacked without its samples/, benchmarks/ and the FFmpeg source
# tarball it ships (16 of its 27 MB; nothing imports them), so that the carry fits.
# scripts/gpu-tests.sh installs them from this folder with --no-index. One version of each; the image's own torch, numpy, onnx,
# opencv, aiohttp, prometheus-client and pyyaml are used as they are.
# Usage: scripts/gpu-wheels.sh [DIR] [--pack] [--py-spy]   (default .whl; about 50 MB)
#   --pack: also write DIR.tar.xz (about 47 MB) and remove DIR. A device call carries at most
#   64 MiB, and the wheels alone are about 70 MB: wheels are deflate zips, so xz gains almost
#   nothing on them as they are. Re-stored without compression (still valid wheels: RECORD
#   hashes the files, not the zip), they xz down to about two thirds. gpu-tests.sh unpacks it.
set -euo pipefail
DIR=.whl; PACK=0; PYSPY=0
for a in "$@"; do
  case $a in --pack) PACK=1 ;; --py-spy) PYSPY=1 ;; *) DIR=$a ;; esac
done
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
  pynvvideocodec==2.2.4 av==18.1.0
)
((PYSPY)) && WHEELS+=(py-spy==0.4.1)
"$PY" -m pip download -q "${args[@]}" "${WHEELS[@]}"
((PYSPY)) || rm -f "$DIR"/py_spy-*.whl
# pynvvideocodec without what nothing imports; RECORD loses their lines so pip installs it.
"$PY" - "$DIR" <<'PY'
import pathlib
import sys
import zipfile


def unused(name: str) -> bool:
    return name.startswith(("samples/", "benchmarks/")) or name.endswith(".tar.xz")


for wheel in pathlib.Path(sys.argv[1]).glob("pynvvideocodec-*.whl"):
    tmp = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if unused(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(x for x in lines if not unused(x.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    tmp.replace(wheel)
PY
ls -l "$DIR"
du -sh "$DIR"
if ((PACK)); then
  "$PY" - "$DIR" <<'PY'
import pathlib
import sys
import zipfile

for wheel in pathlib.Path(sys.argv[1]).glob("*.whl"):
    tmp = wheel.with_suffix(".stored")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info), compress_type=zipfile.ZIP_STORED)
    tmp.replace(wheel)
PY
  tar -C "$DIR" -cf - . | xz -9 -T0 >"$DIR.tar.xz"
  rm -rf "$DIR"
  ls -l "$DIR.tar.xz"
fi
