"""What a capture worker spends, per frame, reading from a decode process, and on what.

    python -m benchmarks.remote_read_cost [--frames 4000] [--repeats 3] [--json out.jsonl]
    python -m benchmarks.remote_read_cost --cameras 1,32      # one reader, then 32 at once
    python -m benchmarks.remote_read_cost --clip car-1080p25.mp4 --cameras 1,90   # on a GPU

At three times its count, one GPU process with decode processes is bound by its GIL, and half
of the GIL goes to the capture workers' reader threads (benchmarks/README.md, "A file camera
waiting for the take"). This rig measures one of those readers without a GPU: one NVDEC file
camera in a decode process (``capture.nvdec_processes: 1``, the real process, connection and
ring of shared host memory) over the fake PyNvVideoCodec of ``tests/fake_nvdec.py`` (tiny
pictures: what is left is the Python around each frame), its frames taken by a consumer
thread as soon as they are put (a ``newest`` mailbox, not paced, so the reader never waits for
a due time). Per repeat, the reader thread's CPU per frame put (``time.thread_time``), then a
second run under cProfile, timed by the thread's CPU clock, for where it goes: the functions
by their own CPU time, as shares of the profiled total (the profiler slows every call alike,
so shares, not microseconds; a read blocked on the pipe counts only its system time).

``--cameras 1,32`` measures each count in turn: that many cameras read at once, each into
its own mailbox, all taken by the one consumer; the CPU a frame is then the readers' CPU
over the frames they put, and tells what many readers cost each other (wake-ups, handing
the GIL over) beyond what one costs. ``--clip`` reads that file with the real PyNvVideoCodec
into a ring of GPU memory (``capture.nvdec_processes``, as on a GPU box; looped, not in real
time), instead of the fake decoder's host ring: what the GPU's frames add.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from pathlib import Path
from typing import Any

from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.nvdec_child import CodecSpec
from vidpipe.capture.nvdec_source import NvdecShared
from vidpipe.capture.session import Session
from vidpipe.capture.worker import CaptureWorker
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub

_PACKETS = 1_000_000  # never reaches the file's end


class _MeasuredWorker(CaptureWorker):
    """A worker whose reader thread counts its own CPU time, under cProfile if asked."""

    profile: cProfile.Profile | None = None
    cpu_s = 0.0

    def _read_frames(self, session: Session) -> None:
        t0 = time.thread_time()
        if self.profile is not None:
            self.profile.enable()  # this thread only
        try:
            super()._read_frames(session)
        finally:
            if self.profile is not None:
                self.profile.disable()
            self.cpu_s += time.thread_time() - t0


def read(
    frames: int,
    profile: cProfile.Profile | None,
    cameras: int = 1,
    clip: Path | None = None,
    processes: int = 1,
) -> tuple[float, int]:
    """Read ``frames`` frames through ``cameras`` workers at once: (their reader CPU seconds,
    frames they made)."""
    context = CaptureContext()
    decoding = context.shared(NvdecShared).decoding
    if clip is None:
        decoding.codec = CodecSpec("tests.fake_nvdec", "FakeCodec", (_PACKETS, 50))
        decoding.ring = "host"
    defaults = CaptureConfig(decoder="nvdec", nvdec_processes=processes, shed_gops=False)
    hub, metrics = FrameHub(), Metrics()
    workers = []
    url = "file:///fake.mp4" if clip is None else str(clip)
    for i in range(cameras):
        camera = CameraConfig(name=f"cam{i}", url=url, loop=clip is not None)
        box = hub.add(camera.name, "newest", lambda _f: None)
        worker = _MeasuredWorker(
            camera, defaults, box, metrics.camera(camera.name), context=context
        )
        worker.profile = profile
        workers.append(worker)
    for worker in workers:
        worker.start()
    try:
        taken = 0
        while taken < frames:
            if hub.take(10.0) is None:
                raise RuntimeError("no frame from the decode process within 10 s")
            taken += 1
    finally:
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.join(10.0)
        context.close()
    return sum(w.cpu_s for w in workers), sum(int(w.stats()["frames"]) for w in workers)


def shares(profile: cProfile.Profile, top: int = 14) -> list[tuple[str, float]]:
    """The functions by own time, as shares of the profiled total."""
    stats: Any = pstats.Stats(profile)
    rows = [(f"{Path(f).name}:{line}:{name}", s[2]) for (f, line, name), s in stats.stats.items()]
    total = sum(t for _, t in rows) or 1.0
    rows.sort(key=lambda r: -r[1])
    return [(name, round(t / total, 3)) for name, t in rows[:top]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.remote_read_cost", description=__doc__)
    ap.add_argument("--frames", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="append the result here (JSON lines)")
    ap.add_argument("--cameras", default="1", help="comma-separated counts (default 1)")
    ap.add_argument("--clip", type=Path, help="a file for the real PyNvVideoCodec (GPU)")
    ap.add_argument("--decode-processes", type=int, default=1, help="(default 1)")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    args = ap.parse_args(argv)
    read(200, None, clip=args.clip)  # the first decode process pays the imports
    for cameras in (int(n) for n in args.cameras.split(",")):
        result = point(args, cameras)
        print(json.dumps(result, indent=1))
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(result) + "\n")
    return 0


def point(args: argparse.Namespace, cameras: int) -> dict[str, Any]:
    """One count: the reader CPU a frame, per repeat, and for one camera (unless
    ``--no-profile``) where it goes."""
    per_frame_us = []
    for _ in range(args.repeats):
        cpu_s, made = read(args.frames, None, cameras, args.clip, args.decode_processes)
        per_frame_us.append(1e6 * cpu_s / made)
    result: dict[str, Any] = {
        "frames": args.frames,
        "cameras": cameras,
        "decoder": "fake" if args.clip is None else "pynvvideocodec",
        "decode_processes": args.decode_processes,
        "reader_cpu_us_per_frame": [round(u, 1) for u in per_frame_us],
        "median_us": round(statistics.median(per_frame_us), 1),
    }
    if not args.no_profile and cameras == 1:  # one profiler, one thread
        profile = cProfile.Profile(time.thread_time_ns, 1e-9)  # CPU time: a blocked read: none
        read(args.frames, profile, cameras, args.clip)
        result["own_time_shares"] = shares(profile)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
