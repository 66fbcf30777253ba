"""CPU of a camera's record input (demuxed only) against a detect input reading the same stream.

One GStreamer RTSP server (``tests/rtsp.py``) serves a 1080p copy of a clip (made here with
ffmpeg, H.264, a keyframe a second, no B-frames) and the clip itself (the sub-stream, 768x432
for the walkway clip) in a loop at their own rate. Three clients read at once: a
``RecordInputWorker`` on the 1080p stream (what a ``roles: [record]`` input runs: demux,
packets into a clip ring), and a ``CaptureWorker`` on each stream, as a detect input or a
``url:`` camera runs (demux and decode every frame, frames drained by a stand-in for the
scheduler; no model, so no conversion to the model's size). Each one's thread CPU time is
divided by the frames of the stream it read in the window. Thread CPU time hardly depends on
what else the machine runs (the server's own CPU is not counted). A camera with ``url:`` at
1080p costs the 1080p detect figure; one with a sub-stream to detect on and the 1080p stream
to record from costs the sub-stream's detect figure plus the record figure::

    python -m benchmarks.record_input_cost --seconds 20 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from tests.rtsp import RtspServer

from benchmarks.threads import draining, named_thread_cpu_s
from vidpipe.assets import default_assets_dir
from vidpipe.capture.record_input import RecordInputWorker
from vidpipe.clips.ring import PacketRing
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.wiring import capture_stage


def make_main_stream(clip: Path, out_dir: Path, width: int, height: int, gop: int = 10) -> Path:
    """``clip`` scaled to ``width`` x ``height``, a keyframe every ``gop`` frames, as
    ``main.mp4`` in ``out_dir``."""
    out = out_dir / "main.mp4"
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-i", str(clip), "-vf", f"scale={width}:{height}"),
            *("-c:v", "libx264", "-preset", "veryfast", "-g", str(gop), "-keyint_min", str(gop)),
            *("-sc_threshold", "0", "-bf", "0", "-an", str(out)),
        ],
        check=True,
        timeout=600,
    )
    return out


def measure(url: str, sub_url: str, seconds: float) -> tuple[float, float, float, int]:
    """(record ms per packet, 1080p detect ms per frame, sub-stream detect ms per frame,
    packets recorded) over ``seconds``."""
    metrics = Metrics()
    capture = CaptureConfig()
    detect = CameraConfig.model_validate({"name": "detect", "url": url})
    sub = CameraConfig.model_validate({"name": "sub", "url": sub_url})
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
    hub, workers = capture_stage([detect, sub], capture, metrics)

    def frames(camera: str) -> int:
        got = metrics.registry.get_sample_value("vidpipe_frames_captured_total", {"camera": camera})
        return int(got or 0)

    def sample() -> tuple[float, float, float, int, int, int]:
        return (
            named_thread_cpu_s("capture-record-record"),
            named_thread_cpu_s("capture-detect-reader"),
            named_thread_cpu_s("capture-sub-reader"),
            recorder.packets,
            frames("detect"),
            frames("sub"),
        )

    with draining(hub):
        for worker in workers:
            worker.start()
        recorder.start()
        time.sleep(3.0)  # all connected and streaming
        before = sample()
        time.sleep(seconds)
        after = sample()
        recorder.stop()
        for worker in workers:
            worker.stop()
        recorder.join(10)
        for worker in workers:
            worker.join(10)
    cpu = [a - b for a, b in zip(after[:3], before[:3], strict=True)]
    counts = [max(1, a - b) for a, b in zip(after[3:], before[3:], strict=True)]
    rec, main, small = (1000.0 * c / n for c, n in zip(cpu, counts, strict=True))
    return rec, main, small, counts[0]


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
        (Path(tmp) / "sub.mp4").symlink_to(clip)
        with RtspServer(Path(tmp), loop=True) as server:
            for r in range(args.repeats):
                rec, main_ms, sub_ms, packets = measure(
                    server.url("main"), server.url("sub"), args.seconds
                )
                print(
                    f"{args.size} {clip.name} repeat {r} ({packets} packets): record input "
                    f"(demux only) {rec:.3f} ms CPU per frame; detect (demux + decode) "
                    f"{main_ms:.3f} ms at {args.size}, {sub_ms:.3f} ms on the sub-stream; "
                    f"demux/decode ratio 1/{main_ms / max(rec, 1e-9):.0f}; a camera's capture "
                    f"CPU, url: {args.size} {main_ms:.2f} ms against sub detect + record "
                    f"{sub_ms + rec:.2f} ms ({main_ms / max(sub_ms + rec, 1e-9):.1f}x); "
                    f"load average {os.getloadavg()[0]:.1f}"
                )


if __name__ == "__main__":
    main()
