"""Credentials never leave the config: logs (DEBUG), exception text, metrics, events, snapshot
file names, process arguments, rejected reloads; also when they come from ``${VAR}`` or
``${file:NAME}``.

Each test runs the real daemon against a real GStreamer RTSP server that requires basic auth,
with one camera that has the right password (so its URL is used for real), one with a wrong
password and one whose host refuses connections (so errors about the URL are logged).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import DaemonProcess, free_port, scrape, wait_for
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLIP = "one-by-one-person-detection"  # a person in most frames: snapshots get written


def forms(secret: str, user: str | None = None) -> list[str]:
    """Every spelling of ``secret`` that would count as a leak (and the Basic auth header)."""
    out = [
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
        urllib.parse.unquote(secret),
    ]
    if user is not None:
        for u, p in ((user, secret), (urllib.parse.unquote(user), urllib.parse.unquote(secret))):
            out.append(base64.b64encode(f"{u}:{p}".encode()).decode())
    return [f for f in out if f]


def assert_nowhere(texts: dict[str, str], secrets: list[str]) -> None:
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"{secret!r} leaked into {where}"


def rtsp_url(port: int, user: str, password: str, *, encode: bool, stem: str = CLIP) -> str:
    """``rtsp://user:password@127.0.0.1:port/stem``, percent-encoded or written as is."""
    if encode:
        user, password = urllib.parse.quote(user, safe=""), urllib.parse.quote(password, safe="")
    return f"rtsp://{user}:{password}@127.0.0.1:{port}/{stem}"


def descendants(pid: int) -> list[int]:
    """Every process whose chain of parents leads to ``pid`` (walks /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def process_texts(pid: int) -> dict[str, str]:
    """cmdline of ``pid`` and of every process it started, and its threads' names."""
    texts: dict[str, str] = {}
    for p in [pid, *descendants(pid)]:
        try:
            raw = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        texts[f"/proc/{p}/cmdline"] = raw.replace(b"\0", b" ").decode(errors="replace")
    comms = [t / "comm" for t in Path(f"/proc/{pid}/task").iterdir()]
    texts["thread names"] = " ".join(c.read_text() for c in comms if c.exists())
    return texts


def base_config(assets_dir: Path, tmp_path: Path, http_port: int) -> dict[str, Any]:
    return {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "logging": {"level": "DEBUG"},
        "http": {"port": http_port},
        "capture": {"backoff_initial_s": 0.2, "backoff_max_s": 1.0, "open_timeout_ms": 3000},
        "sinks": [
            {"type": "jsonl", "path": str(tmp_path / "events.jsonl")},
            {"type": "snapshot", "dir": str(tmp_path / "snaps"), "min_interval_s": 0.2},
        ],
    }


def cameras_in(out: Path) -> set[str]:
    """The cameras that have results in the JSONL file (a partly written last line is skipped)."""
    if not out.exists():
        return set()
    found = set()
    for line in out.read_text().splitlines():
        try:
            found.add(json.loads(line)["camera"])
        except ValueError:
            continue
    return found


def wait_for_camera(out: Path, camera: str) -> None:
    wait_for(lambda: camera in cameras_in(out), 90, f"results from camera {camera!r}")


def wait_for_failures(daemon: DaemonProcess, camera: str, reason: str) -> None:
    wait_for(
        lambda: daemon.log().count(f"camera {camera}: {reason}") >= 2,
        60,
        f"two logged {reason} reconnects of camera {camera!r}",
    )


def assert_files_clean(root: Path, secrets: list[str]) -> int:
    """No file or directory name under ``root`` holds a secret; returns how many were seen."""
    names = [p.name for p in root.rglob("*")]
    assert_nowhere({"file names": "\n".join(names)}, secrets)
    return len(names)


# ------------------------------------------------------------------------ URL forms

FORMS = [
    # (user, password, percent-encoded in the URL)
    pytest.param("cam.user", "Canary P@ss:1", True, id="dot-user_space-at-colon-encoded"),
    pytest.param("ops@corp", "Canary:Col:on", True, id="at-user-%40_colon-encoded"),
    pytest.param("admin", "Canary@At@pw", False, id="raw-at-in-password"),
    pytest.param("admin", "Canary:Raw:pw", False, id="raw-colon-in-password"),
    pytest.param("first.last", "Canary%Pct+pw", True, id="percent-plus-encoded"),
    pytest.param("ops@corp", "Canary-Raw@pw", False, id="raw-at-in-user-and-password"),
    pytest.param("admin", "Canary Raw Space", False, id="raw-space-in-password"),
]


@pytest.mark.parametrize(("user", "password", "encode"), FORMS)
def test_camera_password_appears_nowhere(
    assets_dir: Path, tmp_path: Path, run_daemon, user: str, password: str, encode: bool
) -> None:
    wrong = "Wrong-" + password
    port = free_port()
    out = tmp_path / "events.jsonl"
    with RtspServer(assets_dir / "videos", loop=True, user=user, password=password) as server:
        config = base_config(assets_dir, tmp_path, port)
        config["cameras"] = [
            {
                "name": "good",
                "url": rtsp_url(server.port, user, password, encode=encode),
                "detect_fps": 5,
            },
            {"name": "wrong", "url": rtsp_url(server.port, user, wrong, encode=encode)},
            # nothing listens there: the exception text of a refused connection is logged
            {"name": "unreach", "url": rtsp_url(free_port(), user, password, encode=encode)},
        ]
        daemon = run_daemon(config)
        wait_for_camera(out, "good")  # the password works, so the URL was really used
        wait_for(lambda: any((tmp_path / "snaps").rglob("*.jpg")), 60, "a snapshot file")
        wait_for_failures(daemon, "wrong", "unauthorized")
        wait_for_failures(daemon, "unreach", "connection_refused")
        metrics = scrape(port)
        probes = {path: _get(port, path, None)[1] for path in ("/healthz", "/readyz")}
        procs = process_texts(daemon.proc.pid)
        assert list(procs) == [f"/proc/{daemon.proc.pid}/cmdline", "thread names"], (
            "the daemon starts no processes; if it ever does, their cmdlines are checked here"
        )
        assert daemon.terminate(30) == 0
    log = daemon.log()
    assert "DEBUG" in log  # the level under test was really on
    assert ":***@127.0.0.1" in log  # URLs are logged, masked
    assert 'vidpipe_camera_up{camera="good"} 1.0' in metrics
    assert "Canary" not in config["cameras"][0]["url"].split("@")[-1]  # sanity: pw in userinfo
    texts = {"log": log, "metrics": metrics, "events": out.read_text(), **probes, **procs}
    assert_nowhere(texts, [*forms(password, user), *forms(wrong, user)])
    assert assert_files_clean(tmp_path, [*forms(password), *forms(wrong)]) > 3


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("check", {"bogus_key": 1}),  # an unknown key next to the URL
        ("check", {"realtime": True}),  # a camera-level error about the camera with the URL
        ("run", {"detect_fps": "fast"}),  # a wrong type, through `vidpipe run`
        ("check", None),  # a YAML syntax error on the token's own line (unterminated quote)
    ],
    ids=["check-unknown-key", "check-camera-error", "run-wrong-type", "check-yaml-syntax"],
)
def test_password_not_in_config_errors(
    tmp_path: Path, command: str, extra: dict[str, Any] | None
) -> None:
    """One camera per URL form, each with the same mistake; the CLI's error text is clean."""
    token = "Token-Canary-0123456789"
    urls = [rtsp_url(554, u, pw, encode=enc) for u, pw, enc in (p.values for p in FORMS)]
    if extra is None:
        # the token is no URL: only our error format (no quoted source line) keeps it out
        text = f'cameras:\n  - name: cam\n    url: "{urls[0]}"\nhttp:\n  token: "{token}\n'
    else:
        cameras = [{"name": f"cam{i}", "url": url, **extra} for i, url in enumerate(urls)]
        config = {"model": {"path": "/m.onnx"}, "http": {"token": token}, "cameras": cameras}
        text = yaml.safe_dump(config)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", command, "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    expected = "invalid YAML" if extra is None else f"cameras[{len(urls) - 1}]"
    assert expected in proc.stderr
    secrets = [s for p in FORMS for s in forms(p.values[1], p.values[0])]
    assert_nowhere({"stdout": proc.stdout, "stderr": proc.stderr}, [*secrets, *forms(token)])


# ------------------------------------------------------------------------ secrets outside


def test_secrets_from_environment_and_credentials_directory(
    assets_dir: Path, tmp_path: Path, run_daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``${VAR}`` and ``${file:NAME}`` (systemd LoadCredential=) work end to end and leak not."""
    file_pw, env_pw = "Canary File@pw 1", "Canary-Env-pw-2"
    token = "Canary-Http-Token-0123456789"
    creds = tmp_path / "credentials"
    creds.mkdir(mode=0o700)
    (creds / "cam_pw").write_text(urllib.parse.quote(file_pw, safe="") + "\n")
    (creds / "http_token").write_text(token + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.setenv("VIDPIPE_TEST_CAM_PW", env_pw)
    monkeypatch.setenv("VIDPIPE_TEST_CAM_USER", "env.user")
    port = free_port()
    out = tmp_path / "events.jsonl"
    videos = assets_dir / "videos"
    with (
        RtspServer(videos, loop=True, user="file.user", password=file_pw) as file_server,
        RtspServer(videos, loop=True, user="env.user", password=env_pw) as env_server,
    ):
        config = base_config(assets_dir, tmp_path, port)
        config["http"]["token"] = "${file:http_token}"
        config["cameras"] = [
            {
                "name": "from-file",
                "url": f"rtsp://file.user:${{file:cam_pw}}@127.0.0.1:{file_server.port}/{CLIP}",
                "detect_fps": 3,
            },
            {
                "name": "from-env",
                "url": "rtsp://${VIDPIPE_TEST_CAM_USER}:${VIDPIPE_TEST_CAM_PW}"
                f"@127.0.0.1:{env_server.port}/{CLIP}",
                "detect_fps": 3,
            },
        ]
        daemon = run_daemon(config)
        wait_for_camera(out, "from-file")
        wait_for_camera(out, "from-env")
        refused = _get(port, "/metrics", "Bearer wrong-token-0123456789")
        missing = _get(port, "/metrics", None)
        metrics = _get(port, "/metrics", f"Bearer {token}")
        procs = process_texts(daemon.proc.pid)
        config_text = daemon.config_path.read_text()
        rejected_reloads(daemon, config, env_server.port)
        assert daemon.terminate(30) == 0
    assert refused[0] == 401 and missing[0] == 401
    assert metrics[0] == 200 and "vidpipe_frames_inferred" in metrics[1]
    assert "bearer token required" in daemon.log()
    assert "${file:cam_pw}" in config_text  # the secrets were never in the file
    texts = {
        "log": daemon.log(),
        "metrics": metrics[1],
        "401 body": refused[1],
        "events": out.read_text(),
        "config": config_text,
        **procs,
    }
    secrets = [*forms(file_pw, "file.user"), *forms(env_pw, "env.user"), *forms(token)]
    secrets += [*forms(RELOAD_PW, "admin"), *forms(RELOAD_TOKEN)]
    assert_nowhere(texts, secrets)
    assert_files_clean(tmp_path, [*forms(file_pw), *forms(env_pw), *forms(token)])


RELOAD_PW = "Canary Reload@pw"
RELOAD_TOKEN = "Canary-Reload-Token-0123456789"


def rejected_reloads(daemon: DaemonProcess, config: dict[str, Any], rtsp_port: int) -> None:
    """Two bad configs on SIGHUP: a new camera's URL next to a mistake, then a syntax error on
    a new token's line. The daemon logs each rejection, and keeps running."""
    added = {"name": "added", "url": rtsp_url(rtsp_port, "admin", RELOAD_PW, encode=False)}
    bad = {**config, "cameras": [*config["cameras"], {**added, "detect_fsp": 1}]}
    daemon.config_path.write_text(yaml.safe_dump(bad))
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload rejected" in daemon.log(), 60, "the first reload's rejection")
    assert "cameras[2].detect_fsp" in daemon.log()
    daemon.config_path.write_text(f'http:\n  token: "{RELOAD_TOKEN}\n')
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: daemon.log().count("reload rejected") == 2, 60, "the second rejection")
    assert "invalid YAML" in daemon.log()
    assert daemon.proc.poll() is None


def _get(port: int, path: str, authorization: str | None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_short_token_config_error_does_not_show_it(tmp_path: Path) -> None:
    token = "Canary-Short"
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "tok").write_text(token)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"model": {"path": "/m"}, "http": {"token": "${file:tok}"}}))
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "CREDENTIALS_DIRECTORY": str(creds)},
    )
    assert proc.returncode == 2
    assert "http.token (line" in proc.stderr and "16 characters" in proc.stderr
    assert token not in proc.stderr + proc.stdout
