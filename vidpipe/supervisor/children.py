"""The supervisor's child processes: start, readiness, restarts with backoff, the start-up
watchdog, signals and an orderly stop.

Each child is ``python -m vidpipe.supervisor.child`` on its shard, in a session of its own.
It speaks systemd's notify protocol to a datagram socket the supervisor binds for it alone,
so a message says which child it is from: ``X_VIDPIPE_HTTP_PORT`` (its private server, sent
once its cameras stream, before its models are loaded), ``READY=1``, ``STATUS=`` lines, and
``WATCHDOG=1`` pings when the service has a watchdog.

Everything here runs on the supervisor's main thread (``poll``); the HTTP thread only reads
``ports()`` and ``serving()``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: The supervisor's pid, in each child's environment (``child._die_with_parent``).
PARENT_ENV = "VIDPIPE_SUPERVISOR_PID"
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
#: A child that ran this long after READY starts its next backoff from the beginning.
STABLE_AFTER_S = 60.0
#: How long a child has to write its thread dump (SIGUSR1) before it is killed.
DUMP_GRACE_S = 1.0
#: Variables of the supervisor's own service manager that must not reach a child.
_PRIVATE_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID")


def describe_exit(code: int) -> str:
    """``exit code 1`` or ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class Child:
    """One slot (shard ``index`` of ``count``) and the process that runs it now, if any."""

    index: int
    count: int
    sock: socket.socket
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready_at: float | None = None
    last_ping: float = 0.0
    port: int | None = None
    status: str = "starting"
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"shard {self.index}/{self.count}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Children:
    """The ``count`` children of one ``vidpipe run``.

    Args:
        config_path: the config every child loads.
        count: how many children (shards).
        run_dir: a private directory for the notify sockets.
        env: extra environment for every child (CUDA MPS).
        gpus: each child's GPU on a box of several (``plan.placed_gpus``); empty: none given.
        start_timeout_s: the start-up watchdog (``inference.start_timeout_s``).
        watchdog_s: the service's watchdog ping interval (None: no watchdog); a ready child
            that stops pinging for twice this long is treated like one that hangs at start.
    """

    def __init__(
        self,
        config_path: Path,
        count: int,
        run_dir: Path,
        env: dict[str, str],
        start_timeout_s: float,
        watchdog_s: float | None = None,
        gpus: Sequence[int] = (),
    ) -> None:
        self.config_path = config_path
        self.gpus = tuple(gpus)
        self.start_timeout_s = start_timeout_s
        self.watchdog_s = watchdog_s
        self.stopping = False
        self._lock = threading.Lock()
        self._env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        self._env.update(env)
        self._env[PARENT_ENV] = str(os.getpid())
        self.slots: list[Child] = []
        for i in range(count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            sock.bind(str(run_dir / f"shard-{i}.notify"))
            sock.setblocking(False)
            self.slots.append(Child(i, count, sock))

    # -- starting ------------------------------------------------------------------------------

    def start_all(self) -> None:
        for child in self.slots:
            self._spawn(child)

    def _spawn(self, child: Child) -> None:
        env = {**self._env, "NOTIFY_SOCKET": child.sock.getsockname()}
        if self.watchdog_s is not None:
            env["WATCHDOG_USEC"] = str(int(self.watchdog_s * 2e6))
        args = [sys.executable, "-m", "vidpipe.supervisor.child", "--config"]
        args += [str(self.config_path), "--shard", f"{child.index}/{child.count}"]
        if self.gpus:
            args += ["--gpu", str(self.gpus[child.index])]
        # a session of its own: a terminal's Ctrl-C reaches the supervisor alone, which then
        # stops every child once (a second SIGINT would make a child exit at once)
        proc = subprocess.Popen(args, env=env, start_new_session=True)
        with self._lock:
            child.proc, child.port, child.ready_at = proc, None, None
            child.started_at = child.last_ping = time.monotonic()
            child.status, child.restart_at = "starting", None
        log.info("%s: started, pid %d", child.name, proc.pid)

    # -- running -------------------------------------------------------------------------------

    def poll(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for messages, then handle exits, restarts and watchdogs."""
        ready, _, _ = select.select([c.sock for c in self.slots], [], [], timeout_s)
        for child in self.slots:
            if child.sock in ready:
                self._read_messages(child)
        now = time.monotonic()
        for child in self.slots:
            self._check(child, now)

    def _read_messages(self, child: Child) -> None:
        while True:
            try:
                data = child.sock.recv(4096)
            except BlockingIOError:
                return
            fields = dict(
                line.split("=", 1)
                for line in data.decode(errors="replace").splitlines()
                if "=" in line
            )
            now = time.monotonic()
            with self._lock:
                if "STATUS" in fields:
                    child.status = fields["STATUS"]
                if fields.get("WATCHDOG") == "1":
                    child.last_ping = now
                port = fields.get("X_VIDPIPE_HTTP_PORT")  # sent while its models load
                if port and port.isdigit():
                    child.port = int(port)
                if fields.get("READY") == "1" and child.ready_at is None:
                    child.ready_at = child.last_ping = now
                    log.info("%s: ready after %.1f s", child.name, now - child.started_at)

    def _check(self, child: Child, now: float) -> None:
        if child.proc is None:
            if child.restart_at is not None and now >= child.restart_at and not self.stopping:
                self._spawn(child)
        elif child.proc.poll() is not None:
            self._exited(child, child.proc.returncode, now)
        elif child.ready_at is None:
            if now - child.started_at > self.start_timeout_s:
                self._dump_and_kill(child, f"not ready after {self.start_timeout_s:.0f} s")
        elif self.watchdog_s is not None and now - child.last_ping > 4 * self.watchdog_s:
            # 4 intervals: WatchdogSec, as systemd would judge the child if it were a service
            self._dump_and_kill(child, f"no watchdog ping for {now - child.last_ping:.0f} s")

    def _exited(self, child: Child, code: int, now: float) -> None:
        with self._lock:
            ran_ready_s = now - child.ready_at if child.ready_at is not None else 0.0
            child.proc, child.port, child.ready_at = None, None, None
            child.exit_codes.append(code)
        if self.stopping:
            return
        if ran_ready_s >= STABLE_AFTER_S:
            child.failures = 0
        delay_s = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**child.failures)
        child.failures += 1
        child.restarts += 1
        child.restart_at = now + delay_s
        child.status = f"restarting in {delay_s:.0f} s"
        log.error(
            "%s: exited (%s); restarting it in %.0f s (restart %d)",
            child.name,
            describe_exit(code),
            delay_s,
            child.restarts,
        )

    def _dump_and_kill(self, child: Child, why: str) -> None:
        """Ask for every thread's stack (the child's faulthandler writes them to the log),
        then kill it; its exit is handled as any other (restart with backoff)."""
        assert child.proc is not None
        log.error(
            "%s (pid %d): %s: dumping its threads, then killing it", child.name, child.proc.pid, why
        )
        try:
            child.proc.send_signal(signal.SIGUSR1)
            time.sleep(DUMP_GRACE_S)
            child.proc.kill()
        except ProcessLookupError:
            pass

    # -- reading (any thread) ------------------------------------------------------------------

    def ports(self) -> dict[int, int]:
        """``shard index -> HTTP port`` of the children that are ready now."""
        with self._lock:
            return {c.index: c.port for c in self.slots if c.port is not None and c.ready_at}

    def serving(self) -> dict[int, int]:
        """``shard index -> HTTP port`` of the children that answer HTTP: ready ones, and
        those whose cameras stream while their models load."""
        with self._lock:
            return {c.index: c.port for c in self.slots if c.port is not None}

    def all_ready(self) -> bool:
        with self._lock:
            return all(c.ready_at is not None for c in self.slots)

    def status_line(self) -> str:
        """The children's STATUS lines, in shard order."""
        with self._lock:
            return "; ".join(c.status for c in self.slots)

    # -- signals and stopping ------------------------------------------------------------------

    def forward(self, signum: int) -> None:
        """Send ``signum`` to every running child."""
        for child in self.slots:
            if child.alive:
                assert child.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signum)

    def stop(self, timeout_s: float) -> bool:
        """SIGTERM every child, wait up to ``timeout_s``, SIGKILL the rest. True if every
        child exited with code 0."""
        self.stopping = True
        running = [c for c in self.slots if c.alive]
        self.forward(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        clean = True
        for child in running:
            assert child.proc is not None
            proc = child.proc
            try:
                code = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "%s: still running %.0f s after SIGTERM: killing it", child.name, timeout_s
                )
                proc.kill()
                code = proc.wait(10)
            log.info("%s: stopped (%s)", child.name, describe_exit(code))
            clean = clean and code == 0
        for child in self.slots:
            child.sock.close()
        return clean
