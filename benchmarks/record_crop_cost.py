"""CPU of best-shot crops taken from the record stream (``clips.crop.source: record``).

A 1080p copy of a clip is made here with ffmpeg (H.264, a keyframe every ``--gop`` frames, no
B-frames, as most cameras send), its packets demuxed as a record input demuxes them
(``PacketReader``) and given a 10 fps camera's arrival times. For each clip, a window of
``--clip-s`` seconds at a random point, ``record_crops`` cuts the crops of 1 and of
``--shots`` tracks whose best shots fall at random times in it (boxes of a 768x432 sub-stream).
The process's CPU time per clip is what it costs (``time.process_time``, the decoder's
threads too): decoding each needed group of pictures from its keyframe up to the shot, once
per clip::

    python -m benchmarks.record_crop_cost --clips 40 --gop 20
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.record_input_cost import make_main_stream
from vidpipe.assets import default_assets_dir
from vidpipe.capture.record_input import PacketReader
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips.ring import Segment
from vidpipe.clips.shots import Shot, record_crops
from vidpipe.config import CameraConfig, CaptureConfig

SUB_W, SUB_H = 768, 432


def demuxed(path: Path, fps: float) -> tuple[StreamParams, list[TapPacket]]:
    """Every packet of ``path`` as a record input demuxes it, arriving at ``fps``."""
    reader = PacketReader(CameraConfig(name="probe", url=str(path)), str(path), CaptureConfig())
    params = reader.open()
    out: list[TapPacket] = []
    try:
        while (got := reader.read()) is not None:
            out.extend(got)
    finally:
        reader.close()
    return params, [replace(p, t_capture=i / fps) for i, p in enumerate(out)]


def one_clip(segment: Segment, shots: int, rng: random.Random) -> tuple[float, float, int]:
    """(CPU ms, wall ms, crops) of the crops of ``shots`` tracks in ``segment``."""
    t0, t1 = segment.t_start, segment.t_end
    picks = [
        Shot(k, "person", 0.9, (300.0, 100.0, 380.0, 300.0), SUB_W, SUB_H, rng.uniform(t0, t1))
        for k in range(shots)
    ]
    cpu, wall = time.process_time(), time.perf_counter()
    crops = record_crops(segment, picks, padding=0.1)
    return 1000 * (time.process_time() - cpu), 1000 * (time.perf_counter() - wall), len(crops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--size", default="1920x1080", help="the record stream's size")
    parser.add_argument("--gop", type=int, default=20, help="frames from keyframe to keyframe")
    parser.add_argument("--clips", type=int, default=40, help="clips per case")
    parser.add_argument("--clip-s", type=float, default=15.0, help="a clip's length")
    parser.add_argument("--shots", type=int, default=8, help="tracks with a crop, second case")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        main_mp4 = make_main_stream(
            default_assets_dir() / "videos" / args.clip, Path(tmp), width, height, args.gop
        )
        params, packets = demuxed(main_mp4, 10.0)
    span = int(args.clip_s * 10)
    keyframes = [i for i, p in enumerate(packets) if p.keyframe and i + span <= len(packets)]
    print(f"{args.size}, a keyframe every {args.gop} frames, {args.clip_s:g} s clips")
    for shots in (1, args.shots):
        cpu, wall, made = [], [], 0
        for _ in range(args.clips):
            start = rng.choice(keyframes)  # a clip starts on a keyframe
            got = one_clip(Segment(params, tuple(packets[start : start + span])), shots, rng)
            cpu.append(got[0])
            wall.append(got[1])
            made += got[2]
        print(
            f"{shots} crop(s) a clip: CPU ms per clip median {statistics.median(cpu):.1f}, "
            f"max {max(cpu):.1f}; wall median {statistics.median(wall):.1f}; "
            f"{made} of {shots * args.clips} crops made"
        )


if __name__ == "__main__":
    main()
