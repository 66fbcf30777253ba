"""The ``worker:G`` variant of ``benchmarks.gil_handover``: vidpipe's own capture workers.

The same cameras and batcher as the model, but each camera is a real ``CaptureWorker`` of a
``realtime`` looping NVDEC file camera (``NvdecSource``, ``NvdecReader``, the mailbox, the
metrics) over a fake PyNvVideoCodec whose demux and decode are native calls (the model's
``native_call``, GIL released) and whose copy is a native call and the GPU wait. So the
worker's real Python per frame replaces ``--py-us``, plus ``--worker-py-us`` for what the
fake leaves out (PyTorch's stream context, ``from_dlpack``, the frame pool). ``worker:1`` is
a thread per camera (today's default); ``worker:8`` sets ``capture.nvdec_group_size: 8``
(``vidpipe/capture/group.py``). A consumer thread takes frames as the scheduler would.

A frame's lateness is how much later it was read than the camera's earliest frame of the
window on the camera's own 1/fps grid (``t_capture - seq / fps``, less its minimum).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks.gil_model import Params, _batcher, native_call, python_work, quantile_ms
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.capture.worker import CaptureWorker
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import Frame

_PACKETS = 10_000  # a pass longer than any run: no rewind in the window
# 120 cameras take about a second to open on 2 cores; a reader that started late catches up
# on its realtime schedule (up to the pacer's 1 s), which must not fall into the window.
_WARMUP_S = 2.0


class FakeDemuxer:
    """A fake PyNvVideoCodec demuxer: ``_PACKETS`` packets, each read a native call."""

    def __init__(self, fps: float) -> None:
        self._fps = fps
        self._hasher = hashlib.sha256()

    def __iter__(self) -> Iterator[int | None]:
        for k in range(_PACKETS):
            native_call(self._hasher)  # the demux's read
            yield k
        yield None

    def GetNvCodecId(self) -> str:  # PyNvVideoCodec's names
        return "H264"

    def FrameRate(self) -> float:
        return self._fps

    def Width(self) -> int:
        return 1920

    def Height(self) -> int:
        return 1080


class _FakeDecoder:
    def __init__(self) -> None:
        self._hasher = hashlib.sha256()

    def Decode(self, packet: int | None) -> list[int]:
        native_call(self._hasher)
        return [] if packet is None else [packet]


class _FakeCodec:
    """Stands in for the PyNvVideoCodec module (no GPU)."""

    def __init__(self, fps: float) -> None:
        self._fps = fps

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        return FakeDemuxer(self._fps)

    def CreateDecoder(self, **kwargs: Any) -> _FakeDecoder:
        return _FakeDecoder()


def _source_factory(p: Params) -> DecoderKind:
    codec = _FakeCodec(p.fps)
    surface = np.zeros((3, 2), np.uint8)

    def make(cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext) -> NvdecSource:
        hasher = hashlib.sha256()

        def own_copy(s: Any) -> tuple[Any, Any]:
            python_work(p.worker_py_us)  # what the fake skips: torch's stream, dlpack, pool
            native_call(hasher)  # cuMemcpyDtoDAsync
            time.sleep(p.gpu_wait_us / 1e6)  # cuStreamSynchronize
            return np.copy(s), None

        reader = NvdecReader(cam.url, codec=codec, to_tensor=lambda _f: surface)
        shared = ctx.shared(NvdecShared)
        return NvdecSource(cam, defaults, shared=shared, reader=reader, own_copy=own_copy)

    return DecoderKind(make)


def run_worker(group_size: int, p: Params) -> dict[str, object]:
    """``p.cameras`` real capture workers: ``_WARMUP_S``, then a window of ``p.seconds`` - 0.5
    (the model's window)."""
    saved = CAPTURE_DECODERS.factories["nvdec"]
    CAPTURE_DECODERS.factories["nvdec"] = _source_factory(p)
    try:
        return _run(group_size, p)
    finally:
        CAPTURE_DECODERS.factories["nvdec"] = saved


def _run(group_size: int, p: Params) -> dict[str, object]:
    defaults = CaptureConfig(decoder="nvdec", nvdec_group_size=group_size)
    metrics, hub, stop = Metrics(), FrameHub(), threading.Event()
    context = CaptureContext()  # one pipeline's: its cameras share the read groups
    workers = []
    for i in range(p.cameras):
        cam = CameraConfig(name=f"cam{i}", url=f"file:///fake/cam{i}.mp4", realtime=True)
        cm = metrics.camera(cam.name)
        box = hub.add(cam.name, "newest", cm.overwritten)
        workers.append(CaptureWorker(cam, defaults, box, cm, context=context))
    taken: list[Frame] = []
    batches: list[float] = []

    def consume() -> None:  # the scheduler's side: take each frame as it comes
        while not stop.is_set():
            frame = hub.take(0.02)
            if frame is not None:
                taken.append(frame)

    helpers = [
        threading.Thread(target=consume, daemon=True),
        threading.Thread(target=_batcher, args=(stop, p, batches), daemon=True),
    ]
    for w in workers:
        w.start()
    for t in helpers:
        t.start()
    time.sleep(_WARMUP_S)
    captured0 = _captured(workers)
    taken.clear()
    batches.clear()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(p.seconds - 0.5)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    frames, batch_ms = list(taken), list(batches)
    captured = _captured(workers) - captured0
    threads = threading.active_count()
    stop.set()
    for w in workers:
        w.stop()
    for w in workers:
        w.join(5.0)
    for t in helpers:
        t.join(5.0)
    late = _lateness_ms(frames, p.fps)
    return {
        "variant": f"worker:{group_size}",
        "threads": threads,
        "batch_ms_p50": quantile_ms(batch_ms, 0.5),
        "batch_ms_p95": quantile_ms(batch_ms, 0.95),
        "batch_ms_max": round(max(batch_ms, default=float("nan")), 2),
        "batches": len(batch_ms),
        "late_ms_p50": quantile_ms(late, 0.5),
        "late_ms_p95": quantile_ms(late, 0.95),
        "late_over_period": round(sum(x > 1000.0 / p.fps for x in late) / max(1, len(late)), 4),
        "frames_per_s": round(captured / wall, 1),
        "taken_per_s": round(len(frames) / wall, 1),
        "due_per_s": p.cameras * p.fps,
        "cpu_cores": round(cpu / wall, 2),
    }


def _captured(workers: list[CaptureWorker]) -> int:
    # the workers' own counts: a registry lookup per camera takes long enough to skew the window
    return sum(int(w.stats()["frames"]) for w in workers)


def _lateness_ms(frames: list[Frame], fps: float) -> list[float]:
    offsets: dict[str, list[float]] = {}
    for f in frames:
        offsets.setdefault(f.camera, []).append(f.t_capture - f.seq / fps)
    return [(o - min(os)) * 1000.0 for os in offsets.values() for o in os]
