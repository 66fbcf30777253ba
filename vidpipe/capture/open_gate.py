"""A limit on how many cameras of a pipeline are opening at once: no start-up herd.

Why: 160 NVDEC cameras in 5 processes of 32 all opened their decoders at the same moment on
the H200, and on one host 26 of them got no first frame within the 10 s stall timeout, were
abandoned as stalled and reconnected. Each pipeline has one gate (``NvdecShared.opening``).

A camera takes a ``Permit`` and waits for its turn; turns are given in arrival order while
fewer than the permit's ``limit`` cameras hold one. The camera gives the permit back when its
start-up is over (``NvdecSource``: its first read), when its open fails, or when it is
closed; ``release`` is idempotent and may come from any thread. A permit made with the
session's cancel event stops waiting once the event is set (the worker stopped), and a
holder whose session was cancelled (abandoned by the watchdog, perhaps stuck in the driver)
no longer counts: a hung open can delay the others by one watchdog period, never for ever.

The capture worker does not count the wait as open time (``Source.wait_turn``), so a camera
waiting its turn is never taken for a stalled one.
"""

from __future__ import annotations

import threading
from collections import deque

_POLL_S = 0.1  # how soon a waiter sees a cancelled session (a set Event notifies no one here)


class Permit:
    """One camera's turn through an ``OpenGate`` (made by ``OpenGate.permit``)."""

    def __init__(self, gate: OpenGate, limit: int, cancel: threading.Event | None) -> None:
        self._gate = gate
        self.limit = limit
        self.cancel = cancel
        self.held = False
        self.released = False

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def wait(self) -> bool:
        """Block until this permit is held (True), or released or cancelled first (False)."""
        return self._gate._wait(self)

    def release(self) -> None:
        """Give the turn back, or stop waiting for it (any thread; idempotent)."""
        self._gate._release(self)


class OpenGate:
    """Admits permits in arrival order while fewer than their ``limit`` are held."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[Permit] = deque()  # waiting, oldest first
        self._held: list[Permit] = []

    def permit(self, limit: int, cancel: threading.Event | None = None) -> Permit:
        """A permit that waits while ``limit`` or more others are held.

        Args:
            limit: how many holders at once (``capture.nvdec_open_concurrency``).
            cancel: the camera's session cancel event: once set, the permit stops waiting
                and, if held, stops counting.
        """
        if limit < 1:
            raise ValueError(f"an open gate's limit must be at least 1, got {limit}")
        return Permit(self, limit, cancel)

    @property
    def waiting(self) -> int:
        """Permits waiting for their turn."""
        with self._cond:
            return sum(not p.cancelled for p in self._queue)

    @property
    def opening(self) -> int:
        """Permits held (their cameras between open and the end of start-up)."""
        with self._cond:
            return sum(not p.cancelled for p in self._held)

    def _wait(self, permit: Permit) -> bool:
        with self._cond:
            if not (permit.held or permit.released or permit in self._queue):
                self._queue.append(permit)
            self._advance()
            while not permit.held:
                if permit.released or permit.cancelled:
                    self._drop(permit)
                    return False
                self._cond.wait(_POLL_S)
                self._advance()
            return True

    def _release(self, permit: Permit) -> None:
        with self._cond:
            self._drop(permit)
            self._cond.notify_all()  # a waiter on this permit returns; the next may go

    def _drop(self, permit: Permit) -> None:
        """Mark ``permit`` released and forget it (lock held); admit who may go now."""
        permit.released, permit.held = True, False
        if permit in self._held:
            self._held.remove(permit)
        if permit in self._queue:
            self._queue.remove(permit)
        self._advance()

    def _advance(self) -> None:
        """Admit waiters in arrival order while there is room (lock held)."""
        admitted = False
        self._held = [p for p in self._held if not p.cancelled]
        while self._queue:
            head = self._queue[0]
            if not (head.released or head.cancelled) and len(self._held) >= head.limit:
                break
            self._queue.popleft()
            if not (head.released or head.cancelled):
                head.held = admitted = True
                self._held.append(head)
        if admitted:
            self._cond.notify_all()
