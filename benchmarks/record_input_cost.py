"""CPU of a camera's record input (demuxed only) against a detect input reading the same stream.

One GStreamer RTSP server (``tests/rtsp.py``) serves a 1080p copy of a clip (made here with
ffmpeg, H.264, a keyframe a second, no B-frames) in a loop at its own rate. Two clients read it
at once: a ``RecordInputWorker`` (what a ``roles: [record]`` input runs: demux, packets into a
clip ring) and a ``CaptureWorker`` as a detect input, or a ``url:`` camera, runs (demux and
decode every frame, frames drained by a stand-in for the scheduler). Each one's thread CPU time
is divided by the frames of the stream it read in the window. Thread CPU time hardly depends
on what else the machine runs (the server's own CPU is not counted)::

    python -m benchmarks.record_input_cost --seconds 20 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tests.rtsp import RtspServer

from benchmarks.reader_cost import _thread_cpu_s
from vidpipe.assets import default_assets_dir
from vidpipe.capture.record_input import RecordInputWorker
from vidpipe.clips.ring import PacketRing
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.wiring import capture_stage


def make_main_stream(clip: Path, out_dir: Path, width: int, height: int) -> Path:
    """``clip`` scaled to ``width`` x ``height``, as ``main.mp4`` in ``out_dir``."""
    out = out_dir / "main.mp4"
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-i", str(clip), "-vf", f"scale={width}:{height}"),
            *("-c:v", "libx264", "-preset", "veryfast", "-g", "10", "-keyint_min", "10"),
            *("-sc_threshold", "0", "-bf", "0", "-an", str(out)),
        ],
        check=True,
        timeout=600,
    )
    return out


def measure(url: str, seconds: float) -> tuple[float, float, int, int]:
    """(record ms per packet, detect ms per frame, packets, frames) over ``seconds``."""
    metrics = Metrics()
    capture = CaptureConfig()
    detect = CameraConfig.model_validate({"name": "detect", "url": url})
    record = CameraConfig.model_validate(
        {
            "name": "record",
            "inputs": [
                {"url": "rtsp://127.0.0.1:1/unused", "roles": ["detect"]},
                {"url": url, "roles": ["record"]},
            ],
        }
    )
    ring = PacketRing("record", pre_s=3.0, max_bytes=64 * 1024 * 1024)
    recorder = RecordInputWorker(record, capture, ring, metrics)
    hub, (worker,) = capture_stage([detect], capture, metrics)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            hub.take(0.05)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    worker.start()
    recorder.start()
    time.sleep(3.0)  # both connected and streaming

    def frames() -> int:
        got = metrics.registry.get_sample_value(
            "vidpipe_frames_captured_total", {"camera": "detect"}
        )
        return int(got or 0)

    r0, d0 = _thread_cpu_s("capture-record-record"), _thread_cpu_s("capture-detect-reader")
    p0, f0 = recorder.packets, frames()
    time.sleep(seconds)
    r1, d1 = _thread_cpu_s("capture-record-record"), _thread_cpu_s("capture-detect-reader")
    p1, f1 = recorder.packets, frames()
    recorder.stop()
    worker.stop()
    recorder.join(10)
    worker.join(10)
    stop.set()
    consumer.join(5)
    packets, decoded = p1 - p0, f1 - f0
    return (
        1000.0 * (r1 - r0) / max(1, packets),
        1000.0 * (d1 - d0) / max(1, decoded),
        packets,
        decoded,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--size", default="1920x1080", help="the main stream's size")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    clip = default_assets_dir() / "videos" / args.clip
    with tempfile.TemporaryDirectory() as tmp:
        make_main_stream(clip, Path(tmp), width, height)
        with RtspServer(Path(tmp), loop=True) as server:
            url = server.url("main")
            for r in range(args.repeats):
                rec, dec, packets, frames = measure(url, args.seconds)
                print(
                    f"{args.size} {clip.name} repeat {r}: record input (demux only) "
                    f"{rec:.3f} ms CPU per packet ({packets} packets); detect input (demux + "
                    f"decode) {dec:.3f} ms CPU per frame ({frames} frames); ratio "
                    f"{dec / max(rec, 1e-9):.0f}x; load average {os.getloadavg()[0]:.1f}"
                )


if __name__ == "__main__":
    main()
