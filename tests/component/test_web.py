"""The daemon's HTTP server over real sockets: metrics, probes, bearer token, loopback."""

from __future__ import annotations

import hmac
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from vidpipe.config import HttpConfig
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.web import WebServer, build_app
from vidpipe.web import server as web_server

TOKEN = "s3cret-token-0123456789"


def get(port: int, path: str, token: str | None = None) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers)


@pytest.fixture
def served() -> Iterator[tuple[WebServer, Metrics, Health, list[tuple[float, int]]]]:
    metrics = Metrics()
    metrics.camera("front").captured.inc(3)
    health = Health(stall_after_s=5.0)
    probe: list[tuple[float, int]] = []
    srv = WebServer(build_app(metrics, health, token=TOKEN), "127.0.0.1", 0)
    srv.start()
    try:
        yield srv, metrics, health, probe
    finally:
        srv.stop()


def test_metrics_need_the_token_and_probes_do_not(served) -> None:
    srv, _metrics, _health, _ = served
    status, body, headers = get(srv.port, "/metrics")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN not in body
    assert get(srv.port, "/metrics", "wrong-token-0123456789")[0] == 401
    assert get(srv.port, "/metrics", TOKEN[:-1])[0] == 401  # a prefix is not enough
    status, body, _ = get(srv.port, "/metrics", TOKEN)
    assert status == 200
    assert 'vidpipe_frames_captured_total{camera="front"} 3.0' in body
    assert get(srv.port, "/healthz")[0] == 200
    assert get(srv.port, "/nope", TOKEN)[0] == 404


def test_token_comparison_is_constant_time(served, monkeypatch) -> None:
    srv, *_ = served
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(web_server.hmac, "compare_digest", spy)
    assert get(srv.port, "/metrics", "x" * 20)[0] == 401
    assert get(srv.port, "/metrics", TOKEN)[0] == 200
    assert len(calls) == 2


def test_readyz_follows_start_and_stop(served) -> None:
    srv, _m, health, _ = served
    assert get(srv.port, "/readyz")[0] == 503
    health.set_ready()
    assert get(srv.port, "/readyz")[0] == 200
    health.set_stopping()
    assert get(srv.port, "/readyz")[0] == 503


def test_healthz_turns_503_when_work_waits_without_progress(served) -> None:
    srv, _m, health, _ = served
    state = {"last": 100.0, "pending": 3}
    health.attach(lambda: (state["last"], state["pending"]))
    assert health.check(now=104.0).ok
    assert not health.check(now=106.0).ok
    status, body, _ = get(srv.port, "/healthz")  # real clock: last=100 is long ago
    assert status == 503 and "3 frame(s) pending" in body
    state["pending"] = 0  # nothing to do: idle is healthy however old the last completion
    assert get(srv.port, "/healthz")[0] == 200


def test_default_bind_is_loopback_and_taken_port_raises() -> None:
    assert HttpConfig().host == "127.0.0.1"
    health = Health()
    srv = WebServer(build_app(Metrics(), health), HttpConfig().host, 0)
    port = srv.start()
    try:
        assert get(port, "/metrics")[0] == 200  # no token configured: open
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            assert s.getpeername()[0] == "127.0.0.1"
        other = WebServer(build_app(Metrics(), health), "127.0.0.1", port)
        with pytest.raises(OSError):
            other.start()
    finally:
        srv.stop()
