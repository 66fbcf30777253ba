"""The control API on a real daemon (real OpenVINO, the real model, looping file cameras, real
HTTP): changes apply like a SIGHUP (only the camera changed is touched), persist as drop-ins
that a restart runs, and are guarded by ETags and the admin token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def scrape(port: int, token: str = READER, timeout_s: float = 10.0) -> str:
    """``/metrics`` with ``token``; "" while the daemon is still starting."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
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


def test_changes_persist_as_dropins_guarded_by_etags_and_tokens(
    assets_dir: Path, tmp_path: Path, run_daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = "Cam-Canary-Pass-4242"
    monkeypatch.setenv("CAM_PASSWORD", password)  # the daemon's environment: ${CAM_PASSWORD}
    port, out = free_port(), tmp_path / "results.jsonl"
    config = {**base_config(assets_dir, port, out), "cameras": [file_camera(assets_dir, "main")]}
    daemon = run_daemon(config)
    wait_for(lambda: scrape(port), 120, "the daemon to serve")
    rtsp = {"name": "door", "url": "rtsp://viewer:${CAM_PASSWORD}@127.0.0.1:9/door"}
    # auth: no token 401, the read token 403, and nothing is written
    assert call(port, "PUT", "/cameras/door", rtsp, token=None)[0] == 401
    status, _, err = call(port, "PUT", "/cameras/door", rtsp, token=READER)
    assert status == 403 and "admin_token" in err["error"]
    assert not (tmp_path / "cameras.d").exists()
    # a bad body: 422 with the loader's path-style message, nothing changes
    bad = {"name": "door", "url": "x.mp4", "zones": [{"name": "z", "points": [[0, 0]]}]}
    status, _, err = call(port, "PUT", "/cameras/door", bad)
    assert status == 422 and any(
        p.startswith("request body: cameras[name=door].zones[0].points") for p in err["problems"]
    ), err
    assert call(port, "PUT", "/cameras/door", {**rtsp, "name": "other"})[0] == 422
    assert call(port, "GET", "/cameras/nope", token=READER)[0] == 404
    status, _, err = call(port, "DELETE", "/cameras/main")
    assert status == 409 and str(daemon.config_path) in err["error"]
    # create, then pause: the drop-in keeps the reference, never the password
    status, head, view = call(port, "PUT", "/cameras/door", rtsp)
    assert status == 201 and view["config"]["url"] == "rtsp://viewer:***@127.0.0.1:9/door"
    dropin = tmp_path / "cameras.d" / "door.yaml"
    assert "${CAM_PASSWORD}" in dropin.read_text() and password not in dropin.read_text()
    status, _, err = call(port, "POST", "/cameras/door/pause", If_Match='"stale"')
    assert status == 412, err
    status, _, view = call(port, "POST", "/cameras/door/pause", If_Match=head["ETag"])
    assert status == 200 and view["paused"] and view["state"] == "paused"
    assert metric(scrape(port), "vidpipe_camera_state", camera="door", state="paused") == 1
    # two clients change two cameras at once: both succeed
    results: list[int] = []

    def add(name: str) -> None:
        results.append(call(port, "PUT", f"/cameras/{name}", file_camera(assets_dir, name))[0])

    threads = [threading.Thread(target=add, args=(n,)) for n in ("yard", "gate")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == [201, 201]
    assert call(port, "PATCH", "/cameras/gate", {"detect_fps": 2})[2]["config"]["detect_fps"] == 2
    assert call(port, "DELETE", "/cameras/yard")[0] == 204
    # the CLI is a client of the same API; its token comes from the environment, not argv
    env = {**os.environ, "VIDPIPE_TOKEN": ADMIN}
    url = ["--url", f"http://127.0.0.1:{port}"]
    cli = [sys.executable, "-m", "vidpipe.cli", "cameras"]
    done = subprocess.run(
        [*cli, "set", "gate", "detect_fps=3", *url], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and json.loads(done.stdout)["config"]["detect_fps"] == 3
    done = subprocess.run([*cli, "list", *url], env=env, capture_output=True, text=True)
    assert "door" in done.stdout and "paused" in done.stdout, done.stderr
    done = subprocess.run([*cli, "rm", "main", *url], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "defined in" in done.stderr
    assert not (tmp_path / "cameras.d" / "yard.yaml").exists()
    _, _, before = call(port, "GET", "/config", token=READER)
    for secret in (password, ADMIN, READER):
        assert secret not in json.dumps(before)
    openapi = call(port, "GET", "/openapi.json", token=READER)[2]
    assert openapi["openapi"].startswith("3.1") and "CameraConfig" in json.dumps(openapi)
    assert daemon.terminate(60) == 0
    log = daemon.log()
    for secret in (password, ADMIN, READER):
        assert secret not in log
    # a restart from the same file runs exactly what the API last said
    again = run_daemon(config)
    wait_for(lambda: scrape(port), 120, "the restarted daemon to serve")
    _, _, after = call(port, "GET", "/config", token=READER)
    assert after == before
    assert yaml.safe_load(again.config_path.read_text())["cameras"] == config["cameras"]
    assert again.terminate(60) == 0
