"""FFmpeg's own messages, through Python logging, attributed to a camera, rate-limited, redacted.

PyAV hands every FFmpeg message at or above its level to the logger ``libav.<component>``
(``libav.rtsp``, ``libav.h264``), synchronously, on the thread whose FFmpeg call emitted it.
Capture readers are the only threads here that call FFmpeg, and each reads one camera, so a
thread-local tells which camera a message belongs to. The bridge re-logs it as
``vidpipe.capture.ffmpeg`` with ``camera <name>: [component] message``, at most
``burst`` lines per camera per ``window_s`` (a corrupt stream logs one "error while decoding"
line per macroblock row), and says how many it suppressed. Credentials are masked by
``redact_text`` before the record exists, as in every other vidpipe log line.

The last error message of each reader thread is kept: it tells apart failures that FFmpeg
reports with one generic code (a name that does not resolve is ``EIO``). While a source opens
(``opening``), FFmpeg's lines go out at DEBUG only: a failed open is reported by the worker's
one backoff line per attempt, which carries FFmpeg's last error line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import av.logging

from vidpipe.redact import redact_text

log = logging.getLogger("vidpipe.capture.ffmpeg")

_local = threading.local()
_install_lock = threading.Lock()
_installed = False


def current_camera() -> str | None:
    """The camera whose reader is running on this thread, if any."""
    return getattr(_local, "camera", None)


def last_error() -> str:
    """The last FFmpeg message at ERROR or above on this thread (redacted), or ''."""
    return str(getattr(_local, "last_error", ""))


@contextmanager
def opening() -> Iterator[None]:
    """Inside the block FFmpeg's lines on this thread are kept (``last_error``), logged at DEBUG."""
    _local.last_error = ""
    _local.opening = True
    try:
        yield
    finally:
        _local.opening = False


@contextmanager
def attributed_to(camera: str) -> Iterator[None]:
    """FFmpeg messages emitted on this thread inside the block belong to ``camera``."""
    prev = getattr(_local, "camera", None)
    _local.camera = camera
    _local.last_error = ""
    try:
        yield
    finally:
        _local.camera = prev


class RateLimit:
    """At most ``burst`` lines per key per ``window_s``; counts what it held back."""

    def __init__(self, burst: int, window_s: float, clock: Callable[[], float]) -> None:
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[float, int, int]] = {}  # key -> (start, sent, held)

    def admit(self, key: str) -> tuple[bool, int]:
        """(whether to log now, lines held back in the window that just ended)."""
        now = self._clock()
        with self._lock:
            start, sent, held = self._windows.get(key, (now, 0, 0))
            ended_held = 0
            if now - start >= self._window_s:
                start, sent, ended_held, held = now, 0, held, 0
            ok = sent < self._burst
            self._windows[key] = (start, sent + ok, held + (not ok))
            return ok, ended_held


class FFmpegLogBridge(logging.Handler):
    """The handler on the ``libav`` logger: re-logs each record for its camera."""

    def __init__(
        self, burst: int = 5, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(logging.DEBUG)
        self._limit = RateLimit(burst, window_s, clock)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = redact_text(record.getMessage().strip())
        except Exception:  # a message that does not format must never break a reader
            return
        # Redact in place too: a handler attached to ``libav`` after this one (pytest's log
        # capture attaches to every non-propagating logger) sees the masked text only.
        record.msg, record.args = text, None
        component = record.name.removeprefix("libav.")
        if record.levelno >= logging.ERROR:
            _local.last_error = text
        camera = current_camera() or "-"
        if getattr(_local, "opening", False):
            log.debug("camera %s: [%s] %s", camera, component, text)
            return
        ok, held = self._limit.admit(camera)
        if held:
            log.warning("camera %s: %d FFmpeg message(s) suppressed (rate limit)", camera, held)
        if ok:
            log.log(record.levelno, "camera %s: [%s] %s", camera, component, text)


def install(level: int = av.logging.WARNING) -> None:
    """Route FFmpeg's log through the bridge (idempotent; the first call's level wins).

    Without this PyAV discards FFmpeg's messages; nothing is ever written to file
    descriptor 2. PyAV's own repeat suppression is global across threads, so it would fold
    one camera's message into another's: the bridge's per-camera limit replaces it.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        libav = logging.getLogger("libav")
        libav.addHandler(FFmpegLogBridge())
        libav.setLevel(logging.DEBUG)  # the FFmpeg level below decides what arrives
        libav.propagate = False  # the bridge re-logs it; never twice, never unredacted
        av.logging.set_skip_repeated(False)
        av.logging.set_level(level)
        _installed = True
