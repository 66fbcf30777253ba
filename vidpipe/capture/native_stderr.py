"""What native libraries write straight to file descriptor 2, through Python logging, redacted.

PyNvVideoCodec's C++ code (NVIDIA's Video Codec SDK helpers and the FFmpeg build inside it)
prints its messages with ``fprintf(stderr)`` / ``std::cerr``, not through any callback. On a
damaged stream that is, for example::

    [ERROR][18:53:56] General error -1094995529 at line 1337 in file .../FFmpegDemuxer.h

Such lines name no camera, and an RTSP failure can print the URL it opened, with its
credentials. While :func:`install` is in effect, fd 2 is the write end of a pipe. A daemon
thread reads it line by line, masks credentials (``vidpipe.redact.redact_text``: URL
passwords and every registered secret), and re-logs each line on the logger
``vidpipe.capture.native`` as ``camera <name>: [nvdec] <line>``, at most ``burst`` lines per
camera per ``window_s`` (a broken stream prints one line per packet), saying how many it held
back.

Attribution: a write to fd 2 carries no thread, so a line belongs to a camera only when it
names the camera's URL or path, or when one camera alone uses NVDEC (``attribute_camera``).
Otherwise it is logged as camera ``?``. Lines in the Video Codec SDK's ``[LEVEL]`` format,
or FFmpeg's ``[component @ 0x...]`` format, are marked ``[nvdec]`` (PyAV's FFmpeg logs
through Python, never to fd 2: ``vidpipe.capture.ffmpeg_log``); anything else is marked
``[native]``.

Python's own stderr keeps working: ``sys.stderr`` and every logging handler that wrote to
fd 2 are moved to a duplicate of the original fd 2 (so log lines never loop through the
pipe), and so is ``faulthandler`` if it is on (a crash dump must not wait for a thread).

It is installed when PyNvVideoCodec is first loaded (``vidpipe.capture.nvdec.load_codec``:
the start-up check of nvdec cameras, or the first NVDEC reader): a daemon without nvdec
cameras never touches fd 2. Child processes inherit the pipe as their stderr, so what they
print is logged the same way.
"""

from __future__ import annotations

import atexit
import faulthandler
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from vidpipe.capture.ffmpeg_log import RateLimit
from vidpipe.redact import redact_text

log = logging.getLogger("vidpipe.capture.native")

#: Longest line passed on, bytes; the rest of a longer line is dropped (counted in the text).
MAX_LINE_BYTES = 4096
_PIPE_BYTES = 1 << 20  # a burst of lines must not block the C writer while the reader waits
_JOIN_S = 2.0

# The Video Codec SDK's simplelogger: "[ERROR][18:53:56] ...", "[WARN] ...".
_SDK_LINE = re.compile(r"^\[(FATAL|ERROR|WARN|WARNING|INFO|DEBUG|TRACE)\]")
# FFmpeg's default log callback: "[h264 @ 0x55d0c2a8e1c0] ...".
_FFMPEG_LINE = re.compile(r"^\[[\w:. -]+ @ 0x[0-9a-fA-F]+\]")
_LEVELS = {
    # The library goes on after an ERROR (a packet is skipped and counted as a decode error;
    # a connection that cannot go on is reported by the capture worker): a warning here.
    "FATAL": logging.ERROR,
    "ERROR": logging.WARNING,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": logging.DEBUG,
}


#: A closed source's camera is still named for this long: its last lines may still be in the
#: pipe when it closes.
RELEASE_GRACE_S = 5.0


@dataclass
class _Cameras:
    """Camera name -> the URL it reads (for attribution), with a use count per camera and,
    once the count is 0, when that happened."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    urls: dict[str, tuple[str, ...]] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)
    released: dict[str, float] = field(default_factory=dict)

    def owner(self, raw_line: str) -> str | None:
        with self.lock:
            self._forget(time.monotonic() - RELEASE_GRACE_S)
            named = [cam for cam, forms in self.urls.items() if any(f in raw_line for f in forms)]
            if len(named) == 1:
                return named[0]
            if not named and len(self.urls) == 1:
                return next(iter(self.urls))
        return None

    def _forget(self, before: float) -> None:
        for cam in [c for c, t in self.released.items() if t < before]:
            del self.released[cam], self.urls[cam]


_cameras = _Cameras()


def attribute_camera(camera: str, url: str) -> None:
    """``camera`` uses NVDEC on ``url`` (a file path or stream URL) until ``release_camera``."""
    with _cameras.lock:
        _cameras.urls[camera] = _url_forms(url)
        _cameras.uses[camera] = _cameras.uses.get(camera, 0) + 1
        _cameras.released.pop(camera, None)


def _url_forms(url: str) -> tuple[str, ...]:
    """How a line may spell ``url``: as given, and for a stream URL without its userinfo
    (FFmpeg prints ``rtsp://host/path``); a ``file://`` URL as its path."""
    if url.lower().startswith("file://"):
        return (url[len("file://") :],)
    scheme, sep, rest = url.partition("://")
    if not sep:
        return (url,)
    authority, slash, path = rest.partition("/")  # a password holds no '/' (vidpipe.redact)
    bare = f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
    return (url,) if bare == url else (url, bare)


def release_camera(camera: str) -> None:
    """One ``attribute_camera`` of ``camera`` is over (its source closed)."""
    with _cameras.lock:
        left = _cameras.uses.get(camera, 0) - 1
        if left > 0:
            _cameras.uses[camera] = left
        elif camera in _cameras.uses:
            del _cameras.uses[camera]
            _cameras.released[camera] = time.monotonic()


def classify(raw_line: str) -> tuple[str, int]:
    """``(origin, level)`` of a line read from fd 2: ``nvdec`` for the formats of the
    libraries inside PyNvVideoCodec, ``native`` for anything else (logged as a warning)."""
    m = _SDK_LINE.match(raw_line)
    if m:
        return "nvdec", _LEVELS[m.group(1)]
    if _FFMPEG_LINE.match(raw_line):
        return "nvdec", logging.WARNING
    return "native", logging.WARNING


class NativeStderr:
    """fd 2 routed through a pipe whose reader thread logs each line (see the module doc).

    Args:
        burst: lines passed on per camera (``?`` counts as one) per window.
        window_s: the rate limit's window, seconds.
    """

    def __init__(self, burst: int = 5, window_s: float = 10.0) -> None:
        self._limit = RateLimit(burst, window_s, time.monotonic)
        self._saved_fd = os.dup(2)
        self.stream: IO[str] = os.fdopen(
            os.dup(self._saved_fd),
            "w",
            buffering=1,
            encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
            errors="backslashreplace",
        )
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._old_stderr = sys.stderr
        self._faulthandler = faulthandler.is_enabled()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        _grow_pipe(write_fd)
        self._pipe_inode = os.fstat(write_fd).st_ino
        self._move_python_stderr()
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name="native-stderr", daemon=True
        )
        self._thread.start()

    def _move_python_stderr(self) -> None:
        """Point ``sys.stderr``, the handlers on fd 2 and faulthandler at the saved fd 2."""
        for handler in _stream_handlers():
            if _fileno(handler.stream) == 2:
                self._moved.append((handler, handler.stream))
                handler.setStream(self.stream)
        sys.stderr = self.stream
        if self._faulthandler:
            faulthandler.enable(file=self.stream)

    def _pump(self, read_fd: int) -> None:
        pending, skipping = b"", False
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                if skipping:  # the rest of an over-long line: dropped, never split
                    end = chunk.find(b"\n")
                    if end < 0:
                        continue
                    chunk, skipping = chunk[end + 1 :], False
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._forward(line)
                if len(pending) > MAX_LINE_BYTES:
                    self._forward(pending)
                    pending, skipping = b"", True
        if pending:
            self._forward(pending)

    def _forward(self, line: bytes) -> None:
        try:
            text = _clip(line).decode("utf-8", "replace").rstrip("\r\n")
            if not text.strip():
                return
            origin, level = classify(text)
            camera = _cameras.owner(text) or "?"
            text = redact_text(text)
            ok, held = self._limit.admit(camera)
            if held:
                log.warning(
                    "camera %s: %d line(s) from native libraries suppressed (rate limit)",
                    camera,
                    held,
                )
            if ok:
                log.log(level, "camera %s: [%s] %s", camera, origin, text)
        except Exception:  # the pump must keep draining, or the C writers block on fd 2
            return

    @property
    def alive(self) -> bool:
        """Whether lines written to fd 2 are still read (False once something else, such as
        a test runner's capture, has replaced fd 2 and the pipe has ended)."""
        return self._saved_fd >= 0 and self._thread.is_alive()

    def close(self) -> None:
        """Give fd 2 back to the original stderr, log what is still in the pipe, undo the
        moves. Idempotent."""
        if self._saved_fd < 0:
            return
        if os.fstat(2).st_ino == self._pipe_inode:  # else someone else has set fd 2 since
            os.dup2(self._saved_fd, 2)  # closes the pipe's last write end: the pump reads EOF
        os.close(self._saved_fd)
        self._saved_fd = -1
        self._thread.join(_JOIN_S)
        if self._thread.is_alive():  # a child process still holds the write end
            log.warning("native stderr reader still running after %.0f s", _JOIN_S)
        for handler, stream in self._moved:
            if handler.stream is self.stream:
                handler.setStream(stream)
        if sys.stderr is self.stream:
            sys.stderr = self._old_stderr
        if self._faulthandler:
            faulthandler.enable(file=sys.stderr)
        self.stream.flush()


def _clip(line: bytes) -> bytes:
    """At most MAX_LINE_BYTES, cut at a space so that no URL is split (a cut URL would not be
    recognised by the redaction)."""
    if len(line) <= MAX_LINE_BYTES:
        return line
    head = line[:MAX_LINE_BYTES]
    cut = head.rfind(b" ")
    return head[: max(cut, 0)] + b" [line truncated]"


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass  # the default 64 KiB: a writer may wait a moment for the reader


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    loggers: list[Any] = [logging.getLogger()]
    loggers += list(logging.Logger.manager.loggerDict.values())
    found: list[logging.StreamHandler[Any]] = []
    for lg in loggers:
        for handler in getattr(lg, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and handler not in found:
                found.append(handler)
    return found


def _fileno(stream: Any) -> int:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return -1


_lock = threading.Lock()
_active: NativeStderr | None = None
_active_ever = False  # atexit holds uninstall (once)


def install() -> NativeStderr:
    """Route fd 2 through the redacting reader (idempotent: the first call installs it, and
    a later one again if something else has taken fd 2 over since)."""
    global _active, _active_ever
    with _lock:
        if _active is not None and not _active.alive:
            _active.close()
            _active = None
        if _active is None:
            if not _active_ever:
                atexit.register(uninstall)  # at exit, what is still in the pipe is logged first
            _active = NativeStderr()
            _active_ever = True
        return _active


def uninstall() -> None:
    """Undo ``install`` (tests; at exit). Idempotent."""
    global _active
    with _lock:
        if _active is not None:
            _active.close()
            _active = None


def installed() -> bool:
    """Whether fd 2 is read by the redacting reader now."""
    return _active is not None and _active.alive
