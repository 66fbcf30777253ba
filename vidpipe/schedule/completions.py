"""Where inference completions wait to be postprocessed, and which thread postprocesses them.

The backend's callback (``Scheduler._on_done``) only puts a completion here. One thread at a
time takes them out, in arrival order, and runs the handler (decode, NMS, hand-on to
tracking and the sinks):

* **the scheduler's own thread**, while it feeds the backend from a hub (``adopt``): it
  handles what arrived after each submission and whenever it would otherwise wait for a
  frame, and a completion that arrives while it waits wakes it (``wake``, the hub's
  ``nudge``). On OpenVINO the scheduler is mostly waiting for exactly that completion (a
  free request), so nobody else needs waking: at 4 cameras on 2 cores a thread of its own
  slept and woke 2.5 times per frame, each a context switch and a trip through the GIL that
  preempted an inference thread (``python -m benchmarks.thread_split``).
* **a thread of its own** (``vidpipe-postprocess``) otherwise: frames submitted directly
  (``vidpipe detect``), a batching GPU backend, whose many completions per batch would hold
  up the scheduler that fills the next batch, and the frames still in flight after the
  scheduler stopped.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from vidpipe.types import Completion

log = logging.getLogger(__name__)


class CompletionInbox:
    """Completions in arrival order, handled by the scheduler's thread or a thread of its own.

    Args:
        handle: postprocesses one completion and counts its own errors (an exception
            escaping it is logged, and the next completion handled).
    """

    def __init__(self, handle: Callable[[Completion], None]) -> None:
        self._handle = handle
        self._items: deque[Completion] = deque()
        self._cond = threading.Condition()
        # Held while completions are handled: results reach ``on_result`` one at a time and in
        # arrival order even while the handling passes between the two threads.
        self._handling = threading.Lock()
        self._wake: Callable[[], None] | None = None  # set while the scheduler handles them
        self._owner: int | None = None  # that thread's ident
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="vidpipe-postprocess", daemon=True)
        self._thread.start()

    def put(self, completion: Completion) -> None:
        """Any thread (the backend's callback): queue ``completion`` and wake its handler."""
        with self._cond:
            self._items.append(completion)
            wake = self._wake
            if wake is None:
                self._cond.notify()
        if wake is not None:
            wake()

    def adopt(self, wake: Callable[[], None]) -> None:
        """The calling thread handles completions from now on (``drain``); ``wake`` is
        called for every completion that arrives, to end the thread's wait for work."""
        with self._cond:
            self._wake = wake
            self._owner = threading.get_ident()

    def release(self) -> None:
        """Hand the completions back to the inbox's own thread (including those waiting)."""
        with self._cond:
            self._wake = None
            self._owner = None
            self._cond.notify()

    def drain_if_adopted(self) -> None:
        """``drain`` if the calling thread adopted the inbox; else nothing (its own thread
        handles them)."""
        if self._owner == threading.get_ident():
            self.drain()

    def drain(self) -> int:
        """Handle every completion waiting, in order, on the calling thread; how many."""
        handled = 0
        with self._handling:
            while True:
                try:
                    completion = self._items.popleft()
                except IndexError:
                    return handled
                try:
                    self._handle(completion)
                except Exception:  # the handler counts its own errors; the loop goes on
                    log.exception("postprocessing failed")
                handled += 1

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or (self._items and self._wake is None))
                closed = self._closed
            self.drain()
            if closed:
                return

    def close(self, timeout_s: float) -> bool:
        """Handle what is waiting on the inbox's own thread, then end it; False if it was
        still running after ``timeout_s``."""
        with self._cond:
            self._closed = True
            self._wake = None
            self._owner = None
            self._cond.notify()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()
