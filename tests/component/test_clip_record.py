"""The ``clip`` record: the same JSON in the JSONL file, on MQTT (real mosquitto) and in the
webhook's POST (a real HTTP endpoint), like every other record."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from tests.component.test_record_format import _RFC3339_UTC_MS, tracked_frame_with_an_event
from tests.component.test_webhook_sink import Endpoint
from tests.integration.conftest import wait_for
from tests.mosquitto import Mosquitto, Subscriber
from vidpipe.config import MqttSinkConfig, WebhookSinkConfig
from vidpipe.metrics import Metrics
from vidpipe.sinks.jsonl import JsonlSink
from vidpipe.sinks.mqtt import MqttSink
from vidpipe.sinks.webhook import WebhookSink
from vidpipe.types import ClipEvent

pytestmark = pytest.mark.timeout(120)


def test_clip_record_is_the_same_in_every_sink(tmp_path: Path) -> None:
    wall = time.time()
    clip = ClipEvent(
        camera="door", seq=42, wall_time=wall, clip_id="20261130-183438-720",
        start=wall - 9.25, end=wall - 0.5, url="/clips/door/20261130-183438-720.mp4",
        label="person", classes=("person",), tracker_ids=(7,), size=123456,
        crop_url="/clips/door/20261130-183438-720.t7.jpg",
    )  # fmt: skip
    frame = tracked_frame_with_an_event()
    result = dataclasses.replace(frame, events=(clip,))
    path = tmp_path / "out.jsonl"
    jsonl = JsonlSink("jsonl", path, only_with_detections=True)
    endpoint = Endpoint()
    # a class filter that passes the clip's class: the clip goes out like a zone event
    webhook = WebhookSink(
        "webhook", WebhookSinkConfig(url=endpoint.url, classes=["person"]), Metrics()
    )
    with Mosquitto(tmp_path / "broker") as broker:
        sub = Subscriber(broker.port, "vidpipe/#")
        metrics = Metrics()
        mqtt = MqttSink("mqtt", MqttSinkConfig(host="127.0.0.1", port=broker.port), metrics)
        try:
            wait_for(
                lambda: metrics.registry.get_sample_value(
                    "vidpipe_mqtt_connected", {"sink": "mqtt"}
                ),
                20,
                "the sink to connect",
            )
            for sink in (jsonl, mqtt, webhook):
                sink.handle(result)
            wait_for(lambda: sub.on("vidpipe/door/events"), 20, "the MQTT clip record")
        finally:
            mqtt.close()
            sub.close()
            webhook.close()
            jsonl.close()
            endpoint.close()

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    clip_line = lines[-1]
    (mqtt_clip,) = [json.loads(m.payload) for m in sub.on("vidpipe/door/events")]
    hook_clip = endpoint.events[0]
    assert clip_line == mqtt_clip == hook_clip
    assert clip_line == {
        "v": 1,
        "event": "clip",
        "camera": "door",
        "frame": 42,
        "ts": clip_line["ts"],
        "id": "20261130-183438-720",
        "start": clip_line["start"],
        "end": clip_line["end"],
        "duration_s": 8.75,
        "url": "/clips/door/20261130-183438-720.mp4",
        "label": "person",
        "classes": ["person"],
        "tracker_ids": [7],
        "size": 123456,
        "crop_url": "/clips/door/20261130-183438-720.t7.jpg",
    }
    for key in ("ts", "start", "end"):
        assert _RFC3339_UTC_MS.fullmatch(clip_line[key]), clip_line[key]
