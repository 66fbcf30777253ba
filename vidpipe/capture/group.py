"""Read groups: one thread reads the frames of several paced NVDEC file cameras in turn.

Why: with one reader thread per NVDEC camera, the batcher and completion threads wait behind
dozens of camera threads for every GIL hand-over (benchmarks/README.md, "GPU: cameras per
H200"). In the CPU model of that contention (``python -m benchmarks.gil_handover``, 120
cameras on 2 cores) one thread per 8 cameras kept cameras on time and cut the batcher's p95
batch time about 3-6 times, with vidpipe's own workers (``worker:8`` against ``worker:1``)
too; a limit on how many camera threads may decode at once (a token) made cameras late
without a steady gain. On the H200's 16 cores groups and a thread each were alike, so it is
off by default (``nvdec_group_size: 1``).

Which cameras: ``capture.nvdec_group_size`` > 1, decoder ``nvdec``, ``realtime`` file cameras
(``group_size_of``). Their reads wait neither for a network nor for a consumer (a ``newest``
mailbox), so one thread can read each when its next frame is due. Live streams keep a thread
each: their demux waits for the network, and one frozen stream would hold up its whole group.

Each session keeps its own reader thread (``CaptureWorker``): it opens the source, hands its
frame loop (one frame per ``step``) to a group, and blocks on a plain lock, outside the GIL's
queue, until the group hands the session back: it ended, failed or was cancelled. The reader
then closes the source on its own thread as before, so a source is never closed while the
group reads it. The supervisor, watchdog, backoff, mailbox, drop reasons and metrics are the
worker's, unchanged. A read that hangs holds up the group's other cameras (their watchdogs
then fire): file reads on a local disk, the only ones grouped, do not hang in practice.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from vidpipe.config import CameraConfig, CaptureConfig

#: One frame of a session: None when the session ends, else seconds until its next frame.
Step = Callable[[], "float | None"]

_POLL_S = 0.05  # the longest a cancelled member waits to be noticed (stop, watchdog)


def group_size_of(camera: CameraConfig, defaults: CaptureConfig, policy: str) -> int:
    """How many cameras share this camera's read thread: ``capture.nvdec_group_size`` for a
    ``realtime`` nvdec file camera with a ``newest`` mailbox, else 1 (a thread of its own)."""
    if (camera.decoder or defaults.decoder) != "nvdec" or camera.is_stream:
        return 1
    if not camera.realtime or policy == "block":  # a block mailbox waits for its consumer
        return 1
    return defaults.nvdec_group_size


class _Member:
    """One session served by a group; its reader blocks on ``done`` until it is handed back."""

    __slots__ = ("cancel", "done", "error", "name", "step")

    def __init__(self, name: str, step: Step, cancel: threading.Event) -> None:
        self.name = name
        self.step = step
        self.cancel = cancel
        self.error: BaseException | None = None
        self.done = threading.Lock()
        self.done.acquire()  # released once, by the group thread


class ReadGroup:
    """One thread that runs its members' steps, each when it is due (earliest first, FIFO
    among equals). The thread starts with the first member and ends with the last."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._due: list[tuple[float, int, _Member]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self.members = 0  # sessions assigned (ReadGroups keeps it)
        self.threads_started = 0

    def serve(self, name: str, step: Step, cancel: threading.Event) -> None:
        """Run ``step`` on the group's thread until it returns None or ``cancel`` is set.

        Blocks the caller until then, on a plain lock. Re-raises what ``step`` raised.
        """
        member = _Member(name, step, cancel)
        with self._lock:
            heapq.heappush(self._due, (self._clock(), next(self._order), member))
            if self._thread is None:
                self.threads_started += 1
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self._wake.set()
        member.done.acquire()
        if member.error is not None:
            raise member.error

    def _run(self) -> None:
        while (member := self._next()) is not None:
            delay_s = self._step(member)
            if delay_s is None:
                member.done.release()
                continue
            with self._lock:
                entry = (self._clock() + delay_s, next(self._order), member)
                heapq.heappush(self._due, entry)

    def _next(self) -> _Member | None:
        """The next member due, waiting for it; None when none is left (the thread ends)."""
        while True:
            with self._lock:
                if self._due and self._due[0][0] <= self._clock():
                    return heapq.heappop(self._due)[2]
                # Only before a wait: a due member's cancel is seen by _step, for less work
                # per frame on this thread (it holds the GIL for the group).
                self._hand_back_cancelled()
                if not self._due:
                    self._thread = None  # the next serve starts a new thread
                    return None
                wait_s = self._due[0][0] - self._clock()
            self._wake.wait(min(wait_s, _POLL_S))
            self._wake.clear()  # the heap is checked again after this: no wake-up is lost

    @staticmethod
    def _step(member: _Member) -> float | None:
        if member.cancel.is_set():
            return None
        try:
            return member.step()
        except Exception as exc:  # the reader re-raises it on its own thread
            member.error = exc
            return None

    def _hand_back_cancelled(self) -> None:
        cancelled = [entry for entry in self._due if entry[2].cancel.is_set()]
        if not cancelled:
            return
        self._due = [entry for entry in self._due if not entry[2].cancel.is_set()]
        heapq.heapify(self._due)
        for _, _, member in cancelled:
            member.done.release()


class ReadGroups:
    """A pipeline's read groups (``CaptureContext.groups``): a session joins the group with
    the fewest members below ``size`` (a new one if all are full) and leaves it when its
    frame loop ends."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.groups: list[ReadGroup] = []

    def serve(self, size: int, name: str, step: Step, cancel: threading.Event) -> None:
        """``ReadGroup.serve`` on a group with room for one more of at most ``size``."""
        with self._lock:
            open_groups = [g for g in self.groups if g.members < size]
            if open_groups:
                group = min(open_groups, key=lambda g: g.members)
            else:
                group = ReadGroup(f"capture-group-{len(self.groups)}", self._clock)
                self.groups.append(group)
            group.members += 1
        try:
            group.serve(name, step, cancel)
        finally:
            with self._lock:
                group.members -= 1

    def members(self) -> list[int]:
        """Sessions per group now (for tests and status)."""
        with self._lock:
            return [g.members for g in self.groups]
