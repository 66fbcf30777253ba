"""JSON Lines sink: one line per processed frame, and one per zone or line event.

The lines are the records of ``vidpipe.sinks.record`` (the README's "Record format").

Each line is written whole with one ``write(2)`` on an ``O_APPEND`` descriptor, so lines are
never torn or interleaved, even when several processes append to the same file. Rotation by
rename (logrotate's default) is noticed within a second and the file is reopened;
``copytruncate`` works as well because of ``O_APPEND``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from pathlib import Path

from vidpipe.sinks.record import encode, event_record, frame_record
from vidpipe.types import FrameResult

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
#: How often the file's identity is compared with the open descriptor (rotation check).
_REOPEN_CHECK_S = 1.0


def format_lines(result: FrameResult, *, with_frame: bool = True) -> bytes:
    """The JSON lines of ``result``: its frame record (unless ``with_frame`` is false), then
    one line per zone or line event record, newline-terminated (``vidpipe.sinks.record``)."""
    records = [frame_record(result)] if with_frame else []
    records += [event_record(e) for e in result.events]
    return b"".join(encode(r) + b"\n" for r in records)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, looping on short writes."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _undo_partial_line(fd: int, start: int, line_len: int) -> None:
    """After a failed write (disk full, file-size limit), cut off the part of the line that
    made it, so that the file never holds a torn line. Only when nobody else appended since.
    """
    with contextlib.suppress(OSError):
        size = os.fstat(fd).st_size
        if start < size < start + line_len:
            os.ftruncate(fd, start)


class JsonlSink:
    """Appends one JSON line per frame (or per frame with detections) to ``path``.

    After an ``OSError`` the descriptor is dropped and the file reopened on the next item, so
    the sink recovers by itself once the cause (full disk, missing directory) goes away. A line
    cut short by the error is removed again, so the file holds whole lines only.

    Args:
        name: the sink's unique name.
        path: the output file; parent directories are created.
        only_with_detections: skip frames without detections.
        queue_size: capacity of the sink's queue in the pool.
        batch_window_s: the pool lets lines gather this long before writing them (one wake-up
            of the sink's thread per window instead of one per frame; ``SinkPool``).
    """

    wants_images = False

    def __init__(
        self,
        name: str,
        path: Path,
        *,
        only_with_detections: bool = False,
        queue_size: int = 1024,
        batch_window_s: float = 0.0,
    ) -> None:
        self.name = name
        self.queue_size = queue_size
        self.batch_window_s = batch_window_s
        self._path = Path(path)
        self._only_with_detections = only_with_detections
        self._fd: int | None = None
        self._next_check = 0.0
        self._lock = threading.Lock()

    def handle(self, result: FrameResult) -> None:
        """Append the line of ``result`` and its event lines, in one write.

        ``only_with_detections`` skips the frame line of a frame without detections, never its
        events (a track that is lost leaves its zone in such a frame). Raises OSError when the
        file cannot be written.
        """
        skip_frame = result.events_only or (
            self._only_with_detections and len(result.detections) == 0
        )
        if skip_frame and not result.events:
            return
        line = format_lines(result, with_frame=not skip_frame)
        with self._lock:
            fd = self._current_fd()
            st = os.fstat(fd)
            start = st.st_size if stat.S_ISREG(st.st_mode) else None
            try:
                write_all(fd, line)
            except OSError:
                if start is not None:
                    _undo_partial_line(fd, start, len(line))
                self._close_fd()
                raise

    def close(self) -> None:
        """Close the file. Idempotent."""
        with self._lock:
            self._close_fd()

    def _current_fd(self) -> int:
        """The open descriptor, (re)opened if needed or if the file was rotated away."""
        now = time.monotonic()
        if self._fd is not None and now >= self._next_check:
            self._next_check = now + _REOPEN_CHECK_S
            if self._rotated(self._fd):
                self._close_fd()
        if self._fd is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self._path, _OPEN_FLAGS, 0o666)
            self._next_check = now + _REOPEN_CHECK_S
        return self._fd

    def _rotated(self, fd: int) -> bool:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return True
        open_st = os.fstat(fd)
        return (st.st_dev, st.st_ino) != (open_st.st_dev, open_st.st_ino)

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            # The descriptor is gone either way; the write error, if any, was already raised.
            with contextlib.suppress(OSError):
                os.close(fd)
