"""How evenly the RTSP test server delivers N looped streams: is it what caps density?

Serves N mounts of a clip with ``tests/rtsp.py`` (looped, staggered, as ``vidpipe bench --mode
density`` does), reads them with demux-only clients (PyAV, no decoding) spread over several
processes so that the clients themselves are not the bottleneck, and reports, per stream,
the packet rate and how the packets arrived: the longest gap between two packets, and the
share that came in bursts (within 20 ms of the previous one, at a 100 ms frame interval).
A stream delivered in step with the clock has gaps near the frame interval and no bursts.

    python -m benchmarks.rtsp_arrival --streams 48 --seconds 20 [--processes 4] [--busy 2]

``--busy K`` runs K busy-looping processes meanwhile, to see whether the server keeps its
pace on a box whose cores are taken. ``--vidpipe-cameras N`` runs the real daemon in this
process meanwhile, reading N more mounts of the same server as density mode's
``vidpipe-motion`` does (bf16, ``detect_fps`` 5, motion gate): whether the server still
delivers evenly to the probe while vidpipe loads the box, and what vidpipe dropped meanwhile.
The probe's window starts ``--warmup`` s after its clients start: FFmpeg hands over the
packets it read while probing the stream all at once, which would count as a burst.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vidpipe.assets import default_assets_dir
from vidpipe.bench.density import _proc_cpu_s, load_rtsp_module

BURST_S = 0.02


def _read(urls: list[str], warmup_s: float, seconds: float, out: Any) -> None:
    """One client process: a thread per stream, demux only, arrival times in the window."""
    import av

    arrivals: dict[str, list[float]] = {u: [] for u in urls}
    t0 = time.monotonic() + warmup_s
    t1 = t0 + seconds

    def one(url: str) -> None:
        try:
            _demux(url)
        except Exception as exc:  # reported, not lost: a stream with no arrivals
            print(f"{url}: {type(exc).__name__}: {exc}", flush=True)

    def _demux(url: str) -> None:
        opts = {"rtsp_transport": "tcp", "timeout": "5000000"}
        with av.open(url, options=opts, timeout=10) as container:
            stream = container.streams.video[0]
            for _packet in container.demux(stream):
                now = time.monotonic()
                if now >= t1:
                    return
                if now >= t0:
                    arrivals[url].append(now)

    threads = [threading.Thread(target=one, args=(u,), daemon=True) for u in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(warmup_s + seconds + 30)
    out.put(arrivals)


def _busy(stop: Any) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _stats(times: list[float], seconds: float) -> dict[str, float]:
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return {
        "fps": len(times) / seconds,
        "max_gap_ms": 1000 * max(gaps) if gaps else float("inf"),
        "p99_gap_ms": 1000 * sorted(gaps)[int(0.99 * (len(gaps) - 1))] if gaps else float("inf"),
        "burst_share": sum(g < BURST_S for g in gaps) / len(gaps) if gaps else 1.0,
    }


def _start_vidpipe(server: Any, cameras: int, assets: Path) -> Any:
    """The daemon reading mounts cam0..cam{cameras-1}, started and delivering."""
    from benchmarks.variants import variant_run
    from vidpipe.bench.common import PointSpec

    models = assets / "models"
    spec = PointSpec(
        contender="vidpipe-motion",
        clip=server.url("cam{i}"),
        clip_name="probe",
        cameras=cameras,
        seconds=0.0,
        warmup_s=0.0,
        precision="bf16",
        model=str(models / "yolox_nano.onnx"),
        labels=str(models / "coco80.txt"),
        detect_fps=5,
    )
    run = variant_run(spec)
    run.start()
    deadline = time.monotonic() + 120
    while not run.ready() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(5)  # past the cameras' start
    return run


def _vidpipe_delta(before: dict, after: dict, wall_s: float) -> dict[str, Any]:
    capture = [(after[k]["captured"] - before[k]["captured"]) / wall_s for k in after]
    return {
        "vidpipe_capture_fps_min": min(capture),
        "vidpipe_capture_fps_max": max(capture),
        "vidpipe_inferred": sum(after[k]["inferred"] - before[k]["inferred"] for k in after),
        # overwritten, too old, ...: not decimated or still on purpose
        "vidpipe_dropped": sum(after[k]["dropped"] - before[k]["dropped"] for k in after),
    }


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--streams", type=int, default=48)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes meanwhile")
    parser.add_argument(
        "--vidpipe-cameras", type=int, default=0, help="the daemon reads this many more mounts"
    )
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


def _probe(
    args: argparse.Namespace, server: Any, first: int
) -> tuple[dict[str, list[float]], float | None, dict[str, Any]]:
    """Read the probe's mounts (``first`` on), with the daemon on the mounts before them and
    the busy loops meanwhile if asked: packet arrival times per URL, the server's CPU % of one
    core over the probe, and what vidpipe did in that time."""
    ctx = mp.get_context("spawn")  # no fork of a process that may run OpenVINO's threads
    vidpipe: dict[str, Any] = {}
    run = _start_vidpipe(server, first, default_assets_dir()) if first else None
    urls = [server.url(f"cam{i}") for i in range(first, first + args.streams)]
    stop = ctx.Event()
    busy = [ctx.Process(target=_busy, args=(stop,)) for _ in range(args.busy)]
    for p in busy:
        p.start()
    queue: Any = ctx.Queue()
    groups = [urls[k :: args.processes] for k in range(args.processes)]
    readers = [
        ctx.Process(target=_read, args=(g, args.warmup, args.seconds, queue)) for g in groups if g
    ]
    counters0 = run.camera_counters() if run else {}
    cpu0, w0 = _proc_cpu_s(server.pid), time.monotonic()
    for p in readers:
        p.start()
    arrivals: dict[str, list[float]] = {}
    for _ in readers:
        arrivals.update(queue.get(timeout=args.warmup + args.seconds + 60))
    cpu1, w1 = _proc_cpu_s(server.pid), time.monotonic()
    if run is not None:
        vidpipe = _vidpipe_delta(counters0, run.camera_counters(), w1 - w0)
        run.stop()
        run.close()
    stop.set()
    for p in readers + busy:
        p.join(10)
    server_cpu = None if cpu0 is None or cpu1 is None else 100 * (cpu1 - cpu0) / (w1 - w0)
    return arrivals, server_cpu, vidpipe


def _summary(
    args: argparse.Namespace,
    per: dict[str, dict[str, float]],
    server_cpu: float | None,
    vidpipe: dict[str, Any],
) -> dict[str, Any]:
    """The run's figures: the worst and median stream, the server's CPU and vidpipe's."""
    return {
        "streams": args.streams,
        "busy": args.busy,
        "vidpipe_cameras": args.vidpipe_cameras,
        "load_average": os.getloadavg()[0],
        "server_cpu_percent_of_one_core": server_cpu,
        "fps_min": min(s["fps"] for s in per.values()),
        "fps_max": max(s["fps"] for s in per.values()),
        "max_gap_ms": max(s["max_gap_ms"] for s in per.values()),
        "median_p99_gap_ms": statistics.median(s["p99_gap_ms"] for s in per.values()),
        "worst_burst_share": max(s["burst_share"] for s in per.values()),
        "median_burst_share": statistics.median(s["burst_share"] for s in per.values()),
        **vidpipe,
    }


def main() -> None:
    args = _parse_args()
    rtsp = load_rtsp_module()
    clip = default_assets_dir() / "videos" / args.clip
    with tempfile.TemporaryDirectory(prefix="rtsp-arrival-") as tmp:
        first = args.vidpipe_cameras  # the daemon reads cam0.., the probe the next mounts
        for i in range(first + args.streams):
            (Path(tmp) / f"cam{i}.mp4").symlink_to(clip)
        with rtsp.RtspServer(Path(tmp), loop=True, stagger=True) as server:
            arrivals, server_cpu, vidpipe = _probe(args, server, first)
    per = {u.rsplit("/", 1)[1]: _stats(t, args.seconds) for u, t in arrivals.items()}
    summary = _summary(args, per, server_cpu, vidpipe)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "streams": per}, indent=1))


if __name__ == "__main__":
    main()
