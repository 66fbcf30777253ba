"""A CPU model of the GIL hand-over between NVDEC camera threads and the batcher.

``python -m benchmarks.gil_handover [--cameras 120] [--repeats 3] [--variants threads,groups:8]``

On the H200 a daemon with many NVDEC cameras loses its batches to the GIL
(benchmarks/README.md): every camera thread makes a few short GIL-releasing calls per
frame (demux, decode, the device copy, the stream wait, the mailbox), and the batcher, whose
batch is a row of 30-60 short GIL-releasing PyTorch calls (``python -m
benchmarks.torch_calls``), waits behind the camera threads at every one of its own
hand-overs. This models it without a GPU:

* a **native call** is ``hashlib.sha256().update`` over 4 KiB: about 3.6 us of C with the GIL
  released (CPython releases it for 2 KiB and more), the length of a driver call or a kernel
  launch. ``time.sleep(0)`` was rejected: a 57 us syscall, and ``np.copyto`` of a few KiB
  keeps the GIL;
* the **GPU wait** (``cuStreamSynchronize`` on the decode and the copy) is a ``time.sleep``
  of ``--gpu-wait-us``: no CPU, the GIL released;
* **Python work** between calls is a busy loop holding the GIL (``--py-us`` per frame);
* a **camera** is due every 1/``--fps`` s (its demux waits for the network until then), then
  makes ``--calls`` native calls (the first is the demux's return, one of the rest is the GPU
  wait). Its frame is late by the time from due to done;
* the **batcher** sleeps 20-40 ms, then makes ``--batch-calls`` native calls in a row (a
  batch) and records how long that took: alone, about 45 x 4 us.

Variants (``--variants``, comma separated):

* ``threads``: one thread per camera (vidpipe today);
* ``token:T``: one thread per camera, but at most T of them inside their decode step (the
  native calls after the demux) at once; the others wait on a semaphore, blocked in a lock
  and not in the GIL's queue;
* ``baton:G``: one thread per camera, but the G cameras of a group take turns for their
  whole frame (a plain lock per group);
* ``groups:G``: one thread serves G cameras in turn (every call of each camera: possible for
  file cameras, whose demux does not wait for a network);
* ``split:G``: each camera keeps its thread for the demux and hands the decode step to a
  thread shared by G cameras, then waits for its frame (demux on the camera thread, decode
  groups);
* ``pipe:G``: as ``split``, but the camera thread does not wait: it hands the packet on and
  demuxes the next, and the shared thread also emits the frame;
* ``worker:G``: not a model: vidpipe's real capture workers of realtime NVDEC file cameras
  over a fake PyNvVideoCodec made of the same native calls, read by a thread each
  (``worker:1``) or by groups of G (``capture.nvdec_group_size``); ``benchmarks/gil_worker.py``.

Each variant reports the batcher's batch times (p50/p95/max, ms), how late camera frames were
(p50/p95 ms, and the share more than one frame period late: a live camera's frame that the
next one replaced), frames done per second against those due, and the process's CPU in
cores, with ``os.cpu_count()`` in the first line. Keep runs short on a shared machine:
``--seconds`` per variant (default 2, about 15 s in all); ``--repeats`` alternates the variants
and adds their medians. The model's figures depend on the cores (the H200 host has 16): run
it there before reading much into a 2-core result.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.gil_model import Params, _batcher, native_call, python_work, quantile_ms


@dataclass
class Record:
    """What one run measured; lists are appended to by their own thread only."""

    batches_ms: list[float] = field(default_factory=list)
    late_ms: list[list[float]] = field(default_factory=list)


class Camera:
    """One camera's frame schedule and its per-frame work, split where the variants split it."""

    def __init__(self, index: int, p: Params, t0: float, late: list[float]) -> None:
        self.p = p
        # not in step: cameras start at spread-out phases of their frame period
        self.due = t0 + (index * 0.618 % 1.0) / p.fps
        self.late = late
        self.hasher = hashlib.sha256()
        self._segment_us = p.py_us / (p.calls + 1)

    def demux(self) -> None:
        """The demux's return: the first native call of a frame."""
        python_work(self._segment_us)
        native_call(self.hasher)

    def decode_step(self) -> None:
        """The rest of the frame's native calls; the GPU wait is the middle one."""
        rest = self.p.calls - 1
        for i in range(rest):
            python_work(self._segment_us)
            if i == rest // 2:
                time.sleep(self.p.gpu_wait_us / 1e6)
            else:
                native_call(self.hasher)

    def done(self, due: float | None = None) -> None:
        """The frame is in the mailbox; ``due``: when it arrived (default: the schedule's)."""
        python_work(self._segment_us)
        self.late.append((time.perf_counter() - (self.due if due is None else due)) * 1000.0)
        if due is None:
            self.due += 1.0 / self.p.fps


def _sleep_until(t: float, stop: threading.Event) -> bool:
    delay = t - time.perf_counter()
    return not (delay > 0 and stop.wait(delay))


def _run_threads(
    cams: list[Camera],
    stop: threading.Event,
    token: Callable[[], object] | None,
    batons: list[threading.Lock] | None = None,
) -> list[threading.Thread]:
    def loop(cam: Camera, baton: threading.Lock | None) -> None:
        while _sleep_until(cam.due, stop) and not stop.is_set():
            if baton is not None:
                with baton:  # the whole frame, one camera of the group at a time
                    cam.demux()
                    cam.decode_step()
                    cam.done()
                continue
            cam.demux()
            if token is None:
                cam.decode_step()
            else:
                with token():  # type: ignore[attr-defined]
                    cam.decode_step()
            cam.done()

    held: list[threading.Lock | None] = list(batons) if batons else [None] * len(cams)
    return [
        threading.Thread(target=loop, args=(c, b), daemon=True)
        for c, b in zip(cams, held, strict=True)
    ]


def _run_groups(cams: list[Camera], stop: threading.Event, size: int) -> list[threading.Thread]:
    def loop(group: list[Camera]) -> None:
        heap = [(c.due, i) for i, c in enumerate(group)]
        heapq.heapify(heap)
        while heap and _sleep_until(heap[0][0], stop) and not stop.is_set():
            _, i = heapq.heappop(heap)
            cam = group[i]
            cam.demux()
            cam.decode_step()
            cam.done()
            heapq.heappush(heap, (cam.due, i))

    groups = [cams[i : i + size] for i in range(0, len(cams), size)]
    return [threading.Thread(target=loop, args=(g,), daemon=True) for g in groups]


def _run_split(cams: list[Camera], stop: threading.Event, size: int) -> list[threading.Thread]:
    jobs: list[queue.SimpleQueue[tuple[Camera, threading.Lock] | None]] = [
        queue.SimpleQueue() for _ in range(0, len(cams), size)
    ]

    def decoder(q: queue.SimpleQueue[tuple[Camera, threading.Lock] | None]) -> None:
        while (job := q.get()) is not None:
            cam, done = job
            cam.decode_step()
            done.release()

    def camera(cam: Camera, q: queue.SimpleQueue[tuple[Camera, threading.Lock] | None]) -> None:
        done = threading.Lock()
        done.acquire()
        while _sleep_until(cam.due, stop) and not stop.is_set():
            cam.demux()
            q.put((cam, done))
            done.acquire()  # the frame's decode step ran on the shared thread
            cam.done()
        q.put(None)

    threads = [threading.Thread(target=decoder, args=(q,), daemon=True) for q in jobs]
    for i, cam in enumerate(cams):
        threads.append(threading.Thread(target=camera, args=(cam, jobs[i // size]), daemon=True))
    return threads


def _run_pipe(cams: list[Camera], stop: threading.Event, size: int) -> list[threading.Thread]:
    jobs: list[queue.SimpleQueue[tuple[Camera, float] | None]] = [
        queue.SimpleQueue() for _ in range(0, len(cams), size)
    ]

    def decoder(q: queue.SimpleQueue[tuple[Camera, float] | None]) -> None:
        while (job := q.get()) is not None:
            cam, due = job
            cam.decode_step()
            cam.done(due)  # the shared thread emits the frame too

    def camera(cam: Camera, q: queue.SimpleQueue[tuple[Camera, float] | None]) -> None:
        while _sleep_until(cam.due, stop) and not stop.is_set():
            cam.demux()
            q.put((cam, cam.due))  # the packet; the camera thread demuxes on at once
            cam.due += 1.0 / cam.p.fps
        q.put(None)

    threads = [threading.Thread(target=decoder, args=(q,), daemon=True) for q in jobs]
    for i, cam in enumerate(cams):
        threads.append(threading.Thread(target=camera, args=(cam, jobs[i // size]), daemon=True))
    return threads


def run_variant(variant: str, p: Params) -> dict[str, object]:
    """One variant for ``p.seconds``; the first 0.5 s are warm-up and not recorded."""
    kind, _, arg = variant.partition(":")
    if kind == "worker":  # vidpipe's own capture workers (benchmarks/gil_worker.py)
        from benchmarks.gil_worker import run_worker

        return run_worker(int(arg), p)
    stop, rec = threading.Event(), Record()
    t0 = time.perf_counter() + 0.05
    rec.late_ms = [[] for _ in range(p.cameras)]
    cams = [Camera(i, p, t0, rec.late_ms[i]) for i in range(p.cameras)]
    if kind == "threads":
        threads = _run_threads(cams, stop, None)
    elif kind == "token":
        sem = threading.BoundedSemaphore(int(arg))
        threads = _run_threads(cams, stop, lambda: sem)
    elif kind == "baton":
        batons = [threading.Lock() for _ in range(0, p.cameras, int(arg))]
        threads = _run_threads(cams, stop, None, [batons[i // int(arg)] for i in range(p.cameras)])
    elif kind == "groups":
        threads = _run_groups(cams, stop, int(arg))
    elif kind == "pipe":
        threads = _run_pipe(cams, stop, int(arg))
    elif kind == "split":
        threads = _run_split(cams, stop, int(arg))
    else:
        raise SystemExit(
            f"unknown variant {variant!r} (threads, token:T, baton:G, groups:G, split:G, pipe:G)"
        )
    batcher = threading.Thread(target=_batcher, args=(stop, p, rec.batches_ms), daemon=True)
    for t in [*threads, batcher]:
        t.start()
    time.sleep(0.5)
    for late in rec.late_ms:
        late.clear()
    rec.batches_ms.clear()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(p.seconds - 0.5)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    late = [x for cam in rec.late_ms for x in list(cam)]
    batches = list(rec.batches_ms)
    stop.set()
    for t in [*threads, batcher]:
        t.join(5.0)
    period_ms = 1000.0 / p.fps
    return {
        "variant": variant,
        "threads": len(threads) + 1,
        "batch_ms_p50": quantile_ms(batches, 0.5),
        "batch_ms_p95": quantile_ms(batches, 0.95),
        "batch_ms_max": round(max(batches, default=float("nan")), 2),
        "batches": len(batches),
        "late_ms_p50": quantile_ms(late, 0.5),
        "late_ms_p95": quantile_ms(late, 0.95),
        "late_over_period": round(sum(x > period_ms for x in late) / max(1, len(late)), 4),
        "frames_per_s": round(len(late) / wall, 1),
        "due_per_s": p.cameras * p.fps,
        "cpu_cores": round(cpu / wall, 2),
        "batch_ms_mean": round(statistics.fmean(batches), 2) if batches else None,
    }


def call_us() -> float:
    """What one native call costs alone, in microseconds."""
    hasher, n = hashlib.sha256(), 20000
    t0 = time.perf_counter()
    for _ in range(n):
        native_call(hasher)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gil_handover", description=__doc__)
    d = Params()
    parser.add_argument("--cameras", type=int, default=d.cameras)
    parser.add_argument("--fps", type=float, default=d.fps)
    parser.add_argument("--calls", type=int, default=d.calls, help="native calls per frame (>= 3)")
    parser.add_argument("--py-us", type=float, default=d.py_us, help="Python us per frame")
    parser.add_argument("--gpu-wait-us", type=float, default=d.gpu_wait_us)
    parser.add_argument("--batch-calls", type=int, default=d.batch_calls)
    parser.add_argument(
        "--worker-py-us", type=float, default=d.worker_py_us, help="worker:G, extra Python/frame"
    )
    parser.add_argument("--seconds", type=float, default=d.seconds, help="per variant")
    parser.add_argument("--variants", default="threads,token:16,groups:8,split:8,worker:1,worker:8")
    parser.add_argument("--switch-ms", type=float, default=None, help="sys.setswitchinterval")
    parser.add_argument("--repeats", type=int, default=1, help="variants alternate; medians")
    args = parser.parse_args(argv)
    if args.calls < 3 or args.seconds <= 0.5:
        parser.error("--calls must be >= 3 and --seconds > 0.5")
    p = Params(
        args.cameras,
        args.fps,
        args.calls,
        args.py_us,
        args.gpu_wait_us,
        args.batch_calls,
        args.seconds,
        args.worker_py_us,
    )
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000.0)
    head = {
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "switch_interval_ms": sys.getswitchinterval() * 1000.0,
        "native_call_us": round(call_us(), 2),
        "params": vars(p),
    }
    print(json.dumps(head), flush=True)
    variants = [v.strip() for v in args.variants.split(",")]
    rows: dict[str, list[dict[str, object]]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for variant in variants:  # alternated: the shared machine's load hits all alike
            rows[variant].append(run_variant(variant, p))
            print(json.dumps(rows[variant][-1]), flush=True)
    if args.repeats > 1:
        for runs in rows.values():
            print(json.dumps({"median_of": len(runs), **_medians(runs)}), flush=True)
    return 0


def _medians(runs: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {"variant": runs[0]["variant"]}
    for key, value in runs[0].items():
        if isinstance(value, float | int) and key != "threads":
            out[key] = statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
