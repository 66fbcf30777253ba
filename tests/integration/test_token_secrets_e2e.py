"""The HTTP tokens (``http.token`` reads, ``http.admin_token`` writes) never leave the config:
not in the daemon's log (DEBUG), ``/metrics``, the control API's answers (``/api/v1/config``,
``/api/v1/cameras``), its error bodies (401, 403, 422), the events, file names, nor the
argv of the daemon and of the ``vidpipe cameras`` and ``vidpipe events`` clients; whether the
tokens come from ``${file:NAME}`` (systemd credentials) or from ``${VAR}``.

The sibling of test_secrets_e2e.py (camera passwords), with the same canary checks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import DaemonProcess, free_port, wait_for
from tests.integration.test_secrets_e2e import (
    assert_files_clean,
    assert_nowhere,
    base_config,
    forms,
    process_texts,
    wait_for_camera,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ZONE = {"name": "all", "coords": "normalized", "points": [[0, 0], [1, 0], [1, 1], [0, 1]]}


def request(
    port: int, method: str, path: str, token: str | None, body: bytes | None = None
) -> tuple[int, str]:
    """(status, body text) of ``method path`` with ``Bearer token``."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def answers(port: int, reader: str, admin: str) -> dict[str, str]:
    """Every answer under test, each checked for its status on the way."""
    near_miss = admin[:-1] + ("x" if admin[-1] != "x" else "y")  # a wrong token, echoed?
    # a 422 whose body holds both tokens, in a URL and in a field of the wrong type
    bad = {"url": f"rtsp://u:{admin}@127.0.0.1:9/x", "detect_fps": reader}
    calls: dict[str, tuple[int, str, str, str | None, bytes | None]] = {
        "/metrics": (200, "GET", "/metrics", reader, None),
        "/api/v1/config": (200, "GET", "/api/v1/config", reader, None),
        "/api/v1/cameras": (200, "GET", "/api/v1/cameras", admin, None),
        "/api/v1/cameras/cam": (200, "GET", "/api/v1/cameras/cam", reader, None),
        "/api/v1/events": (200, "GET", "/api/v1/events?limit=5", reader, None),
        "401 no token": (401, "GET", "/api/v1/config", None, None),
        "401 near miss": (401, "GET", "/api/v1/cameras", near_miss, None),
        "403 reader writes": (403, "PUT", "/api/v1/cameras/door", reader, b"{}"),
        "422 bad camera": (422, "PUT", "/api/v1/cameras/door", admin, json.dumps(bad).encode()),
        "422 not JSON": (422, "PUT", "/api/v1/cameras/door", admin, f'{{"url": "{admin}'.encode()),
    }
    texts = {}
    for where, (expected, method, path, token, body) in calls.items():
        status, text = request(port, method, path, token, body)
        assert status == expected, (where, status, text)
        texts[where] = text
    assert "door" not in texts["/api/v1/cameras"]  # nothing was written
    return texts


def client(args: list[str], port: int, auth: dict[str, Any]) -> subprocess.Popen[str]:
    """``vidpipe ARGS --url ...`` with the token as ``auth`` gives it (file or environment)."""
    cmd = [sys.executable, "-m", "vidpipe.cli", *args, "--url", f"http://127.0.0.1:{port}"]
    return subprocess.Popen(
        [*cmd, *auth["args"]],
        env={**os.environ, **auth["env"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


CLIENTS = [["cameras", "list"], ["cameras", "show", "cam"], ["events", "--json", "--limit", "5"]]


def clients_against_the_daemon(port: int, auth: dict[str, Any]) -> dict[str, str]:
    texts = {}
    for args in CLIENTS:
        proc = client(args, port, auth)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (args, err)
        texts[f"vidpipe {' '.join(args)}: output"] = out + err
    return texts


def clients_caught_waiting(auth: dict[str, Any]) -> dict[str, str]:
    """Each client's argv, read from /proc while it waits on a peer that never answers (so
    that it is caught in the middle of its request, token loaded)."""
    texts = {}
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(30)
        for args in CLIENTS:
            proc = client(args, listener.getsockname()[1], auth)
            conn, _ = listener.accept()  # it has read its token and sent its request
            try:
                texts.update(
                    {f"{' '.join(args)} {k}": v for k, v in process_texts(proc.pid).items()}
                )
            finally:
                conn.close()  # the client fails: no answer
                proc.communicate(timeout=30)
    assert len(texts) >= 2 * len(CLIENTS)
    return texts


@pytest.mark.parametrize("source", ["file", "env"])
def test_http_tokens_appear_nowhere(
    assets_dir: Path,
    tmp_path: Path,
    run_daemon,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
) -> None:
    reader = f"Canary-Read-Token-{source}-0123456789"
    admin = f"Canary-Admin-Token-{source}-0123456789"
    if source == "file":
        creds = tmp_path / "credentials"
        creds.mkdir(mode=0o700)
        (creds / "read_token").write_text(reader + "\n")
        (creds / "admin_token").write_text(admin + "\n")
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
        http = {"token": "${file:read_token}", "admin_token": "${file:admin_token}"}
        (tmp_path / "client_token").write_text(admin + "\n")
        auth = {"args": ["--token-file", str(tmp_path / "client_token")], "env": {}}
    else:
        monkeypatch.setenv("VIDPIPE_TEST_READ_TOKEN", reader)
        monkeypatch.setenv("VIDPIPE_TEST_ADMIN_TOKEN", admin)
        http = {"token": "${VIDPIPE_TEST_READ_TOKEN}", "admin_token": "${VIDPIPE_TEST_ADMIN_TOKEN}"}
        auth = {"args": [], "env": {"VIDPIPE_TOKEN": admin}}
    port = free_port()
    out = tmp_path / "events.jsonl"
    config = base_config(assets_dir, tmp_path, port)
    config["http"].update(http)
    config["events"] = {"enabled": True, "path": str(tmp_path / "events.db")}
    clip = assets_dir / "videos" / "bottle-detection.mp4"  # bottles in every frame: events
    cam = {"name": "cam", "url": str(clip), "loop": True, "realtime": True, "detect_fps": 5}
    config["cameras"] = [{**cam, "zones": [ZONE]}]
    daemon: DaemonProcess = run_daemon(config)
    wait_for_camera(out, "cam")
    wait_for(lambda: '"zone"' in out.read_text(), 60, "a zone event")
    texts = answers(port, reader, admin)
    texts.update(clients_against_the_daemon(port, auth))
    texts.update(clients_caught_waiting(auth))
    texts.update(process_texts(daemon.proc.pid))
    assert daemon.terminate(30) == 0
    log = daemon.log()
    assert "DEBUG" in log and "bearer token required" in log  # the 401s were logged
    texts.update({"log": log, "events": out.read_text(), "config file": config_text(daemon)})
    secrets = [*forms(reader), *forms(admin)]
    assert_nowhere(texts, secrets)
    assert_files_clean(tmp_path, secrets)


def config_text(daemon: DaemonProcess) -> str:
    text = daemon.config_path.read_text()
    assert "${" in text  # the tokens are references there, never values
    return text
