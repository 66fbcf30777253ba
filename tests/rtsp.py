"""A real RTSP server for tests: ``tests/rtsp_server.py`` run as a subprocess.

The server needs GStreamer's Python bindings, which only Debian's system Python has, so it
runs as ``/usr/bin/python3 tests/rtsp_server.py`` in its own process. Tests can kill, restart,
freeze and thaw it to play camera failures::

    with RtspServer(videos_dir) as server:
        url = server.url("one-by-one-person-detection")
        server.freeze()   # SIGSTOP: TCP stays open, nothing is sent
        server.thaw()     # SIGCONT
        server.kill()     # SIGKILL: connections reset
        server.restart()  # same port

No server outlives its test: ``stop()`` (also on ``__exit__``) ends the process and reaps it;
the server also exits when its stdin (a pipe held by this process) closes, and the kernel
kills it (PR_SET_PDEATHSIG) when the thread that started it ends, frozen or not. So start
servers from the test's own thread (fixtures and test functions do), not from a short-lived
helper thread.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from types import TracebackType
from typing import IO

SYSTEM_PYTHON = "/usr/bin/python3"
SERVER_SCRIPT = Path(__file__).with_name("rtsp_server.py")


class RtspServerError(RuntimeError):
    """The server did not start (its stderr is in the message)."""


def gst_rtsp_available() -> str | None:
    """None if the server can run here, else why not (for ``pytest.skip``/``fail``)."""
    if not Path(SYSTEM_PYTHON).is_file():
        return f"{SYSTEM_PYTHON} is missing"
    probe = subprocess.run(
        [
            SYSTEM_PYTHON,
            "-c",
            "import gi; gi.require_version('GstRtspServer', '1.0'); "
            "from gi.repository import GstRtspServer",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        return f"GStreamer RTSP server bindings unavailable: {probe.stderr.strip()[-300:]}"
    return None


class RtspServer:
    """Context manager around one RTSP server process on 127.0.0.1.

    Args:
        videos: directory whose ``*.mp4`` clips are served, one mount per file stem.
        loop: every clip loops forever (no end of stream).
        stagger: with ``loop``, the clips start at different points of themselves (mount
            ``camK`` at ``frac(K x 0.618)`` of the clip), not all at their first frame.
        user: require RTSP basic auth with this user (and ``password``).
        password: the password for ``user``.
        digest: ask for RTSP digest authentication instead of basic.
        port: port to listen on; 0 lets the server pick a free one.
        start_timeout_s: how long to wait for the server's ``READY`` line.
    """

    def __init__(
        self,
        videos: Path,
        *,
        loop: bool = False,
        stagger: bool = False,
        user: str | None = None,
        password: str | None = None,
        digest: bool = False,
        port: int = 0,
        start_timeout_s: float = 15.0,
    ) -> None:
        self.videos = Path(videos)
        self.loop = loop
        self.stagger = stagger
        self.user = user
        self.password = password
        self.digest = digest
        self.port = port
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> RtspServer:
        """Start the server and wait until it serves; sets ``port``."""
        if self._proc is not None:
            raise RuntimeError("server already running")
        cmd = [SYSTEM_PYTHON, str(SERVER_SCRIPT), "--videos", str(self.videos)]
        cmd += ["--port", str(self.port), "--parent-pid", str(os.getpid())]
        if self.loop:
            cmd.append("--loop")
            if self.stagger:
                cmd.append("--stagger")
        if self.user is not None:
            cmd += ["--user", self.user, "--password", self.password or ""]
            if self.digest:
                cmd.append("--digest")
        if self._stderr is not None:
            self._stderr.close()
        # stderr goes to a file: an unread pipe could fill up and block the server.
        self._stderr = tempfile.TemporaryFile(prefix="rtsp-server-")  # noqa: SIM115 (outlives call)
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,  # the server exits when this pipe closes
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "GST_DEBUG": os.environ.get("GST_DEBUG", "1")},
        )
        try:
            self.port = self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_ready(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self._proc.poll() is not None:
                break
            ready, _, _ = select.select([self._proc.stdout], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(self._proc.stdout.fileno(), 1)
                if not chunk:
                    break
                line += chunk
        parts = line.decode(errors="replace").split()
        if len(parts) == 2 and parts[0] == "READY":
            return int(parts[1])
        err = self.stderr_text()
        self.kill()
        raise RtspServerError(f"RTSP server did not start (got {line!r}): {err[-2000:]}")

    def stderr_text(self) -> str:
        """What the current (or last) server process wrote to stderr."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self, grace_s: float = 3.0) -> None:
        """End the server (SIGTERM, then SIGKILL after ``grace_s``) and reap it. Idempotent."""
        self._end(grace_s)

    def kill(self) -> None:
        """SIGKILL the server: every client connection is reset. The port stays ``port``."""
        self._end(0.0)

    def _end(self, grace_s: float) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a frozen process cannot act on SIGTERM
            if grace_s > 0:
                proc.terminate()
                try:
                    proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
            else:
                proc.kill()
        proc.communicate(timeout=10)  # reaps it and closes the pipes

    def restart(self) -> None:
        """Start the server again on the same port (after ``kill``; kills a running one)."""
        self.kill()
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                self.start()
                return
            except RtspServerError:
                if time.monotonic() > deadline:  # port still held by a dying process?
                    raise
                time.sleep(0.2)

    def freeze(self) -> None:
        """SIGSTOP the server: connections stay open but no data flows."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT a frozen server."""
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError("server is not running")
        self._proc.send_signal(signum)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- URLs --------------------------------------------------------------------------------

    def url(self, stem: str, user: str | None = None, password: str | None = None) -> str:
        """``rtsp://[user:password@]127.0.0.1:PORT/stem`` (credentials percent-encoded)."""
        auth = ""
        if user is not None:
            auth = urllib.parse.quote(user, safe="")
            if password is not None:
                auth += ":" + urllib.parse.quote(password, safe="")
            auth += "@"
        return f"rtsp://{auth}127.0.0.1:{self.port}/{stem}"

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> RtspServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:  # last resort; tests use the context manager
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
