"""What native libraries write straight to file descriptors 2 and 1, through Python logging,
redacted.

PyNvVideoCodec's C++ code (NVIDIA's Video Codec SDK helpers and the FFmpeg build inside it)
prints its messages with ``printf`` / ``fprintf(stderr)`` / ``std::cerr``, not through any
callback. On a damaged stream PyNvVideoCodec 2.2.4 prints, to fd 1 (stdout), for example::

    [ERROR][18:53:56] General error -1094995529 at line 1337 in file .../FFmpegDemuxer.h
    Decode Error occurred for picture 171

and FFmpeg's own lines go to fd 2 (tests/gpu/test_nvdec_gpu.py,
``test_damaged_file_at_a_credentialed_path_leaks_nothing_to_stderr_gpu``, counts both).
Such lines name no camera, and an RTSP failure can print the URL it opened, with its
credentials. While :func:`install` is in effect, fd 2 is the write end of a pipe, and so is
fd 1 in a process that opted in with :func:`route_stdout`. A daemon thread per fd reads it
line by line, masks credentials (``vidpipe.redact.redact_text``: URL passwords and every
registered secret), and re-logs each line on the logger ``vidpipe.capture.native`` as
``camera <name>: [nvdec] <line>``, at most ``BURST`` lines per camera per ``WINDOW_S`` from
both fds together (a broken stream prints one line per packet), saying how many it held
back.

Only ``vidpipe run`` routes fd 1 (``vidpipe.daemon.run`` calls :func:`route_stdout`): the
daemon prints nothing to stdout, and under systemd its stdout goes to the journal. Commands
that print their results to stdout (``detect``, ``check``, ``bench``) and test runners keep
fd 1 as it is; they load PyNvVideoCodec with fd 2 routed only.

Attribution: a write to a fd carries no thread, so a line belongs to a camera only when it
names the camera's URL or path, or when one camera alone uses NVDEC (``attribute_camera``).
Otherwise it is logged as camera ``?``. Lines in the Video Codec SDK's ``[LEVEL]`` format,
or FFmpeg's ``[component @ 0x...]`` format, are marked ``[nvdec]`` (PyAV's FFmpeg logs
through Python, never to fd 2: ``vidpipe.capture.ffmpeg_log``); anything else is marked
``[native]``.

Python's own output keeps working: ``sys.stderr`` (``sys.stdout``) and every logging handler
that wrote to the routed fd are moved to a duplicate of the original fd (so log lines never
loop through the pipe, and what Python prints to stdout reaches it unchanged), and so is
``faulthandler`` if it is on (a crash dump must not wait for a thread).

It is installed when PyNvVideoCodec is first loaded (``vidpipe.capture.nvdec.load_codec``:
the start-up check of nvdec cameras, or the first NVDEC reader): a daemon without nvdec
cameras never touches fd 2 or fd 1. Child processes inherit the pipes as their stderr (and
stdout), so what they print is logged the same way.
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
#: Lines passed on per camera per ``WINDOW_S`` seconds, from both fds together (a broken
#: stream prints one line per packet).
BURST, WINDOW_S = 5, 10.0
_PYTHON_STREAMS = {1: "stdout", 2: "stderr"}  # fd -> the ``sys`` attribute that writes to it
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
    """``(origin, level)`` of a line read from a routed fd: ``nvdec`` for the formats of the
    libraries inside PyNvVideoCodec, ``native`` for anything else (logged as a warning)."""
    m = _SDK_LINE.match(raw_line)
    if m:
        return "nvdec", _LEVELS[m.group(1)]
    if _FFMPEG_LINE.match(raw_line):
        return "nvdec", logging.WARNING
    return "native", logging.WARNING


class NativeOutput:
    """File descriptor ``fd`` (2, or 1 for the daemon) routed through a pipe whose reader
    thread logs each line (see the module doc).

    Args:
        fd: 2 (stderr) or 1 (stdout); Python's ``sys.stderr`` or ``sys.stdout`` moves with it.
        limit: the rate limit per camera (``?`` counts as one), shared by the readers.
    """

    def __init__(self, fd: int, limit: RateLimit) -> None:
        self.fd = fd
        self._limit = limit
        self._sys_name = _PYTHON_STREAMS[fd]
        self._old_stream: IO[str] = getattr(sys, self._sys_name)
        self._saved_fd = os.dup(fd)
        self.stream: IO[str] = os.fdopen(
            os.dup(self._saved_fd),
            "w",
            buffering=1,
            encoding=getattr(self._old_stream, "encoding", None) or "utf-8",
            errors="backslashreplace",
        )
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._faulthandler = fd == 2 and faulthandler.is_enabled()
        self._old_stream.flush()
        read_fd, write_fd = os.pipe()
        _grow_pipe(write_fd)
        self._pipe_inode = os.fstat(write_fd).st_ino
        self._move_python_stream()
        os.dup2(write_fd, fd)
        os.close(write_fd)
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name=f"native-{self._sys_name}", daemon=True
        )
        self._thread.start()

    def _move_python_stream(self) -> None:
        """Point ``sys.stderr`` (``sys.stdout``), the handlers on the fd and faulthandler at
        the saved fd."""
        for handler in _stream_handlers():
            if _fileno(handler.stream) == self.fd:
                self._moved.append((handler, handler.stream))
                handler.setStream(self.stream)
        setattr(sys, self._sys_name, self.stream)
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
        except Exception:  # the pump must keep draining, or the C writers block
            return

    @property
    def alive(self) -> bool:
        """Whether lines written to the fd are still read (False once something else, such
        as a test runner's capture, has replaced the fd and the pipe has ended)."""
        return self._saved_fd >= 0 and self._thread.is_alive()

    def close(self) -> None:
        """Give the fd back to the original file, log what is still in the pipe, undo the
        moves. Idempotent."""
        if self._saved_fd < 0:
            return
        if os.fstat(self.fd).st_ino == self._pipe_inode:  # else someone else has set it since
            os.dup2(self._saved_fd, self.fd)  # the pipe's last write end: the pump reads EOF
        os.close(self._saved_fd)
        self._saved_fd = -1
        self._thread.join(_JOIN_S)
        if self._thread.is_alive():  # a child process still holds the write end
            log.warning("native %s reader still running after %.0f s", self._sys_name, _JOIN_S)
        for handler, stream in self._moved:
            if handler.stream is self.stream:
                handler.setStream(stream)
        if getattr(sys, self._sys_name) is self.stream:
            setattr(sys, self._sys_name, self._old_stream)
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
_active: dict[int, NativeOutput] = {}  # fd -> its reader
_limit = RateLimit(BURST, WINDOW_S, time.monotonic)  # one budget per camera for both fds
_route_stdout = False  # set by route_stdout(): fd 1 is routed too
_atexit_held = False  # atexit holds uninstall (once)


def install() -> None:
    """Route fd 2, and fd 1 after :func:`route_stdout`, through the redacting reader
    (idempotent: the first call installs it, and a later one again where something else has
    taken the fd over since)."""
    global _atexit_held
    with _lock:
        if not _atexit_held:
            atexit.register(uninstall)  # at exit, what is still in the pipes is logged first
            _atexit_held = True
        for fd in (2, 1) if _route_stdout else (2,):
            _install_fd(fd)


def _install_fd(fd: int) -> None:
    reader = _active.get(fd)
    if reader is not None and not reader.alive:
        reader.close()
        reader = None
    if reader is None:
        _active[fd] = NativeOutput(fd, _limit)


def route_stdout() -> None:
    """Opt in to routing fd 1 as well, from the next :func:`install` on (at once if it is in
    effect). Only for a process whose stdout carries nothing of its own: ``vidpipe run``.
    Commands that print their results (``detect``, ``check``, ``bench``) and test runners
    never call it, so their fd 1 is left as it is."""
    global _route_stdout
    with _lock:
        _route_stdout = True
        if 2 in _active:
            _install_fd(1)


def uninstall() -> None:
    """Undo ``install`` on every fd (tests; at exit). Idempotent; ``route_stdout`` stays."""
    with _lock:
        for fd in sorted(_active):  # stdout first: its last lines are logged to stderr
            _active.pop(fd).close()


def installed(fd: int = 2) -> bool:
    """Whether ``fd`` is read by the redacting reader now."""
    reader = _active.get(fd)
    return reader is not None and reader.alive
