"""CPU per frame of reading a clip: vidpipe's PyAV source against the OpenCV loop of the
baselines, each on one thread, read in turns.

``python -m benchmarks.decode_cost [--clip car-detection-1080p.mp4] [--tune-malloc]``

With ``--tune-malloc`` glibc gets ``vidpipe run``'s settings first (``cli.tune_malloc``):
PyAV allocates every converted BGR frame anew (6 MB at 1080p), and with glibc's defaults
each one is page-faulted in again. Run it with and without to see what the settings save.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import deque
from pathlib import Path

import numpy as np

from benchmarks.capture import LoopingReader
from vidpipe.assets import default_assets_dir
from vidpipe.bench.common import cache_dir, resolve_clip
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.cli import tune_malloc
from vidpipe.config import CameraConfig, CaptureConfig

#: Frames kept alive while the next ones are read: in the daemon a frame lives on while it
#: waits, is letterboxed and inferred, and the live view keeps the latest.
HELD = 4


def opencv_ms(path: Path, frames: int) -> float:
    reader = LoopingReader(str(path))
    held: deque[np.ndarray] = deque([reader.read()], maxlen=HELD)  # opened and warm
    t0 = time.process_time()
    for _ in range(frames):
        held.append(reader.read())
    cost = (time.process_time() - t0) * 1000 / frames
    reader.close()
    return cost


def pyav_ms(path: Path, frames: int) -> float:
    camera = CameraConfig.model_validate({"name": "clip", "url": str(path), "loop": True})
    source = PyAVSource(camera, CaptureConfig())  # vidpipe's defaults: one decoder thread
    source.open()
    first = source.read()
    held: deque[object] = deque([None if first is None else first.image()], maxlen=HELD)
    t0 = time.process_time()
    for _ in range(frames):
        picture = source.read()
        if picture is None:  # the end: open it again, as the worker does
            source.close()
            source.open()
        held.append(None if picture is None else picture.image())  # every frame converted
    cost = (time.process_time() - t0) * 1000 / frames
    source.close()
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="car-detection-1080p.mp4")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tune-malloc", action="store_true", help="vidpipe run's malloc settings")
    args = parser.parse_args()
    if args.tune_malloc:
        tune_malloc()
    path = resolve_clip(args.clip, default_assets_dir() / "videos", cache_dir())
    print(f"{path.name}, {args.frames} frames, malloc tuned: {args.tune_malloc}")
    for r in range(args.repeats):
        first, second = (opencv_ms, pyav_ms) if r % 2 == 0 else (pyav_ms, opencv_ms)
        costs = {f.__name__: f(path, args.frames) for f in (first, second)}
        print(
            f"repeat {r}: OpenCV {costs['opencv_ms']:.2f} ms/frame, "
            f"PyAV (vidpipe) {costs['pyav_ms']:.2f} ms/frame, "
            f"load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
