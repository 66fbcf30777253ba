"""How much of the process's GIL NVDEC decoding takes: PyNvVideoCodec's ``Decoder`` against its
``ThreadedDecoder`` (run on the H200; needs PyNvVideoCodec, PyTorch and a CUDA device).

N cameras, each a thread that reads one frame of a 1080p clip every 40 ms (25 fps, looping),
for a few seconds per point. Two ways to decode:

- ``decoder``: vidpipe's :class:`~vidpipe.capture.nvdec.NvdecReader` (demux and ``Decode`` on
  the camera's thread; PyNvVideoCodec 2.2.4's ``Decode`` keeps the GIL while it runs);
- ``threaded``: PyNvVideoCodec's ``ThreadedDecoder``, which demuxes and decodes on a C++
  thread of its own into a buffer; the camera's thread takes one frame with
  ``get_batch_frames(1)`` when it is due.

What a point reports: frames delivered against frames due, host cores (process CPU over wall
time), and how late a probe thread wakes from a 1 ms sleep (p50/p95/max): a thread that wants
the GIL back waits for whoever holds it, so the lateness is what the daemon's batcher and
completion threads would wait at each of their 30-60 hand-overs per batch.

    python -m benchmarks.nvdec_gil --clip car-1080p25.mp4 --cameras 40,80,120 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PERIOD_S = 0.04


def _decoder_camera(clip: str) -> Callable[[], Any]:
    from vidpipe.capture.nvdec import NvdecReader

    reader = NvdecReader(clip, 0)
    reader.open()

    def read() -> Any:
        frame = reader.read()
        if frame is None:
            if not reader.rewind():
                reader.open()
            frame = reader.read()
        return frame

    return read


def _threaded_camera(clip: str, buffer_size: int) -> Callable[[], Any]:
    import torch

    from vidpipe.capture.nvdec import load_codec

    decoder = load_codec().ThreadedDecoder(clip, buffer_size, gpu_id=0, use_device_memory=True)

    def read() -> Any:
        frames = decoder.get_batch_frames(1)
        if not frames:  # the end of the file: start it again on the same decoders
            decoder.reconfigure_decoder(clip, 0)
            frames = decoder.get_batch_frames(1)
        return torch.from_dlpack(frames[0]) if frames else None

    return read


def _probe(stop: threading.Event, late_ms: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        time.sleep(0.001)
        late_ms.append((time.perf_counter() - t0 - 0.001) * 1000.0)


def run_point(clip: str, mode: str, cameras: int, seconds: float, buffer_size: int) -> dict:
    delivered = [0] * cameras
    due = [0] * cameras
    errors: list[str] = []
    stop = threading.Event()
    measuring = threading.Event()

    def camera(i: int) -> None:
        try:
            read = (
                _decoder_camera(clip) if mode == "decoder" else _threaded_camera(clip, buffer_size)
            )
            next_due = time.perf_counter() + (i % 25) * PERIOD_S / 25
            while not stop.is_set():
                time.sleep(max(0.0, next_due - time.perf_counter()))
                next_due += PERIOD_S
                frame = read()
                if measuring.is_set():
                    due[i] += 1
                    delivered[i] += frame is not None
        except Exception as exc:  # reported in the point, the other cameras go on
            errors.append(f"camera {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=camera, args=(i,), daemon=True) for i in range(cameras)]
    for t in threads:
        t.start()
    time.sleep(3.0)  # opens, first frames
    late: list[float] = []
    probe = threading.Thread(target=_probe, args=(stop, late), daemon=True)
    c0, t0 = os.times(), time.perf_counter()
    measuring.set()
    probe.start()
    time.sleep(seconds)
    measuring.clear()
    c1, t1 = os.times(), time.perf_counter()
    stop.set()
    for t in [*threads, probe]:
        t.join(5.0)
    late.sort()
    wall = t1 - t0
    shares = [d / max(1, u) for d, u in zip(delivered, due, strict=True)]
    return {
        "mode": mode,
        "cameras": cameras,
        "buffer_size": buffer_size if mode == "threaded" else None,
        "fps_delivered": round(sum(delivered) / wall, 1),
        "fps_due": round(cameras / PERIOD_S, 1),
        "worst_camera_share": round(min(shares), 3),
        "host_cores": round((c1.user - c0.user + c1.system - c0.system) / wall, 2),
        "probe_late_ms": {
            "p50": round(statistics.median(late), 2) if late else None,
            "p95": round(late[int(0.95 * (len(late) - 1))], 2) if late else None,
            "max": round(late[-1], 2) if late else None,
            "wakes": len(late),
        },
        "errors": errors[:5],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.nvdec_gil", description=__doc__)
    p.add_argument("--clip", type=Path, required=True)
    p.add_argument("--cameras", default="40,80,120")
    p.add_argument("--modes", default="decoder,threaded")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--buffer-size", type=int, default=4)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    points = []
    for n in [int(x) for x in args.cameras.split(",") if x]:
        for mode in args.modes.split(","):
            point = run_point(str(args.clip), mode, n, args.seconds, args.buffer_size)
            print(json.dumps(point), flush=True)
            points.append(point)
    if args.json:
        args.json.write_text("".join(json.dumps(x) + "\n" for x in points))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
