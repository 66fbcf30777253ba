"""The streams part of ``python -m benchmarks.gpu``: N cameras playing a 1080p 25 fps clip in
real time through the whole daemon (capture, letterbox, the stream set, postprocessing); a
point is *sustained* when at least 95 % of the frames the cameras produced were inferred.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vidpipe.config import Config


def cuda_graphs(args: argparse.Namespace) -> dict[str, bool]:
    """The executor's ``cuda_graphs`` setting (torch only): off with ``--eager``."""
    return {"cuda_graphs": not args.eager} if args.type == "torch" else {}


def make_clip(src: Path, dst: Path, fps: int = 25) -> str:
    """1080p at ``fps``: ffmpeg if present (H.264), else OpenCV (MPEG-4 part 2)."""
    # setpts=0.5*PTS plays the 12.5 fps clip twice as fast: every frame is a new picture,
    # not a duplicate that would decode for free.
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg:
        cmd = [
            ffmpeg,
            "-y",
            "-loglevel",
            "error",
            "-i",
            str(src),
            "-vf",
            "setpts=0.5*PTS,scale=1920:1080",
            "-r",
            str(fps),
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-pix_fmt",
            "yuv420p",
            "-an",
            str(dst),
        ]
        subprocess.run(cmd, check=True)
        return "ffmpeg libx264 1920x1080 25 fps (setpts=0.5*PTS)"
    import cv2

    cap = cv2.VideoCapture(str(src))
    out = cv2.VideoWriter(str(dst), cv2.VideoWriter.fourcc(*"mp4v"), fps, (1920, 1080))
    while True:
        ok, img = cap.read()
        if not ok:
            break
        out.write(cv2.resize(img, (1920, 1080), interpolation=cv2.INTER_LINEAR))
    out.release()
    return "OpenCV mp4v (MPEG-4 part 2) 1920x1080 25 fps, source frames not duplicated"


def preprocess_cost(clip: Path, frames: int = 200) -> dict[str, float]:
    """The scheduler thread's per-frame work for a 1080p frame: letterbox into an input buffer.

    One thread does this for every camera, so ``1000 / fill_ms`` bounds the frames per
    second the scheduler can submit, whatever the GPU does.
    """
    import cv2

    from vidpipe.preprocess.buffers import input_buffer
    from vidpipe.types import TensorSpec

    cap = cv2.VideoCapture(str(clip))
    images: list[np.ndarray] = []
    while len(images) < 50:
        ok, img = cap.read()
        if not ok:
            break
        images.append(np.asarray(img, np.uint8))
    cap.release()
    buf = input_buffer(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 0)
    t0 = time.perf_counter()
    for i in range(frames):
        buf.fill(images[i % len(images)])
    fill_ms = (time.perf_counter() - t0) * 1000 / frames
    return {"fill_ms": round(fill_ms, 3), "bound_fps": round(1000 / fill_ms, 1)}


def stream_point(args: argparse.Namespace, clip: Path, cameras: int) -> dict[str, Any]:
    """Run the daemon with ``cameras`` real-time 1080p cameras; did inference keep up?"""
    from vidpipe.daemon import Daemon

    daemon = Daemon(_stream_config(args, clip, cameras))
    daemon.start()
    assert daemon.scheduler is not None
    count = [0]
    lock = threading.Lock()
    forward = daemon.scheduler.on_result

    def counting(result: Any) -> None:
        with lock:
            count[0] += 1
        forward(result)

    daemon.scheduler.on_result = counting
    try:
        time.sleep(args.warmup)
        with lock:
            start = count[0]
        cpu0, t0 = time.process_time(), time.perf_counter()
        time.sleep(args.window)
        elapsed = time.perf_counter() - t0
        with lock:
            n = count[0] - start
        cpu = (time.process_time() - cpu0) / elapsed
        drops = _drops(daemon.metrics.registry)
    finally:
        daemon.stop_event.set()
        daemon.shutdown()
    expected = cameras * 25.0
    point = {
        "cameras": cameras,
        "inferred_fps": round(n / elapsed, 1),
        "offered_fps": expected,
        "fraction": round(n / elapsed / expected, 3),
        "sustained": n / elapsed >= 0.95 * expected,
        "process_cpu_cores": round(cpu, 2),
        "drops_since_start": drops,
    }
    print(json.dumps(point), flush=True)
    return point


def _stream_config(args: argparse.Namespace, clip: Path, cameras: int) -> Config:
    """The daemon config of a streams point: ``cameras`` looping real-time cameras of ``clip``."""
    from vidpipe.config import Config

    doc = {
        "model": {"path": str(args.model), "labels": str(args.labels)},
        "inference": {
            "type": args.type,
            "devices": [args.device],
            "precision": args.precision,
            "advanced": {
                "streams": 2,
                "max_batch": args.stream_batch,
                "batch_timeout_ms": 10,
                **cuda_graphs(args),
            },
        },
        "http": {"enabled": False},
        "cameras": [
            {"name": f"cam{i}", "url": str(clip), "loop": True, "realtime": True}
            for i in range(cameras)
        ],
    }
    return Config.model_validate(doc)


def _drops(registry: Any) -> dict[str, float]:
    """Frames dropped so far, by reason, over all cameras."""
    out: dict[str, float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == "vidpipe_frames_dropped_total":
                reason = s.labels.get("reason", "?")
                out[reason] = out.get(reason, 0.0) + s.value
    return out
