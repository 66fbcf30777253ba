"""The control API on a real daemon (real OpenVINO, the real model, looping file cameras, real
HTTP): changes apply like a SIGHUP (only the camera changed is touched), persist as drop-ins
that a restart runs, and are guarded by ETags and the admin token.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, metric, wait_for
from tests.integration.test_daemon_e2e import read_jsonl
from tests.integration.test_live_reload import seqs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ADMIN = "Admin-Token-0123456789abcdef"
READER = "Reader-Token-0123456789abcdef"


def call(
    port: int, method: str, path: str, body: Any = None, token: str | None = ADMIN, **headers: str
) -> tuple[int, dict[str, str], Any]:
    """``method /api/v1path``: (status, headers, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1{path}", data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in headers.items():
        req.add_header(k.replace("_", "-"), v)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            raw, status, head = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, head = exc.read(), exc.code, dict(exc.headers)
    return status, head, json.loads(raw) if raw else None


def scrape(port: int) -> str:
    """``/metrics`` with the read token; "" while the daemon is still starting."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    req.add_header("Authorization", f"Bearer {READER}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def base_config(assets_dir: Path, port: int, out: Path) -> dict[str, Any]:
    return {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "scheduler": {"max_frame_age_ms": 60000},
        "http": {"port": port, "token": READER, "admin_token": ADMIN},
        "sinks": [{"type": "jsonl", "path": str(out), "queue_size": 100000}],
    }


def file_camera(assets_dir: Path, name: str, **extra: Any) -> dict[str, Any]:
    clip = assets_dir / "videos" / "bottle-detection.mp4"
    return {"name": name, "url": str(clip), "loop": True, **extra}


def test_twenty_cameras_added_through_the_api_touch_none_of_the_four(
    assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    port, out = free_port(), tmp_path / "results.jsonl"
    four = [file_camera(assets_dir, f"main-{i}") for i in range(4)]
    daemon = run_daemon({**base_config(assets_dir, port, out), "cameras": four})
    names = [c["name"] for c in four]
    wait_for(lambda: scrape(port), 120, "the daemon to serve")

    def counts() -> dict[str, list[int]]:
        return seqs(read_jsonl(out)) if out.exists() else {}

    wait_for(lambda: all(len(counts().get(n, [])) >= 5 for n in names), 120, "the four")
    before = scrape(port)
    captured = {n: metric(before, "vidpipe_frames_captured_total", camera=n) for n in names}
    for i in range(20):  # realtime and slow: 20 more cameras, lightly loaded
        cam = file_camera(assets_dir, f"api-{i:02d}", realtime=True, detect_fps=1)
        status, head, view = call(port, "PUT", f"/cameras/api-{i:02d}", cam)
        assert status == 201, view
        assert head["ETag"] == view["etag"] and view["source"] == "api"
    assert daemon.log().count("control API: ") == 20
    assert "applied: start api-19; 23 camera(s) untouched" in daemon.log()
    after = scrape(port)
    for n in names:
        assert metric(after, "vidpipe_camera_reconnects_total", camera=n) == 0, n
        assert metric(after, "vidpipe_frames_dropped_total", camera=n) == 0, n
        assert metric(after, "vidpipe_frames_captured_total", camera=n) > captured[n], n
        assert daemon.log().count(f"camera {n}: streaming") == 1, f"{n} was reopened"
    status, _, listing = call(port, "GET", "/cameras", token=READER)
    assert status == 200 and len(listing["cameras"]) == 24
    code = daemon.terminate(60)
    assert code == 0, daemon.log()[-3000:]
    rows = counts()
    for n in names:  # backpressure: every frame a file camera decoded was inferred, in order
        s = rows[n]
        assert s == list(range(s[0], s[0] + len(s))), f"{n}: a gap in its frame sequence"
