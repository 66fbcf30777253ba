"""Zone and line events reach the MQTT sink (real mosquitto) and the webhook sink (real HTTP)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.component.test_webhook_sink import Endpoint
from tests.integration.conftest import wait_for
from tests.mosquitto import Mosquitto, Subscriber
from tests.results import frame_result
from vidpipe.config import MqttSinkConfig, WebhookSinkConfig
from vidpipe.metrics import Metrics
from vidpipe.sinks.mqtt import MqttSink
from vidpipe.sinks.webhook import WebhookDeliveryError, WebhookSink
from vidpipe.types import FrameResult, TrackEvent

pytestmark = pytest.mark.timeout(120)


def with_events(result: FrameResult, *labels: str) -> FrameResult:
    events = tuple(
        TrackEvent(
            "cross",
            result.camera,
            result.seq,
            result.wall_time,
            "door",
            i + 1,
            0,
            label,
            (100.0, 200.0),
            direction="in",
        )
        for i, label in enumerate(labels)
    )
    return dataclasses.replace(result, events=events)


def test_mqtt_publishes_events_also_for_frames_without_detections(tmp_path: Path) -> None:
    with Mosquitto(tmp_path / "broker") as broker:
        sub = Subscriber(broker.port, "vidpipe/#")
        metrics = Metrics()
        sink = MqttSink("mqtt", MqttSinkConfig(host="127.0.0.1", port=broker.port), metrics)
        try:
            on = {"sink": "mqtt"}
            wait_for(
                lambda: metrics.registry.get_sample_value("vidpipe_mqtt_connected", on),
                20,
                "the sink to connect",
            )
            sink.handle(with_events(frame_result("front", 3, []), "person", "car"))
            wait_for(lambda: len(sub.on("vidpipe/front/events")) == 2, 20, "2 events")
        finally:
            sink.close()
            sub.close()
    got = [json.loads(m.payload) for m in sub.on("vidpipe/front/events")]
    assert [(e["event"], e["line"], e["label"], e["direction"]) for e in got] == [
        ("cross", "door", "person", "in"),
        ("cross", "door", "car", "in"),
    ]
    assert not sub.on("vidpipe/front/detections")  # the frame had none


def test_webhook_posts_each_event_whatever_the_cooldown() -> None:
    endpoint = Endpoint()
    cfg = WebhookSinkConfig(url=endpoint.url, classes=["person"], cooldown_s=3600)
    metrics = Metrics()
    sink = WebhookSink("webhook", cfg, metrics)
    try:
        sink.handle(with_events(frame_result("front", 1, [("person", 0.9)]), "person"))
        sink.handle(with_events(frame_result("front", 2, [("person", 0.9)]), "person", "car"))
        wait_for(lambda: len(endpoint.events) == 3, 20, "3 POSTs")
        kinds = [e.get("event", "detections") for e in endpoint.events]
        assert kinds == ["cross", "detections", "cross"]  # frame 2: cooling down; car filtered
        endpoint.script = ["404"]  # the event is rejected: counted, raised, the frame goes on
        with pytest.raises(WebhookDeliveryError, match="rejected event front#3 cross"):
            sink.handle(with_events(frame_result("front", 3, []), "person"))
    finally:
        sink.close()
        endpoint.close()
    skipped = {"sink": "webhook", "reason": "filtered"}
    assert metrics.registry.get_sample_value("vidpipe_sink_skipped_total", skipped) == 1
