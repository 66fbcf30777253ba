"""Camera credentials never leave the config: logs (DEBUG), FFmpeg's stderr, metrics, events."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, scrape, wait_for
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

USER = "cam.user"
GOOD = "Canary P@ss:1"
WRONG = "Wrong-Canary@pw"


def forms(secret: str) -> list[str]:
    return [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret)]


def test_credentials_appear_nowhere(assets_dir: Path, tmp_path: Path, run_daemon) -> None:
    port = free_port()
    out = tmp_path / "events.jsonl"
    with RtspServer(assets_dir / "videos", loop=True, user=USER, password=GOOD) as server:
        config = {
            "model": {
                "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                "labels": str(assets_dir / "models" / "coco80.txt"),
            },
            "logging": {"level": "DEBUG"},
            "http": {"port": port},
            "capture": {"backoff_initial_s": 0.2, "backoff_max_s": 1.0},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [
                {
                    "name": "good",
                    "url": server.url("one-by-one-person-detection", USER, GOOD),
                },
                {
                    "name": "wrong",
                    "url": server.url("one-by-one-person-detection", USER, WRONG),
                },
            ],
        }
        daemon = run_daemon(config)
        wait_for(lambda: out.exists() and out.stat().st_size > 0, 60, "results from 'good'")
        wait_for(
            lambda: daemon.log().count("camera wrong: unauthorized") >= 2,
            30,
            "two logged reconnects of camera 'wrong'",
        )
        metrics = scrape(port)
        cmdline = Path(f"/proc/{daemon.proc.pid}/cmdline").read_bytes().decode(errors="replace")
        children = Path(f"/proc/{daemon.proc.pid}/task").iterdir()
        assert list(children)  # the process is alive while we look
        assert daemon.terminate(30) == 0
    log = daemon.log()
    assert "cam.user:***@" in log  # the URL is logged, masked
    texts = {"log": log, "metrics": metrics, "events": out.read_text(), "cmdline": cmdline}
    for where, text in texts.items():
        for secret in (*forms(GOOD), *forms(WRONG)):
            assert secret not in text, f"{secret!r} leaked into {where}"
    for name in os.listdir(tmp_path):
        assert GOOD not in name and WRONG not in name
