"""One record format: the JSONL line, the MQTT payload (real mosquitto) and the webhook body
(a real HTTP endpoint) of the same frame and the same event are the same JSON."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from tests.component.test_webhook_sink import Endpoint
from tests.integration.conftest import wait_for
from tests.mosquitto import Mosquitto, Subscriber
from vidpipe.config import MqttSinkConfig, WebhookSinkConfig
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.sinks import record as records
from vidpipe.sinks.jsonl import JsonlSink
from vidpipe.sinks.mqtt import MqttSink
from vidpipe.sinks.record import SCHEMA_VERSION
from vidpipe.sinks.webhook import WebhookSink
from vidpipe.types import Detections, FrameResult, ModelTag, TrackEvent

pytestmark = pytest.mark.timeout(120)

_RFC3339_UTC_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def tracked_frame_with_an_event() -> FrameResult:
    det = Detections(
        np.array([[10.5, 20.25, 110.0, 220.75], [300, 40, 360, 120]], np.float32),
        np.array([0.91234567, 0.55], np.float32),
        np.array([0, 2], np.int32),
        np.array([7, -1]),
    )
    now = time.monotonic()
    wall = time.time()
    result = FrameResult(
        "door", 42, now - 0.05, now, wall, 640, 360, det, Labels(("person", "bicycle", "car"))
    )
    leave = TrackEvent(
        "leave", "door", 42, wall, "hall", 7, 0, "person", (60.25, 220.75), dwell_s=3.5,
        reason="exited",
    )  # fmt: skip
    return dataclasses.replace(
        result, events=(leave,), model=ModelTag("nanodet", "nanodet_m_416.onnx")
    )


@dataclasses.dataclass
class SentRecords:
    """What the three real sinks wrote for one result."""

    jsonl: list[dict]  # the JSONL file's lines, in order
    mqtt: dict[str, list[dict]]  # MQTT payloads by topic
    webhook: list[dict]  # the webhook's POST bodies, in order


def send_through_every_sink(
    tmp_path: Path,
    result: FrameResult,
    topics: tuple[str, ...],
    *,
    only_with_detections: bool = False,
    webhook_classes: list[str] | None = None,
    mqtt_only_with_detections: bool = True,
) -> SentRecords:
    """Hand ``result`` to a real JSONL sink, a real MQTT sink (its own mosquitto) and a real
    webhook sink (a real HTTP endpoint); wait until every one of ``topics`` got a message."""
    path = tmp_path / "out.jsonl"
    jsonl = JsonlSink("jsonl", path, only_with_detections=only_with_detections)
    endpoint = Endpoint()
    webhook = WebhookSink(
        "webhook", WebhookSinkConfig(url=endpoint.url, classes=webhook_classes), Metrics()
    )
    with Mosquitto(tmp_path / "broker") as broker:
        sub = Subscriber(broker.port, "vidpipe/#")
        metrics = Metrics()
        mqtt_cfg = MqttSinkConfig(
            host="127.0.0.1", port=broker.port, only_with_detections=mqtt_only_with_detections
        )
        mqtt = MqttSink("mqtt", mqtt_cfg, metrics)
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
            for topic in topics:
                wait_for(lambda t=topic: sub.on(t), 20, f"a message on {topic}")
        finally:
            mqtt.close()
            sub.close()
            webhook.close()
            jsonl.close()
            endpoint.close()
    return SentRecords(
        [json.loads(line) for line in path.read_text().splitlines()],
        {
            t: [json.loads(m.payload) for m in sub.on(t)]
            for t in {*topics, "vidpipe/door/detections"}
        },
        list(endpoint.events),
    )


def test_jsonl_mqtt_and_webhook_write_the_same_records(tmp_path: Path) -> None:
    sent = send_through_every_sink(
        tmp_path,
        tracked_frame_with_an_event(),
        ("vidpipe/door/detections", "vidpipe/door/events"),
    )
    lines = sent.jsonl
    assert len(lines) == 2, lines  # the frame, then its event
    frame_line, event_line = lines
    (mqtt_frame,) = sent.mqtt["vidpipe/door/detections"]
    (mqtt_event,) = sent.mqtt["vidpipe/door/events"]
    # the webhook posts the event first, then the frame (after its filters: none here)
    assert len(sent.webhook) == 2, sent.webhook
    hook_event, hook_frame = sent.webhook

    assert frame_line == mqtt_frame == hook_frame
    assert event_line == mqtt_event == hook_event
    for record in (frame_line, event_line):
        assert record["v"] == SCHEMA_VERSION == 1
        assert _RFC3339_UTC_MS.fullmatch(record["ts"]), record["ts"]
        assert not {"timestamp", "time"} & set(record)
    assert frame_line["ts"] == event_line["ts"]  # one clock, one format
    # every sink names the model, by type and file name (never the directory it is kept in)
    assert frame_line["model"] == {"type": "nanodet", "name": "nanodet_m_416.onnx"}
    assert list(frame_line) == [
        "v", "camera", "frame", "ts", "width", "height", "latency_ms", "model", "detections"
    ]  # fmt: skip
    assert "model" not in event_line  # an event names its frame; the frame names the model
    assert frame_line["detections"][0] == {
        "class_id": 0,
        "label": "person",
        "score": 0.91235,
        "box": [10.5, 20.25, 110.0, 220.75],
        "tracker_id": 7,
    }
    assert frame_line["detections"][1]["tracker_id"] is None
    assert (event_line["event"], event_line["zone"], event_line["reason"]) == (
        "leave",
        "hall",
        "exited",
    )
    assert event_line["dwell_s"] == 3.5 and event_line["point"] == [60.2, 220.8]


def test_frame_record_model_field() -> None:
    """A record names the detector that produced it: two cameras on two detectors differ."""
    result = tracked_frame_with_an_event()
    assert records.frame_record(result)["model"] == {
        "type": "nanodet",
        "name": "nanodet_m_416.onnx",
    }
    other = dataclasses.replace(result, camera="gate", model=ModelTag("yolox", "people"))
    encoded = records.encode(records.frame_record(other)).decode()
    assert '"latency_ms":50.0,"model":{"type":"yolox","name":"people"},"detections"' in (
        re.sub(r'"latency_ms":[0-9.]+', '"latency_ms":50.0', encoded)
    )
    assert records.frame_record(result)["model"]["name"] == "nanodet_m_416.onnx"
    bare = dataclasses.replace(result, model=None)  # no model opened (a bare sink test)
    assert records.frame_record(bare)["model"] is None
