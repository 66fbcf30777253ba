"""A real mosquitto broker for tests (Debian's ``mosquitto``), and a collecting subscriber.

with Mosquitto(tmp_path) as broker:       # 127.0.0.1, a free port, generated config
    broker.restart()                      # same port; persistent sessions survive
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = "/usr/bin/mosquitto_passwd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def make_certs(where: Path) -> TlsFiles:
    """A throw-away CA and a server certificate for 127.0.0.1 (openssl)."""
    where.mkdir(parents=True, exist_ok=True)

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=where)

    ssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    ssl(
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    )
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.crt",
    )
    return TlsFiles(where / "ca.crt", where / "server.crt", where / "server.key")


class Mosquitto:
    """One broker process on 127.0.0.1 with persistence in ``workdir``.

    Args:
        workdir: config, persistence and log files go here.
        users: ``{user: password}``; when given, anonymous clients are refused.
    """

    def __init__(
        self, workdir: Path, users: dict[str, str] | None = None, tls: TlsFiles | None = None
    ) -> None:
        if not Path(MOSQUITTO).is_file():
            raise RuntimeError(f"{MOSQUITTO} missing: run scripts/setup-system.sh")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.workdir / "mosquitto.log"
        self._proc: subprocess.Popen[bytes] | None = None
        lines = [
            f"listener {self.port} 127.0.0.1",
            "persistence true",
            f"persistence_location {self.workdir}/",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if tls is not None:
            lines += [f"cafile {tls.ca}", f"certfile {tls.cert}", f"keyfile {tls.key}"]
        if os.geteuid() == 0:
            # as root, mosquitto switches to the 'mosquitto' user, which cannot write the
            # persistence file into a root-owned temporary directory
            lines.append("user root")
        if users:
            pwfile = self.workdir / "passwords"
            pwfile.touch()
            for user, password in users.items():
                subprocess.run(
                    [MOSQUITTO_PASSWD, "-b", str(pwfile), user, password],
                    check=True,
                    capture_output=True,
                )
            lines += ["allow_anonymous false", f"password_file {pwfile}"]
        else:
            lines.append("allow_anonymous true")
        self.config_path = self.workdir / "mosquitto.conf"
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self) -> Mosquitto:
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.config_path)], stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log_path.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not listen on {self.port}")

    def stop(self) -> None:
        """SIGTERM (saves the persistent sessions), wait, reap. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class Received:
    topic: str
    payload: bytes
    retain: bool


class Subscriber:
    """A paho client that records every message on ``topic`` (persistent session, QoS 1)."""

    def __init__(self, port: int, topic: str = "#", client_id: str = "test-subscriber") -> None:
        self.messages: list[Received] = []
        self._lock = threading.Lock()
        self.subscribed = threading.Event()
        self._topic = topic
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_a: self.subscribed.set()
        self.client.reconnect_delay_set(1, 2)
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        if not self.subscribed.wait(10):
            raise RuntimeError("subscriber did not subscribe")

    def _on_connect(self, client: mqtt.Client, *_args: Any) -> None:
        client.subscribe(self._topic, qos=1)

    def _on_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.messages.append(Received(msg.topic, bytes(msg.payload), bool(msg.retain)))

    def on(self, topic: str) -> list[Received]:
        with self._lock:
            return [m for m in self.messages if m.topic == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
