"""The event store's writer: a sink that queues events and one thread that commits them.

``handle`` runs on the thread that hands results to the sinks (the store is an ``inline``
sink): it only moves the result's events into a bounded queue, and a full queue drops the new
event and counts it (``vidpipe_events_dropped_total{reason="queue_full"}``), so no stage and
no other sink ever waits for the disk. Frames without events (nearly all of them) cost a
tuple check.

The writer thread takes what has gathered, up to ``BATCH_MAX`` events, inserts it in one
transaction and counts the events as stored only after the commit: the ``stored`` counter is
what a crash cannot take back. A failed transaction (disk full, I/O error) is counted, the
connection reopened and the same batch retried with a growing pause; meanwhile new events
wait in the queue, and drop counted when it is full. Between batches the thread also applies
the retention (``housekeeping_s``): rows older than ``max_age_days`` go, and rows whose clip
the clip retention deleted say so (``clip_deleted``).

A ``TrackSummary`` (a track's embedding) is a row of ``tracks`` (``vectors``), committed in the
same transaction as the events beside it in the queue, so it is acknowledged, retried and
retained exactly as they are. One whose embedding cannot be a vector (wrong shape, zero, not
finite) is refused in ``handle`` and counted (``reason="rejected"``), so that it never fails
the batch it would have joined.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from vidpipe.clips.store import stored_clips
from vidpipe.events.db import StoreError, connect_writer
from vidpipe.events.rows import insert
from vidpipe.events.vectors import delete_old_tracks, embedding_problem, insert_track
from vidpipe.metrics import Metrics
from vidpipe.types import ClipEvent, Event, FrameResult, TrackSummary

log = logging.getLogger(__name__)

#: Most events per transaction: bounds how long one commit holds the write lock.
BATCH_MAX = 500
#: How long an idle writer waits on its queue before re-checking the stop Event.
_POLL_S = 0.5
#: Pauses between retries of a failed transaction (the last one repeats).
_RETRY_S = (0.5, 1.0, 2.0, 5.0)
#: At most one error line per this many seconds.
_ERROR_LOG_INTERVAL_S = 10.0
#: Rows deleted per statement by the age retention (keeps each write lock short).
_DELETE_CHUNK = 5000


class EventStore:
    """The event store as a sink (see the module docstring).

    Args:
        path: the SQLite file (created with its directory).
        metrics: where stored, dropped and failed events are counted.
        max_age_days: rows older than this are deleted.
        queue_size: events that may wait for the writer.
        clip_dirs: each recording camera's clip directory (``ClipRecorder.camera_dirs``).
        housekeeping_s: how often the writer applies the retention.
        close_timeout_s: how long ``close`` lets the writer commit what is queued.

    Raises:
        StoreError: the file is not an event store this vidpipe can write.
        OSError: its directory cannot be created.
    """

    name = "events"
    wants_images = False
    inline = True  # handle() only queues: no pool thread or pool queue of its own
    queue_size = 1  # the pool's (unused for an inline sink); events wait in the store's queue

    def __init__(
        self,
        path: Path,
        metrics: Metrics,
        *,
        max_age_days: float,
        queue_size: int,
        clip_dirs: Callable[[], dict[str, Path]] = dict,
        housekeeping_s: float = 60.0,
        close_timeout_s: float = 5.0,
    ) -> None:
        self.path = path
        self._metrics = metrics
        self._max_age_s = max_age_days * 86400.0
        self._clip_dirs = clip_dirs
        self._housekeeping_s = housekeeping_s
        self._close_timeout_s = close_timeout_s
        self._queue: queue.Queue[Event] = queue.Queue(queue_size)
        self._dropped = {
            r: metrics.events_dropped.labels(reason=r) for r in ("queue_full", "rejected")
        }
        self._stop = threading.Event()
        self._deadline = float("inf")  # set by close(): the writer gives up after it
        self._conn: sqlite3.Connection | None = connect_writer(path)
        self._failing = 0
        self._last_error_log = -float("inf")
        self._last_reject_log = -float("inf")
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="events-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the sink

    def handle(self, result: FrameResult) -> None:
        """Queue the result's events; never blocks (a full queue drops and counts)."""
        if not result.events:
            return
        for event in result.events:
            if isinstance(event, TrackSummary) and self._refused(event):
                continue
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                self._dropped["queue_full"].inc()
        self._metrics.events_queue_depth.set(self._queue.qsize())

    def _refused(self, summary: TrackSummary) -> bool:
        """Whether ``summary``'s embedding cannot be stored (counted, and logged at most
        every ``_ERROR_LOG_INTERVAL_S``)."""
        why = embedding_problem(summary.embedding)
        if why is None:
            return False
        self._dropped["rejected"].inc()
        now = time.monotonic()
        if now - self._last_reject_log >= _ERROR_LOG_INTERVAL_S:
            self._last_reject_log = now
            log.error("event store: track %s/%d not stored: %s", summary.camera,
                      summary.track_id, why)  # fmt: skip
        return True

    def close(self) -> None:
        """Commit what is queued (within ``close_timeout_s``), stop the writer, close the file.

        What is left after the timeout is counted as dropped (``shutdown``). Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        self._deadline = time.monotonic() + self._close_timeout_s
        self._stop.set()
        self._thread.join(self._close_timeout_s + 1.0)
        if self._thread.is_alive():
            log.error("event store: writer still busy after %.1f s", self._close_timeout_s)
            return
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        next_housekeeping = 0.0  # at once: what happened while the daemon was down
        while True:
            if self._stop.is_set() and time.monotonic() > self._deadline:
                break
            batch = self._take()
            if batch:
                self._write(batch)
            elif self._stop.is_set():
                break
            if time.monotonic() >= next_housekeeping and not self._stop.is_set():
                self._housekeep()
                next_housekeeping = time.monotonic() + self._housekeeping_s
        left = self._queue.qsize()
        if left:
            self._drop_shutdown(left)

    def _take(self) -> list[Event]:
        """The next batch: waits for a first event (up to ``_POLL_S``), then takes what is
        there, up to ``BATCH_MAX``."""
        batch: list[Event] = []
        try:
            batch.append(self._queue.get(timeout=0 if self._stop.is_set() else _POLL_S))
        except queue.Empty:
            return batch
        while len(batch) < BATCH_MAX:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        self._metrics.events_queue_depth.set(self._queue.qsize())
        return batch

    def _write(self, batch: list[Event]) -> None:
        """Commit ``batch``, retrying while the disk fails; count the events once committed."""
        attempt = 0
        while True:
            try:
                self._commit(batch)
            except (sqlite3.OperationalError, StoreError, OSError) as exc:
                self._failed(exc)  # disk full, I/O error, a lock held too long: retried
            except sqlite3.DatabaseError as exc:
                self._failed(exc)  # SQLite refused the rows themselves: a retry cannot help
                self._metrics.events_dropped.labels(reason="rejected").inc(len(batch))
                return
            else:
                for kind, n in Counter(_kind(e) for e in batch).items():
                    self._metrics.events_stored.labels(kind=kind).inc(n)
                if self._failing:
                    log.info("event store: writing again after %d failure(s)", self._failing)
                    self._failing = 0
                return
            pause = _RETRY_S[min(attempt, len(_RETRY_S) - 1)]
            attempt += 1
            if not self._stop.is_set():
                self._stop.wait(pause)
            elif time.monotonic() + pause > self._deadline:
                self._drop_shutdown(len(batch))
                return
            else:
                time.sleep(pause)  # stopping, but close() still allows a retry

    def _commit(self, batch: list[Event]) -> None:
        if self._conn is None:
            self._conn = connect_writer(self.path)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for event in batch:
                if isinstance(event, TrackSummary):
                    insert_track(conn, event)
                else:
                    insert(conn, event)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _failed(self, exc: Exception) -> None:
        """Count and (rate-limited) log a failed transaction; reopen the file for the retry
        (after an I/O error SQLite's view of the file can no longer be trusted)."""
        self._metrics.events_write_failures.inc()
        self._failing += 1
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_INTERVAL_S:
            self._last_error_log = now
            log.error("event store %s: write failed (%d so far): %s", self.path, self._failing, exc)
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _drop_shutdown(self, n: int) -> None:
        self._metrics.events_dropped.labels(reason="shutdown").inc(n)
        log.warning("event store: %d event(s) not stored at shutdown", n)

    # ------------------------------------------------------------------ retention

    def _housekeep(self) -> None:
        try:
            if self._conn is None:
                self._conn = connect_writer(self.path)
            self._delete_old(self._conn)
            self._mark_deleted_clips(self._conn)
        except (sqlite3.Error, StoreError, OSError) as exc:
            self._failed(exc)

    def _delete_old(self, conn: sqlite3.Connection) -> None:
        cutoff = time.time() - self._max_age_s
        while True:
            with conn:  # closes the implicit transaction; one chunk per commit
                conn.execute("BEGIN IMMEDIATE")
                n = conn.execute(
                    "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? LIMIT ?)",
                    (cutoff, _DELETE_CHUNK),
                ).rowcount
            if n:
                self._metrics.events_deleted.inc(n)
            if n < _DELETE_CHUNK:
                break
        while delete_old_tracks(conn, cutoff, _DELETE_CHUNK) == _DELETE_CHUNK:
            pass

    def _mark_deleted_clips(self, conn: sqlite3.Connection) -> None:
        """Rows whose clip is no longer on disk get ``clip_deleted = 1``.

        Only cameras that record now are checked: a camera removed from the config keeps its
        rows as they are, since its clip directory is no longer known.
        """
        for camera, camera_dir in self._clip_dirs().items():
            linked = conn.execute(
                "SELECT DISTINCT clip_id FROM events "
                "WHERE camera = ? AND clip_id IS NOT NULL AND clip_deleted = 0",
                (camera,),
            ).fetchall()
            if not linked:
                continue
            on_disk = {c.clip_id for c in stored_clips(camera_dir)}
            gone = [(camera, cid) for (cid,) in linked if cid not in on_disk]
            if gone:
                with conn:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany(
                        "UPDATE events SET clip_deleted = 1 WHERE camera = ? AND clip_id = ?",
                        gone,
                    )


def _kind(event: Event) -> str:
    return "clip" if isinstance(event, ClipEvent) else event.kind
