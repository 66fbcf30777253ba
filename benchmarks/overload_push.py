"""The ``push`` modifier of ``benchmarks.overload_model``: decode processes that pace their
cameras and send only the frames inference will take, to one receiving thread each.

A prototype of a capture design the daemon does not have yet, to rank it against the
capture workers (``worker+skip-unread+procN``) before building it:

* a **decode process** (``procN``: N of them, cameras dealt in turn) runs one loop over its
  cameras. Each camera's frames come due at ``fps`` (staggered phases). A due frame is
  decoded (the decoders' bound, ``--decoder-fps`` split between the processes, as
  ``benchmarks.overload_worker``'s ``_Engine``); it is sent only if the camera's last frame
  sent has been taken, which the process reads from shared memory, else it is let go
  (counted, decoded all the same: NVDEC decodes every reference picture). While the decoders
  are behind (more than a frame period of pictures asked of them and not yet made), a camera
  at a keyframe (every ``--gop`` frames, each camera's at its own phase, as cameras' are)
  sheds its group undecoded, as the daemon's cameras shed groups; one more than two groups
  behind skips to its due frame;
* one **receiving thread** a decode process, in the daemon's process, takes each batch of
  frames off the pipe and, per frame, counts it as the worker does (``captured``, the
  ``--push-py-us`` of Python for what the worker's numbering, decimator and counters do),
  makes its ``Frame`` and puts it in the camera's real ``newest`` mailbox;
* the **take** (the scheduler, in ``Mailbox.take_locked``) marks the camera's frame taken in
  that shared memory: one byte written.

What the daemon's process is spared against ``procN``: a thread per camera, its pacing
sleep, a round trip on the pipe per frame and the GIL hand-overs of all of them. What it
keeps: a frame's count, ``Frame`` and put.
"""

from __future__ import annotations

import heapq
import multiprocessing
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from tests.fake_gpu import device_frame

from benchmarks.gil_model import python_work
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.types import Frame

_BATCH_S = 0.002  # a decode process sends what it made at most this long ago


def _serve(
    conn: Connection,
    cameras: list[int],
    fps: float,
    period_s: float,
    gop: int,
    taken: Any,
    let_go: Any,
    slot: int,
) -> None:
    """A decode process's loop (module docstring) until the daemon closes ``conn``."""
    start = time.monotonic() + 0.5

    def due_at(cam: int, k: int) -> float:  # staggered phases, as the worker rig's
        return start + (cam % 25) / fps / 25 + k / fps

    due = [(due_at(i, 0), i, 0) for i in cameras]  # (time, camera, frame)
    heapq.heapify(due)
    engine_free, sent_at = 0.0, time.monotonic()
    batch: list[tuple[int, int]] = []
    while True:
        t, cam, k = due[0]
        now = time.monotonic()
        if t > now:
            if batch and now - sent_at >= _BATCH_S:
                if not _send(conn, batch):
                    return
                batch, sent_at = [], now
            time.sleep(min(t - now, _BATCH_S))
            continue
        behind = int((now - t) * fps)
        if behind > 2 * gop:  # skip to the due frame, undecoded
            k += behind
            let_go[slot] += behind
        elif (k + 7 * cam) % gop == 0 and engine_free - now > 1.0 / fps:  # shed the group
            k += gop - 1
            let_go[slot] += gop
        else:
            engine_free = max(now, engine_free) + period_s
            if taken[cam]:
                taken[cam] = 0
                batch.append((cam, k))
            else:
                let_go[slot] += 1
        heapq.heapreplace(due, (due_at(cam, k + 1), cam, k + 1))
        if engine_free > now:  # the decoder's bound: nothing more before it is free
            time.sleep(engine_free - now)
        if batch and time.monotonic() - sent_at >= _BATCH_S:
            if not _send(conn, batch):
                return
            batch, sent_at = [], time.monotonic()


def _send(conn: Connection, batch: list[tuple[int, int]]) -> bool:
    try:
        conn.send(batch)
    except (BrokenPipeError, EOFError, OSError):
        return False
    return True


class PushCameras:
    """The cameras of the model's point ``p`` (``overload_model.Point``: ``cameras``, ``fps``,
    ``decoder_fps``, ``gop``, ``push_py_us``) decoded in ``processes`` decode processes that
    push their frames (module docstring); the interface of ``overload_worker.WorkerCameras``.
    ``on_drop`` is each mailbox's (the model counts overwritten frames).
    """

    def __init__(self, hub: FrameHub, p: Any, processes: int, on_drop: Any) -> None:
        cameras, fps, gop = p.cameras, p.fps, p.gop
        context = multiprocessing.get_context("spawn")
        self._taken = context.Array("b", [1] * cameras, lock=False)
        self._let_go = context.Array("q", processes, lock=False)
        self._push_py_us = p.push_py_us
        metrics = Metrics()
        self._boxes: list[Mailbox] = []
        self._counters: list[Any] = []
        for i in range(cameras):
            box = hub.add(f"cam{i}", "newest", on_drop)
            _mark_taken(box, self._taken, i)
            self._boxes.append(box)
            self._counters.append(metrics.camera(f"cam{i}").captured)
        period_s = processes / p.decoder_fps if p.decoder_fps else 0.0
        self._stop = threading.Event()
        self._children: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._ends: list[tuple[Connection, Connection]] = []  # (ours, the child's)
        for slot in range(processes):
            ours, theirs = context.Pipe()
            mine = list(range(slot, cameras, processes))
            args = (theirs, mine, fps, period_s, gop, self._taken, self._let_go, slot)
            self._children.append(context.Process(target=_serve, args=args, daemon=True))
            self._threads.append(threading.Thread(target=self._receive, args=(ours,), daemon=True))
            self._ends.append((ours, theirs))

    def _receive(self, conn: Connection) -> None:
        boxes, counters, stop = self._boxes, self._counters, self._stop
        while not stop.is_set():
            if not conn.poll(0.1):
                continue
            try:
                batch = conn.recv()
            except (EOFError, OSError):
                return
            for cam, k in batch:
                counters[cam].inc()
                python_work(self._push_py_us)
                frame = Frame(f"cam{cam}", k, time.monotonic(), device_frame(cam % 256, k % 256))
                boxes[cam].put(frame, stop)

    def start(self) -> None:
        for child in self._children:
            child.start()
        for _, theirs in self._ends:
            theirs.close()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5.0)
        for ours, _ in self._ends:
            ours.close()
        for child in self._children:
            child.join(5.0)
            if child.is_alive():
                child.kill()

    def left_unmade(self) -> int:
        """Frames let go in the decode processes so far (decoded or skipped, never sent)."""
        return sum(self._let_go)

    def lags(self) -> list[float]:
        return []


def _mark_taken(box: Mailbox, taken: Any, index: int) -> None:
    """The take writes the camera's byte in shared memory: its decode process may send the
    next frame."""
    take = box.take_locked

    def take_and_mark() -> Frame | None:
        frame = take()
        if frame is not None:
            taken[index] = 1
        return frame

    box.take_locked = take_and_mark  # type: ignore[method-assign]
