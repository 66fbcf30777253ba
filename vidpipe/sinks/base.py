"""The sink interface and the pool that runs every sink on its own thread.

``SinkPool.submit`` is called on the pipeline's hot path and never blocks: each sink has its
own bounded queue whose drop policy is *drop oldest* (the newest result is the most useful one
to an operator), and every drop is counted. A slow, stalled or failing sink therefore costs the
pipeline nothing but the items that sink drops.

Two ways to cost fewer thread wake-ups, each a context switch and a trip through the GIL that
also preempts an inference thread on a busy box (at 4 cameras of 768x432 on 2 cores the
daemon's threads slept and woke about 26 times per frame, the naive loop's once;
``python -m benchmarks.thread_split`` counts them per thread):

* an ``inline`` sink (the live view: ``handle`` only swaps a reference) runs on the submitting
  thread and has no thread or queue of its own;
* a sink with a ``batch_window_s`` (JSON lines) is woken by its first waiting item, lets the
  window pass (or less, once its queue is half full), then handles everything that gathered
  before it sleeps again: one wake-up per window, not per frame. The items wait in the queue,
  not in the worker's hands, so drops and shutdown leftovers are counted as without it.
  A frame's own timestamps and ``latency_ms`` are taken before it is queued, so the window
  delays the write, not what it says.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from vidpipe.metrics import Metrics
from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

#: How long an idle worker waits on its queue before re-checking the stop Event.
_POLL_S = 0.5
#: Extra time close() gives stopped workers to end after the flush used up its timeout.
_JOIN_GRACE_S = 0.2
#: At most one error line per sink per this many seconds.
ERROR_LOG_INTERVAL_S = 10.0


class Sink(Protocol):
    """Something that consumes frame results, one at a time, on its own thread.

    Attributes:
        name: unique among the daemon's sinks, e.g. ``"jsonl"`` or ``"jsonl:2"``; the value of
            the ``sink`` metric label.
        wants_images: whether ``handle`` needs ``FrameResult.image`` (the daemon attaches the
            frame only when some sink wants it).
        queue_size: capacity of the sink's queue in the pool.

    Optional attributes (read with ``getattr``):
        inline: ``handle`` takes microseconds and never blocks: run it on the submitting
            thread, without a queue (default False).
        batch_window_s: after the first item arrives, wait this long and then handle every item
            that gathered (default 0: each item as soon as it arrives).
    """

    name: str
    wants_images: bool
    queue_size: int

    def handle(self, result: FrameResult) -> None:
        """Consume one result. Runs on the sink's worker thread; may raise (counted, logged)."""
        ...

    def close(self) -> None:
        """Flush and release resources. Idempotent."""
        ...


class _ErrorLog:
    """Rate-limited error logging of one sink: one line per interval, then a suppressed count."""

    def __init__(self, sink_name: str, interval_s: float) -> None:
        self._sink_name = sink_name
        self._interval_s = interval_s
        self._last_logged = -float("inf")
        self._suppressed = 0
        self._failing = 0  # consecutive failures, to report recovery

    def failed(self) -> str | None:
        """Record a failure; return the line to log, or None while the interval lasts."""
        self._failing += 1
        now = time.monotonic()
        if now - self._last_logged < self._interval_s:
            self._suppressed += 1
            return None
        suffix = f" ({self._suppressed} similar error(s) suppressed)" if self._suppressed else ""
        self._last_logged = now
        self._suppressed = 0
        return f"sink {self._sink_name}: handle() failed{suffix}"

    def succeeded(self) -> None:
        if self._failing:
            logger.info("sink %s: recovered after %d failure(s)", self._sink_name, self._failing)
            self._failing = 0


class _SinkWorker:
    """One sink, its drop-oldest queue and its thread."""

    def __init__(self, sink: Sink, metrics: Metrics, error_log_interval_s: float) -> None:
        if sink.queue_size < 1:
            raise ValueError(f"sink {sink.name}: queue_size must be >= 1, got {sink.queue_size}")
        self.sink = sink
        self._items: deque[FrameResult] = deque()
        lock = threading.Lock()
        self._not_empty = threading.Condition(lock)  # the worker waits here for items
        self._idle = threading.Condition(lock)  # flush() waits here for an idle worker
        self._busy = False  # handle() is running
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        name = sink.name
        self._depth = metrics.sink_queue_depth.labels(sink=name)
        self._dropped_full = metrics.sink_dropped.labels(sink=name, reason="queue_full")
        self._dropped_shutdown = metrics.sink_dropped.labels(sink=name, reason="shutdown")
        self._errors = metrics.sink_errors.labels(sink=name)
        self._written = metrics.sink_written.labels(sink=name)
        self._delay = metrics.sink_delay.labels(sink=name)
        self.counts = {"written": 0, "errors": 0, "dropped": 0}  # for the shutdown summary
        self._error_log = _ErrorLog(name, error_log_interval_s)
        self.inline = bool(getattr(sink, "inline", False))
        self._window_s = float(getattr(sink, "batch_window_s", 0.0))
        # a window ends early once the queue is half full: a small queue must not overflow
        # while it waits
        self._flush_at = max(1, sink.queue_size // 2)

    def start(self) -> None:
        if self.inline:
            return  # handled on the submitting thread
        self._thread = threading.Thread(
            target=self._run, name=f"sink-{self.sink.name}", daemon=True
        )
        self._thread.start()

    def put(self, item: FrameResult) -> None:
        """Enqueue without blocking; drop the oldest item when the queue is full. An inline
        sink handles the item here instead."""
        if self.inline and not self._stop.is_set():
            self._handle(item)
            return
        with self._not_empty:
            stopped = self._stop.is_set()
            full = not stopped and len(self._items) >= self.sink.queue_size
            if full:
                self._items.popleft()
            if not stopped:
                self._items.append(item)
                self._depth.set(len(self._items))
                if len(self._items) in (1, self._flush_at):  # see ``_next``
                    self._not_empty.notify()
        if stopped:
            self._dropped_shutdown.inc()
        elif full:
            self._dropped_full.inc()
        if stopped or full:
            self.counts["dropped"] += 1

    def _next(self) -> FrameResult | None:
        """The next item, or None once stopping (queued items are then left for ``close``).

        With a batch window, a worker that found its queue empty lets the window pass after
        the first item arrives; the items that gathered are then handled one after another
        without waiting. They stay in the queue until their turn, so a stalled sink still
        holds one item in hand, drops its oldest when full, and counts what is left at
        shutdown.
        """
        with self._not_empty:
            if not self._items:
                while not self._items and not self._stop.is_set():
                    self._not_empty.wait(timeout=_POLL_S)
                self._gather_locked()
            if self._stop.is_set():
                return None
            self._busy = True
            item = self._items.popleft()
            self._depth.set(len(self._items))
            return item

    def _gather_locked(self) -> None:
        """Wait out the batch window; a stop or a half-full queue ends it early."""
        deadline = time.monotonic() + self._window_s
        while len(self._items) < self._flush_at and not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._not_empty.wait(left)

    def _run(self) -> None:
        while (item := self._next()) is not None:
            self._handle(item)
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    def _handle(self, item: FrameResult) -> None:
        """``sink.handle(item)``, counted; an exception is counted and logged, never raised."""
        try:
            self.sink.handle(item)
        except Exception as exc:  # one bad item must not end the worker
            self._errors.inc()
            self.counts["errors"] += 1
            message = self._error_log.failed()
            if message is not None:
                logger.error("%s: %s: %s", message, type(exc).__name__, exc, exc_info=True)
        else:
            self._written.inc()
            self.counts["written"] += 1
            self._delay.observe(time.monotonic() - item.t_done)
            self._error_log.succeeded()

    def wait_idle(self, deadline: float) -> bool:
        """Wait until the queue is empty and no handle() runs; False at ``deadline``."""
        with self._idle:
            while self._items or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(timeout=min(remaining, _POLL_S))
        return True

    def stop(self) -> None:
        with self._not_empty:
            self._stop.set()
            self._not_empty.notify_all()
            self._idle.notify_all()

    def join(self, deadline: float) -> bool:
        """Join the thread until ``deadline``; True when it has ended (or never started)."""
        if self._thread is None:
            return True
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def take_leftovers(self) -> int:
        """Discard what is still queued, count it as dropped for shutdown, return the count."""
        with self._idle:
            n = len(self._items)
            self._items.clear()
            self._depth.set(0)
        if n:
            self._dropped_shutdown.inc(n)
            self.counts["dropped"] += n
        return n


class SinkPool:
    """Runs each sink on its own worker thread behind its own bounded queue.

    Args:
        sinks: the sinks; names must be unique.
        metrics: where queue depth, drops, errors and writes are counted.
        error_log_interval_s: at most one error line per sink per this many seconds.

    Raises:
        ValueError: two sinks share a name, or a sink's ``queue_size`` is below 1.
    """

    def __init__(
        self,
        sinks: Sequence[Sink],
        metrics: Metrics,
        *,
        error_log_interval_s: float = ERROR_LOG_INTERVAL_S,
    ) -> None:
        names = [s.name for s in sinks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"sink names must be unique, duplicated: {duplicates}")
        self._workers = [_SinkWorker(s, metrics, error_log_interval_s) for s in sinks]
        self._started = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def wants_images(self) -> bool:
        """True if any sink needs ``FrameResult.image``."""
        return any(w.sink.wants_images for w in self._workers)

    def start(self) -> None:
        """Start one worker thread per sink. Raises RuntimeError if started or closed before."""
        with self._lock:
            if self._started or self._closed:
                raise RuntimeError("SinkPool.start() called twice or after close()")
            self._started = True
        for w in self._workers:
            w.start()

    def submit(self, result: FrameResult) -> None:
        """Hand ``result`` to every sink. Never blocks; a full queue drops its oldest item.

        Sinks that do not want images get the result without its frame, so that a long queue
        of such a sink (JSON lines: 1024 items) never holds frames alive.
        """
        bare: FrameResult | None = None
        for w in self._workers:
            if w.sink.wants_images or result.image is None:
                w.put(result)
            else:
                if bare is None:
                    bare = dataclasses.replace(result, image=None)
                w.put(bare)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per sink: items written, failed (errors) and dropped since start."""
        return {w.sink.name: dict(w.counts) for w in self._workers}

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queue is empty and no ``handle()`` call is running.

        Returns:
            True when all sinks are idle, False if ``timeout_s`` ran out first.
        """
        deadline = time.monotonic() + timeout_s
        return all(w.wait_idle(deadline) for w in self._workers)

    def close(self, timeout_s: float) -> dict[str, int]:
        """Flush, stop the threads and close the sinks, all within ``timeout_s``.

        Items still queued when the time runs out are discarded and counted as
        ``sink_dropped{reason="shutdown"}``. Stopped threads get up to 0.2 s beyond
        ``timeout_s`` to end. A sink whose ``handle()`` is still running at the
        deadline is not closed (closing it under a running call could corrupt its output); its
        thread is a daemon thread and is logged. Idempotent: later calls return zeros.

        Returns:
            Per sink name, the number of items left unwritten.
        """
        with self._lock:
            if self._closed:
                return {w.sink.name: 0 for w in self._workers}
            self._closed = True
        deadline = time.monotonic() + timeout_s
        if self._started and not self.flush(timeout_s):
            logger.warning("sinks not flushed within %.1f s; stopping anyway", timeout_s)
        for w in self._workers:
            w.stop()
        # Idle workers end within microseconds of stop(); give them that even when the flush
        # used up the whole timeout, so that one stuck sink does not leave the others unclosed.
        join_deadline = max(deadline, time.monotonic() + _JOIN_GRACE_S)
        leftovers: dict[str, int] = {}
        for w in self._workers:
            ended = w.join(join_deadline)
            leftovers[w.sink.name] = n = w.take_leftovers()
            if n:
                logger.warning("sink %s: %d item(s) left unwritten at shutdown", w.sink.name, n)
            if ended:
                self._close_sink(w.sink)
            else:
                logger.error(
                    "sink %s: thread %s still alive after shutdown timeout (handle() is stuck); "
                    "sink not closed",
                    w.sink.name,
                    f"sink-{w.sink.name}",
                )
        return leftovers

    @staticmethod
    def _close_sink(sink: Sink) -> None:
        try:
            sink.close()
        except Exception:
            logger.exception("sink %s: close() failed", sink.name)
