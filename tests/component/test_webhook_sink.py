"""The webhook sink against a real local HTTP server (http.server on loopback)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.results import frame_result
from vidpipe.config import WebhookSinkConfig
from vidpipe.metrics import Metrics
from vidpipe.sinks import SinkPool
from vidpipe.sinks.webhook import WebhookDeliveryError, WebhookSink

pytestmark = pytest.mark.timeout(120)


class Endpoint:
    """A real HTTP server recording POSTed JSON; ``script`` plays failures per request."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.attempts = 0
        self.script: list[str] = []  # per attempt: "ok", "500", "404", "slow", "hold"
        self.release = threading.Event()  # ends a "hold"
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with endpoint.lock:
                    endpoint.attempts += 1
                    action = endpoint.script.pop(0) if endpoint.script else "ok"
                if action == "slow":
                    time.sleep(1.5)  # longer than the sink's timeout_s
                if action == "hold":
                    endpoint.release.wait(30)
                if action in ("500", "404"):
                    self.send_response(int(action))
                    self.end_headers()
                    return
                with endpoint.lock:
                    endpoint.events.append(json.loads(body))
                    endpoint.headers.append(dict(self.headers))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    try:
        yield ep
    finally:
        ep.close()


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return float(metrics.registry.get_sample_value(name, labels) or 0.0)


def make(endpoint: Endpoint, metrics: Metrics, **cfg: Any) -> WebhookSink:
    options = {"url": endpoint.url, "backoff_initial_s": 0.05, "backoff_max_s": 0.2, **cfg}
    return WebhookSink("webhook", WebhookSinkConfig(**options), metrics)


def test_filters_and_cooldown(endpoint: Endpoint) -> None:
    metrics = Metrics()
    sink = make(
        endpoint,
        metrics,
        classes=["person", "car"],
        min_score=0.5,
        cooldown_s=10.0,
        headers={"Authorization": "Bearer hook-secret-123"},
    )
    t0 = 1000.0
    sink.handle(frame_result("a", 1, [], t_capture=t0))  # nothing detected
    sink.handle(frame_result("a", 2, [("bicycle", 0.9)], t_capture=t0))  # class filtered
    sink.handle(frame_result("a", 3, [("person", 0.3)], t_capture=t0))  # score filtered
    sink.handle(frame_result("a", 4, [("person", 0.8), ("bicycle", 0.9)], t_capture=t0 + 1))
    sink.handle(frame_result("a", 5, [("car", 0.9)], t_capture=t0 + 5))  # camera a cools down
    sink.handle(frame_result("b", 6, [("car", 0.7)], t_capture=t0 + 5))  # b has its own
    sink.handle(frame_result("a", 7, [("car", 0.6)], t_capture=t0 + 11.5))  # a cooled down
    assert [(e["camera"], e["frame"]) for e in endpoint.events] == [("a", 4), ("b", 6), ("a", 7)]
    first = endpoint.events[0]
    assert [d["label"] for d in first["detections"]] == ["person"]  # bicycle filtered out
    assert first["ts"].endswith("Z") and first["v"] == 1 and first["width"] == 640
    assert endpoint.headers[0]["Authorization"] == "Bearer hook-secret-123"
    assert endpoint.headers[0]["Content-Type"] == "application/json"
    skipped = {
        r: sample(metrics, "vidpipe_sink_skipped_total", sink="webhook", reason=r)
        for r in ("no_detections", "filtered", "cooldown")
    }
    assert skipped == {"no_detections": 1, "filtered": 2, "cooldown": 1}


def test_retries_with_backoff_after_errors_and_timeouts(endpoint: Endpoint) -> None:
    metrics = Metrics()
    sink = make(endpoint, metrics, retries=3, timeout_s=0.5)
    endpoint.script = ["500", "slow", "ok"]
    sink.handle(frame_result("a", 1, [("person", 0.9)]))
    assert endpoint.attempts == 3
    assert [e["frame"] for e in endpoint.events] == [1]
    assert (
        sample(metrics, "vidpipe_sink_dropped_total", sink="webhook", reason="delivery_failed") == 0
    )


def test_gives_up_after_the_retries_and_counts_the_drop(endpoint: Endpoint) -> None:
    metrics = Metrics()
    sink = make(endpoint, metrics, retries=2)
    endpoint.script = ["500"] * 3
    with pytest.raises(WebhookDeliveryError, match="after 3 attempt"):
        sink.handle(frame_result("a", 1, [("person", 0.9)]))
    assert endpoint.attempts == 3 and not endpoint.events
    assert (
        sample(metrics, "vidpipe_sink_dropped_total", sink="webhook", reason="delivery_failed") == 1
    )
    endpoint.script = ["404"]  # a client error is not retried
    with pytest.raises(WebhookDeliveryError, match="HTTP 404"):
        sink.handle(frame_result("a", 2, [("person", 0.9)]))
    assert endpoint.attempts == 4
    assert sample(metrics, "vidpipe_sink_dropped_total", sink="webhook", reason="rejected") == 1


def test_unreachable_endpoint_is_retried_then_dropped() -> None:
    metrics = Metrics()
    url = f"http://user:pw-secret-42@127.0.0.1:{free_port()}/hook"  # nobody listens there
    sink = WebhookSink(
        "webhook",
        WebhookSinkConfig(url=url, retries=1, backoff_initial_s=0.05, timeout_s=1),
        metrics,
    )
    with pytest.raises(WebhookDeliveryError) as err:
        sink.handle(frame_result("a", 1, [("person", 0.9)]))
    assert "pw-secret-42" not in str(err.value) and "Connection refused" in str(err.value)
    assert (
        sample(metrics, "vidpipe_sink_dropped_total", sink="webhook", reason="delivery_failed") == 1
    )


def test_slow_endpoint_fills_the_bounded_queue_and_drops_are_counted(endpoint: Endpoint) -> None:
    metrics = Metrics()
    sink = make(endpoint, metrics, queue_size=2)
    pool = SinkPool([sink], metrics)
    pool.start()
    endpoint.script = ["hold"]
    try:
        pool.submit(frame_result("a", 0, [("person", 0.9)]))
        wait_for(lambda: endpoint.attempts == 1, 10, "the first POST to arrive")
        for seq in range(1, 11):  # the sink is stuck in frame 0: room for 2 more
            pool.submit(frame_result("a", seq, [("person", 0.9)]))
        assert (
            sample(metrics, "vidpipe_sink_dropped_total", sink="webhook", reason="queue_full") == 8
        )
        endpoint.release.set()
        assert pool.flush(20)
    finally:
        pool.close(10)
    assert [e["frame"] for e in endpoint.events] == [0, 9, 10]  # the newest two were kept


def test_user_info_in_the_url_becomes_basic_auth(endpoint: Endpoint) -> None:
    url = endpoint.url.replace("http://", "http://hook%40user:p%3Ass-word@")
    sink = WebhookSink("webhook", WebhookSinkConfig(url=url), Metrics())
    sink.handle(frame_result("a", 1, [("person", 0.9)]))
    expected = base64.b64encode(b"hook@user:p:ss-word").decode()
    assert endpoint.headers[0]["Authorization"] == f"Basic {expected}"
