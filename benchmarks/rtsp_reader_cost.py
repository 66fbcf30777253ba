"""CPU per frame of N live RTSP cameras read by the real capture workers, no inference.

Serves N mounts of the walkway clip with ``tests/rtsp.py`` (looped, staggered, as ``vidpipe
bench --mode density`` does) and reads them with N ``CaptureWorker``s at ``detect_fps: 5``
with the motion gate, as density mode's ``vidpipe-motion`` contender reads them; one thread
takes what the gate lets through and drops it. Over the window it reports, per frame of the
streams: the CPU of the capture threads (demux, decode, gate), of the whole process (every
thread, native ones included: OpenCV's thread pool, for one) and of the RTSP server.

``--opencv-threads`` compares OpenCV thread pool sizes in turn, each in a fresh process (the
setting is process-wide): ``-1`` is OpenCV's default (one thread per core), ``1`` what
``vidpipe run`` sets (``vidpipe/cli.py``, ``tune_process``)::

    python -m benchmarks.rtsp_reader_cost --cameras 45 --opencv-threads -1,1 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.threads import draining, named_thread_cpu_s
from vidpipe.assets import default_assets_dir
from vidpipe.bench.density import _proc_cpu_s, load_rtsp_module

GATED = {"detect_fps": 5, "motion": {"enabled": True}}


def _process_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def measure(clip: Path, cameras: int, seconds: float, warmup_s: float) -> dict[str, float]:
    """CPU ms per frame (capture threads, process, server) of ``cameras`` gated RTSP cameras."""
    from vidpipe.config import CameraConfig, CaptureConfig
    from vidpipe.metrics import Metrics
    from vidpipe.wiring import capture_stage

    rtsp = load_rtsp_module()
    metrics = Metrics()
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(cameras):
            (Path(tmp) / f"cam{k}.mp4").symlink_to(clip)
        with rtsp.RtspServer(Path(tmp), loop=True, stagger=True) as server:
            cams = [
                CameraConfig.model_validate(
                    {"name": f"cam{k}", "url": server.url(f"cam{k}"), **GATED}
                )
                for k in range(cameras)
            ]
            hub, workers = capture_stage(cams, CaptureConfig(), metrics)
            for w in workers:
                w.start()

            def sample() -> tuple[float, float, float, float]:
                got = metrics.registry.get_sample_value
                frames = sum(
                    got("vidpipe_frames_captured_total", {"camera": f"cam{k}"}) or 0.0
                    for k in range(cameras)
                )
                server_s = _proc_cpu_s(server.pid) or 0.0
                return frames, named_thread_cpu_s("capture-"), _process_cpu_s(), server_s

            with draining(hub):  # what the gate let through, dropped
                time.sleep(warmup_s)
                before = sample()
                time.sleep(seconds)
                after = sample()
                for w in workers:
                    w.stop()
                for w in workers:
                    w.join(10)
    frames = max(1.0, after[0] - before[0])
    ms = [1000.0 * (a - b) / frames for a, b in zip(after[1:], before[1:], strict=True)]
    return {"frames_per_s": frames / seconds, "capture": ms[0], "process": ms[1], "server": ms[2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--cameras", type=int, default=45)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--opencv-threads", default="-1,1", help="pool sizes to compare, in turn")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    clip = default_assets_dir() / "videos" / args.clip
    if args.child is not None:  # one measurement, in a process of its own
        import cv2

        cv2.setNumThreads(args.child)
        got = measure(clip, args.cameras, args.seconds, args.warmup)
        print(
            f"OpenCV threads {cv2.getNumThreads()}: {args.cameras} cameras, "
            f"{got['frames_per_s']:.0f} frames/s; CPU ms per frame: capture threads "
            f"{got['capture']:.3f}, whole process {got['process']:.3f}, "
            f"RTSP server {got['server']:.3f}",
            flush=True,
        )
        return
    for _ in range(args.repeats):
        for threads in (int(t) for t in args.opencv_threads.split(",")):
            cmd = [sys.executable, "-m", "benchmarks.rtsp_reader_cost", "--child", str(threads)]
            cmd += ["--clip", args.clip, "--cameras", str(args.cameras)]
            cmd += ["--seconds", str(args.seconds), "--warmup", str(args.warmup)]
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
