"""systemd's notify protocol end to end: a real AF_UNIX datagram socket bound by the test,
the real daemon with real OpenVINO and a real RTSP camera."""

from __future__ import annotations

import signal
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.precision import with_precision
from tests.rtsp import RtspServer
from vidpipe.config import Config
from vidpipe.daemon import Daemon
from vidpipe.notify import Notifier, Reporter
from vidpipe.schedule.scheduler import Scheduler
from vidpipe.types import Completion

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


class NotifyListener:
    """Binds a datagram socket like systemd does and records every message in order."""

    def __init__(self, path: Path, on_message: Callable[[str], None] | None = None) -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._on_message = on_message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536).decode()
            except TimeoutError:
                continue
            if self._on_message is not None:
                self._on_message(data)
            self.messages.append(data)

    def index(self, key: str, start: int = 0) -> int | None:
        """Index of the first message from ``start`` on with the line ``key``."""
        for i in range(start, len(self.messages)):
            if key in self.messages[i].split("\n"):
                return i
        return None

    def count(self, key: str) -> int:
        return sum(key in m.split("\n") for m in list(self.messages))

    def statuses(self) -> list[str]:
        return [
            line[len("STATUS=") :]
            for m in list(self.messages)
            for line in m.split("\n")
            if line.startswith("STATUS=")
        ]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def model_section(assets_dir: Path) -> dict[str, str]:
    return {
        "path": str(assets_dir / "models" / "yolox_nano.onnx"),
        "labels": str(assets_dir / "models" / "coco80.txt"),
    }


def http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return -1


def test_notify_sequence_ready_watchdog_reload_stopping(
    assets_dir: Path, tmp_path: Path, run_daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    ready_probe: list[int] = []

    serving_probe: list[int] = []

    def on_message(msg: str) -> None:
        # READY=1 promises the HTTP port is bound: probe it the moment READY arrives
        if "READY=1" in msg.split("\n") and not ready_probe:
            ready_probe.append(http_status(port, "/readyz"))
        # the message before it, while the model loads: the port answers already
        if f"X_VIDPIPE_HTTP_PORT={port}" in msg.split("\n") and not serving_probe:
            serving_probe.append(http_status(port, "/metrics"))

    listener = NotifyListener(tmp_path / "notify.sock", on_message)
    monkeypatch.setenv("NOTIFY_SOCKET", listener.path)
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")  # a ping every second
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    try:
        with RtspServer(assets_dir / "videos", loop=True) as server:
            daemon = run_daemon(
                {
                    "model": model_section(assets_dir),
                    "http": {"port": port},
                    "cameras": [
                        {"name": "walkway", "url": server.url("one-by-one-person-detection")}
                    ],
                }
            )
            wait_for(lambda: listener.index("READY=1") is not None, 120, "READY=1")
            wait_for(lambda: listener.count("WATCHDOG=1") >= 2, 60, "two watchdog pings")
            wait_for(
                lambda: any(s.startswith("1/1 cameras streaming") for s in listener.statuses()),
                60,
                "a STATUS line with the camera streaming",
            )
            daemon.proc.send_signal(signal.SIGHUP)  # same file: a reload that changes nothing
            wait_for(lambda: listener.index("RELOADING=1") is not None, 30, "RELOADING=1")
            reloading = listener.index("RELOADING=1")
            assert reloading is not None
            wait_for(
                lambda: listener.index("READY=1", reloading + 1) is not None,
                60,
                "READY=1 after the reload",
            )
            code = daemon.terminate(60)
        log = daemon.log()
    finally:
        listener.close()
    assert code == 0, log[-3000:]
    assert ready_probe == [200], "READY=1 came before /readyz answered 200"
    assert serving_probe == [200], "the port was announced before /metrics answered"
    msgs = listener.messages
    first_ready = listener.index("READY=1")
    # before READY=1 only the start's status: the cameras stream, the model loads
    assert first_ready == 1, f"not one message before READY=1: {msgs[:3]}"
    assert "STATUS=starting: cameras streaming, models loading" in msgs[0].split("\n"), msgs[0]
    first_ping = listener.index("WATCHDOG=1")
    reloading = listener.index("RELOADING=1")
    assert first_ping is not None and reloading is not None
    ready_again = listener.index("READY=1", reloading + 1)
    stopping = listener.index("STOPPING=1")
    assert ready_again is not None and stopping is not None
    assert first_ready < first_ping < reloading < ready_again < stopping, msgs
    assert any(line.startswith("MONOTONIC_USEC=") for line in msgs[reloading].split("\n"))
    assert "reload applied: 1 camera(s) untouched" in log
    assert stopping == max(i for i, m in enumerate(msgs) if "STATUS=" in m or "READY=1" in m)


@contextmanager
def frozen_inference_pool(engine: Scheduler) -> Iterator[None]:
    """Test-only hook: every inference completion callback blocks until the block exits.

    This is what a hung device looks like from the pipeline: requests were submitted and
    never complete, their slots stay busy, frames wait. (SIGSTOP cannot stop one thread.)
    """
    gate = threading.Event()
    real_on_done = engine._on_done

    def blocked_on_done(completion: Completion) -> None:
        gate.wait()
        real_on_done(completion)

    engine._on_done = blocked_on_done  # type: ignore[method-assign]
    try:
        yield
    finally:
        engine._on_done = real_on_done  # type: ignore[method-assign]
        gate.set()


def test_hung_inference_pool_stops_watchdog_pings(assets_dir: Path, tmp_path: Path) -> None:
    listener = NotifyListener(tmp_path / "notify.sock")
    with RtspServer(assets_dir / "videos", loop=True) as server:
        cfg = Config.model_validate(
            with_precision(
                {
                    "model": model_section(assets_dir),
                    "http": {"port": 0},
                    "cameras": [{"name": "belt", "url": server.url("bottle-detection")}],
                }
            )
        )
        daemon = Daemon(cfg)
        daemon.health.stall_after_s = 3.0  # the default (30 s and more) would make this slow
        reporter = Reporter(Notifier(listener.path), daemon.health, daemon.status_line, 0.5)
        try:
            daemon.start()
            reporter.start()
            wait_for(lambda: listener.count("WATCHDOG=1") >= 2, 60, "pings while healthy")
            assert daemon.scheduler is not None
            with frozen_inference_pool(daemon.scheduler):
                wait_for(lambda: not daemon.health.check().ok, 60, "the health verdict to fail")
                pings, ticks = listener.count("WATCHDOG=1"), reporter.ticks
                wait_for(lambda: reporter.ticks >= ticks + 4, 30, "four watchdog intervals")
                assert listener.count("WATCHDOG=1") <= pings + 1  # one may have been in flight
                frozen_pings = listener.count("WATCHDOG=1")
                wait_for(lambda: reporter.ticks >= ticks + 8, 30, "four more intervals")
                assert listener.count("WATCHDOG=1") == frozen_pings, "pinged while hung"
                assert any(s.startswith("stalled: no inference") for s in listener.statuses())
                # the container HEALTHCHECK and the liveness probe see the same verdict
                assert daemon.http_port is not None
                assert http_status(daemon.http_port, "/healthz") == 503
            wait_for(
                lambda: listener.count("WATCHDOG=1") > frozen_pings,
                60,
                "pings to resume once inference completes again",
            )
            assert http_status(daemon.http_port, "/healthz") == 200
        finally:
            reporter.stop()
            clean = daemon.shutdown()
            listener.close()
    assert clean


def test_no_ready_when_the_http_port_cannot_be_bound(
    assets_dir: Path, tmp_path: Path, run_daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = NotifyListener(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", listener.path)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        daemon = run_daemon(
            {
                "model": model_section(assets_dir),
                "http": {"port": busy.getsockname()[1]},
                "cameras": [],
            }
        )
        code = daemon.proc.wait(120)
        wait_for(lambda: listener.statuses(), 10, "a STATUS line")
    finally:
        busy.close()
        listener.close()
    assert code != 0
    assert listener.index("READY=1") is None, listener.messages
    assert listener.statuses()[0].startswith("start-up failed: "), listener.statuses()
