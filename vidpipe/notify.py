"""systemd's notify protocol, implemented here (no libsystemd binding needed).

The service manager passes ``$NOTIFY_SOCKET``: the path of an AF_UNIX datagram socket, or an
abstract socket name starting with ``@``. Each message is one datagram of newline-separated
``KEY=value`` assignments (``sd_notify(3)``). What vidpipe sends, and when:

* ``STATUS=starting: ...`` with ``X_VIDPIPE_HTTP_PORT=`` once the HTTP port is bound and the
  cameras stream, while the models still load (a supervisor merges the port's pages and
  metrics from then on);
* ``READY=1`` once the config is valid, the models compiled and inference started;
* ``STATUS=`` a one-line summary ("7/8 cameras streaming, 96 fps");
* ``WATCHDOG=1`` every ``$WATCHDOG_USEC / 2``, but only while ``Health.check()`` says the
  inference stage makes progress: a hung request pool stops the pings, and systemd restarts
  the service after ``WatchdogSec=``;
* ``STOPPING=1`` when a stop was requested (SIGTERM);
* ``RELOADING=1`` with ``MONOTONIC_USEC=`` when a reload (SIGHUP) begins, ``READY=1`` when it
  ends, whatever its result.

Without ``$NOTIFY_SOCKET`` every call is a no-op, so the daemon behaves the same outside
systemd.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

from vidpipe.health import Health

log = logging.getLogger(__name__)

# Keep status lines short: systemctl shows them on one line, and a datagram has a size limit.
_MAX_STATUS_CHARS = 200
_STATUS_PERIOD_S = 5.0


def _socket_address(value: str) -> str | bytes:
    """``$NOTIFY_SOCKET`` as an address for ``sendto``: ``@name`` is the abstract ``\\0name``."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


class Notifier:
    """Sends notify messages to the service manager; inert without a socket.

    Args:
        address: ``$NOTIFY_SOCKET`` (an absolute path or ``@abstract-name``); None disables.
    """

    def __init__(self, address: str | None) -> None:
        if address is not None and not address.startswith(("/", "@")):
            log.warning("ignoring NOTIFY_SOCKET %r: neither a path nor an abstract name", address)
            address = None
        self.address = address
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._failed = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Notifier:
        """A notifier for ``$NOTIFY_SOCKET`` (read once, here)."""
        env = os.environ if env is None else env
        return cls(env.get("NOTIFY_SOCKET") or None)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=value`` lines as one datagram. False if disabled or the send failed.

        A failure is logged once and never raised: losing the service manager must not stop
        the pipeline (without pings, systemd's watchdog handles that case itself).
        """
        if self.address is None:
            return False
        payload = "\n".join(a.replace("\n", " ") for a in assignments).encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(
                        socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                    )
                self._sock.sendto(payload, _socket_address(self.address))
            except OSError as exc:
                if not self._failed:
                    log.warning("cannot notify the service manager at %s: %s", self.address, exc)
                    self._failed = True
                return False
        self._failed = False
        return True

    def ready(self, status: str | None = None, *extra: str) -> bool:
        """``READY=1`` (with a status line and ``extra`` assignments)."""
        return self.send("READY=1", *([_status(status)] if status else []), *extra)

    def status(self, text: str, *extra: str) -> bool:
        """``STATUS=`` one line (with ``extra`` assignments)."""
        return self.send(_status(text), *extra)

    def reloading(self) -> bool:
        """``RELOADING=1`` with ``MONOTONIC_USEC`` (CLOCK_MONOTONIC, as systemd expects)."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}", _status("reloading"))

    def stopping(self) -> bool:
        """``STOPPING=1``."""
        return self.send("STOPPING=1", _status("stopping: draining inference"))

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the service is alive."""
        return self.send("WATCHDOG=1")

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def _status(text: str) -> str:
    line = " ".join(text.split())
    return "STATUS=" + line[:_MAX_STATUS_CHARS]


def watchdog_interval_s(env: Mapping[str, str] | None = None) -> float | None:
    """Half of ``$WATCHDOG_USEC`` in seconds, or None when the watchdog is off (or meant for
    another process, per ``$WATCHDOG_PID``)."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec:
        return None
    if pid and pid != str(os.getpid()):
        return None
    try:
        value = int(usec)
    except ValueError:
        log.warning("ignoring WATCHDOG_USEC=%r: not an integer", usec)
        return None
    return value / 2e6 if value > 0 else None


class Reporter:
    """A thread that pings the watchdog while the pipeline is healthy and keeps STATUS fresh.

    Each tick (``$WATCHDOG_USEC / 2`` with a watchdog, else every 5 s) it asks
    ``health.check()``. Healthy: ``WATCHDOG=1`` plus the ``status()`` line. Not healthy: no
    ping, the reason as STATUS and a warning in the log, so that ``systemctl status`` shows why
    systemd is about to restart the service.

    Args:
        notifier: where to send.
        health: the liveness verdict shared with ``/healthz``.
        status: returns the one-line summary.
        interval_s: the watchdog ping interval (None: no watchdog, status only).
    """

    def __init__(
        self,
        notifier: Notifier,
        health: Health,
        status: Callable[[], str],
        interval_s: float | None,
    ) -> None:
        self.notifier = notifier
        self.health = health
        self.status = status
        self.interval_s = interval_s
        self.pings = 0  # WATCHDOG=1 sent
        self.ticks = 0  # health checks done
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_ok = True

    def start(self) -> Reporter:
        if self.notifier.enabled:
            self._thread = threading.Thread(target=self._run, name="vidpipe-notify", daemon=True)
            self._thread.start()
        return self

    def pause(self) -> None:
        """Stop sending STATUS (a reload or the shutdown owns it now); pings continue."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def _run(self) -> None:
        tick_s = self.interval_s if self.interval_s is not None else _STATUS_PERIOD_S
        while not self._stop.wait(tick_s):
            self.tick()

    def tick(self) -> None:
        """One check: ping (if due and healthy) and refresh the status line."""
        verdict = self.health.check()
        self.ticks += 1
        if verdict.ok:
            if not self._was_ok:
                log.warning("inference progresses again: %s", verdict.reason)
            if self.interval_s is not None and self.notifier.watchdog():
                self.pings += 1
            if not self._paused.is_set():
                self.notifier.status(self.status())
        else:
            if self._was_ok:
                log.error("watchdog pings withheld: %s", verdict.reason)
            if not self._paused.is_set():
                self.notifier.status(f"stalled: {verdict.reason}")
        self._was_ok = verdict.ok

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
