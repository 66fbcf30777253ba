"""A capture worker's state machine and its sessions (one connection attempt each).

``ALLOWED_TRANSITIONS`` lists every state change a worker may make; ``Session`` is what a
reader thread reports and the supervisor watches (``vidpipe.capture.worker``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from vidpipe.capture.group_budget import GroupBudget
from vidpipe.capture.source import Source, SourceInfo
from vidpipe.types import CameraState

log = logging.getLogger(__name__)
_S = CameraState
ALLOWED_TRANSITIONS: Mapping[CameraState, frozenset[CameraState]] = MappingProxyType(
    {
        _S.CONNECTING: frozenset({_S.STREAMING, _S.BACKOFF, _S.STOPPED}),
        _S.STREAMING: frozenset({_S.BACKOFF, _S.STOPPED, _S.CONNECTING}),
        _S.BACKOFF: frozenset({_S.CONNECTING, _S.STOPPED}),
        _S.STOPPED: frozenset(),
    }
)
"""Every state change a worker may make; anything else is a bug."""


class IllegalTransitionError(RuntimeError):
    """A worker tried a state change that ``ALLOWED_TRANSITIONS`` does not list."""


def check_transition(old: CameraState, new: CameraState) -> None:
    """Raise ``IllegalTransitionError`` unless ``old -> new`` is allowed."""
    if new not in ALLOWED_TRANSITIONS[old]:
        allowed = ", ".join(sorted(s.name for s in ALLOWED_TRANSITIONS[old])) or "nothing"
        raise IllegalTransitionError(
            f"illegal capture state change {old.name} -> {new.name} (allowed: {allowed})"
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """Why a session ended: ``reason`` is the ``camera_errors`` label (or ``eof``)."""

    reason: str
    detail: str


class Session:
    """One connection attempt: what its reader thread reports and the supervisor watches."""

    def __init__(self, number: int, now_s: float, wake: threading.Event) -> None:
        self.number = number
        self.wake = wake  # the supervisor's: set when the session opens or ends
        self.cancel = threading.Event()  # abandoned (stall) or the worker stops
        self.done = threading.Event()
        self.outcome: Outcome | None = None
        self.source: Source | None = None
        self.info: SourceInfo | None = None
        self.opened = False
        self.frames = 0
        self.seq0: int | None = None
        self.epoch = 0  # Frame.epoch of this session's current pass
        self.waiting = False  # for the consumer or a turn to open: not a stall (not_idle)
        self.pass_frames = 0  # frames of the current file pass
        self._undecoded = Undecoded(0, 0, 0)  # what the source left undecoded, accounted so far
        self.budget: GroupBudget | None = None  # the shedding of groups, if on
        self._skipping_source: Source | None = None  # the source ``_undecoded`` counts for
        self._lag_base: float | None = None  # least wall minus stream time (``lag_s``)
        self.last_progress_s = now_s

    def finish(self, reason: str, detail: str) -> None:
        if not self.done.is_set():
            self.outcome = Outcome(reason, detail)
            self.done.set()
            self.wake.set()

    def idle_s(self, now_s: float) -> float:
        return 0.0 if self.waiting else now_s - self.last_progress_s

    @contextlib.contextmanager
    def not_idle(self, clock: Callable[[], float]) -> Iterator[None]:
        """Time spent in the block counts neither towards a stall nor towards the open
        timeout: the reader waits for the consumer, or for its source's turn to open."""
        t0 = clock()
        self.waiting = True
        try:
            yield
        finally:
            self.last_progress_s += clock() - t0
            self.waiting = False

    def lag_s(self, now_s: float, media_s: float) -> float:
        """How much later than the stream's own clock this frame was read, above the least
        seen this session (that least is the network's and the camera's fixed delay; what
        is left is how far the reader is behind)."""
        offset = now_s - media_s
        if self._lag_base is None or offset < self._lag_base:
            self._lag_base = offset
        return offset - self._lag_base

    def take_skipped(self) -> Undecoded:
        """Frames the source left undecoded since the last call: skipped as unused or as
        they would replace an untaken frame (``capture/skipping.py``), and shed with their
        group of pictures (``capture/group_budget.py``). A looping file may open a new
        source within the session: its counts start at 0."""
        source = self.source
        if source is not self._skipping_source:
            self._skipping_source, self._undecoded = source, Undecoded(0, 0, 0)
        now = Undecoded(
            getattr(source, "skipped", 0),
            getattr(source, "skipped_unread", 0),
            getattr(source, "shed", 0),
        )
        before, self._undecoded = self._undecoded, now
        return Undecoded(*(n - b for n, b in zip(now, before, strict=True)))


class Undecoded(NamedTuple):
    """Frames a source left undecoded, by reason (``Session.take_skipped``)."""

    unused: int  # counted ``decimated``
    unread: int  # counted ``mailbox_full``
    shed: int  # counted ``gop_shed``


def join_threads(
    supervisor: threading.Thread | None,
    threads: list[threading.Thread],
    timeout_s: float,
    camera: str,
) -> bool:
    """Wait up to ``timeout_s`` for a worker's supervisor, then its readers; True if all ended
    (a warning names those still running)."""
    deadline = time.monotonic() + timeout_s
    if supervisor is not None:
        supervisor.join(timeout_s)  # once it has ended, no reader starts any more
    for thread in list(threads):
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        log.warning(
            "camera %s: threads still running after %.1f s: %s", camera, timeout_s, ", ".join(alive)
        )
    return not alive


def watch(
    session: Session,
    stop: threading.Event,
    clock: Callable[[], float],
    stall_s: float,
    open_s: float,
    poll_s: float,
) -> Outcome | None:
    """Supervise one session until it ends, stalls, or ``stop`` is set (None).

    It sleeps until a stall could first be due, not on a fixed tick: a streaming camera
    wakes it about once per ``stall_s``, not 20 times a second (50 cameras' 50 ms ticks cost
    about 17 ms of CPU a second: ``python -m benchmarks.supervisor_ticks``), and the reader
    wakes it (``session.wake``) when the session opens or ends.
    """
    while not stop.is_set():
        if session.done.is_set():
            return session.outcome
        idle_s = session.idle_s(clock())
        if session.opened and idle_s > stall_s:
            session.cancel.set()  # abandon; the reader exits when its read returns
            if not session.frames:
                return Outcome("no_frames", f"opened, but no frame within {idle_s:.1f} s")
            return Outcome("stalled", f"no new frame for {idle_s:.1f} s")
        if not session.opened and idle_s > open_s + stall_s:
            session.cancel.set()
            return Outcome("open_failed", f"open did not return within {idle_s:.1f} s")
        limit_s = stall_s if session.opened else open_s + stall_s
        session.wake.wait(max(poll_s, limit_s - idle_s))
        session.wake.clear()  # what woke it is in the session's state, read next round
    session.cancel.set()
    return None
