"""The sd_notify protocol against real AF_UNIX datagram sockets bound by the test."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vidpipe.health import Health
from vidpipe.notify import Notifier, Reporter, watchdog_interval_s


def recv_all(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


@pytest.fixture
def path_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    yield path, sock
    sock.close()


@pytest.fixture
def abstract_socket() -> Iterator[tuple[str, socket.socket]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"vidpipe-test-{os.getpid()}-{time.monotonic_ns()}"
    sock.bind("\0" + name)
    yield "@" + name, sock
    sock.close()


@pytest.mark.parametrize("kind", ["path_socket", "abstract_socket"])
def test_messages_arrive_as_datagrams(kind: str, request: pytest.FixtureRequest) -> None:
    address, sock = request.getfixturevalue(kind)
    n = Notifier.from_env({"NOTIFY_SOCKET": address})
    assert n.enabled
    assert n.ready("2/3 cameras streaming, 40 fps")
    assert n.watchdog()
    assert n.reloading()
    assert n.stopping()
    got = recv_all(sock)
    assert got[0] == "READY=1\nSTATUS=2/3 cameras streaming, 40 fps"
    assert got[1] == "WATCHDOG=1"
    lines = got[2].split("\n")
    assert lines[0] == "RELOADING=1" and lines[1].startswith("MONOTONIC_USEC=")
    usec = int(lines[1].split("=")[1])
    now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert 0 <= now_usec - usec < 60_000_000  # CLOCK_MONOTONIC, not wall time
    assert got[3].startswith("STOPPING=1\n")
    n.close()


def test_status_is_one_line(path_socket: tuple[str, socket.socket]) -> None:
    address, sock = path_socket
    n = Notifier(address)
    n.status("line one\nREADY=1 injected")
    assert recv_all(sock) == ["STATUS=line one READY=1 injected"]


def test_without_socket_nothing_is_sent() -> None:
    n = Notifier.from_env({})
    assert not n.enabled and not n.ready() and not n.watchdog()


def test_unreachable_socket_is_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    n = Notifier(str(tmp_path / "nobody-listens"))
    assert not n.watchdog()
    assert not n.watchdog()
    assert sum("cannot notify" in r.message for r in caplog.records) == 1  # logged once


def test_relative_socket_path_is_ignored() -> None:
    assert not Notifier("relative/path").enabled


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}, 1.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}, None),  # meant for another process
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
    ],
)
def test_watchdog_interval(env: dict[str, str], expected: float | None) -> None:
    assert watchdog_interval_s(env) == expected


def test_reporter_pings_only_while_inference_progresses(
    path_socket: tuple[str, socket.socket],
) -> None:
    address, sock = path_socket
    health = Health(stall_after_s=10.0)
    state = {"last": time.monotonic(), "pending": 3}
    health.attach(lambda: (state["last"], state["pending"]))
    reporter = Reporter(Notifier(address), health, lambda: "1/1 cameras streaming, 9 fps", 1.0)
    reporter.tick()
    assert recv_all(sock) == ["WATCHDOG=1", "STATUS=1/1 cameras streaming, 9 fps"]
    state["last"] = time.monotonic() - 60  # work pending, nothing completed for a minute
    reporter.tick()
    got = recv_all(sock)
    assert "WATCHDOG=1" not in got
    assert got == ["STATUS=stalled: no inference completed for 60 s with 3 frame(s) pending"]
    state["pending"] = 0  # every camera in backoff, nothing to do: alive
    reporter.tick()
    assert recv_all(sock)[0] == "WATCHDOG=1"
    reporter.pause()  # a reload owns STATUS: pings go on, status waits
    reporter.tick()
    assert recv_all(sock) == ["WATCHDOG=1"]
    assert reporter.pings == 3
