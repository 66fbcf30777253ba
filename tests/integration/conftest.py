"""Helpers for tests that run the real daemon as a process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    predicate: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.2
) -> object:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


class DaemonProcess:
    """``vidpipe run`` in a subprocess with its stderr captured to a file."""

    def __init__(self, config: dict, workdir: Path) -> None:
        self.config_path = workdir / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = workdir / "daemon.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vidpipe.cli", "run", "--config", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self._log.close()


@pytest.fixture
def run_daemon(tmp_path: Path) -> Iterator[Callable[[dict], DaemonProcess]]:
    started: list[DaemonProcess] = []

    def start(config: dict) -> DaemonProcess:
        d = DaemonProcess(config, tmp_path)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.terminate(10)
