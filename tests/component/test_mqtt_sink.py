"""The MQTT sink against a real mosquitto broker started by the test."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import wait_for
from tests.mosquitto import Mosquitto, Subscriber, make_certs
from tests.results import frame_result
from vidpipe.config import MqttSinkConfig, MqttTlsConfig, parse_config
from vidpipe.metrics import Metrics
from vidpipe.redact import redact_text
from vidpipe.sinks.mqtt import MqttSink
from vidpipe.types import CameraState

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    with Mosquitto(tmp_path / "broker") as b:
        yield b


def value(metrics: Metrics, name: str, **labels: str) -> float:
    got = metrics.registry.get_sample_value(name, labels)
    return 0.0 if got is None else float(got)


def connected(metrics: Metrics, sink: str = "mqtt") -> bool:
    return value(metrics, "vidpipe_mqtt_connected", sink=sink) == 1


def test_detections_state_and_availability(broker: Mosquitto) -> None:
    sub = Subscriber(broker.port, "home/#")
    metrics = Metrics()
    cfg = MqttSinkConfig(host="127.0.0.1", port=broker.port, topic_prefix="home/vidpipe")
    sink = MqttSink("mqtt", cfg, metrics)
    try:
        wait_for(lambda: connected(metrics), 20, "the sink to connect")
        sink.camera_state("front", CameraState.STREAMING)
        sink.handle(frame_result("front", 7, [("person", 0.91), ("car", 0.55)]))
        sink.handle(frame_result("front", 8, []))  # nothing detected: not published
        sink.handle(frame_result("front", 9, [("car", 0.8)]))
        wait_for(lambda: len(sub.on("home/vidpipe/front/detections")) == 2, 20, "2 events")
        events = [json.loads(m.payload) for m in sub.on("home/vidpipe/front/detections")]
        assert [e["frame"] for e in events] == [7, 9]
        first = events[0]
        assert first["camera"] == "front" and first["ts"].endswith("Z") and first["v"] == 1
        assert [(d["label"], d["score"]) for d in first["detections"]] == [
            ("person", pytest.approx(0.91, abs=1e-4)),
            ("car", pytest.approx(0.55, abs=1e-4)),
        ]
        assert len(first["detections"][0]["box"]) == 4
        assert (
            value(metrics, "vidpipe_sink_skipped_total", sink="mqtt", reason="no_detections") == 1
        )
        wait_for(lambda: sub.on("home/vidpipe/front/state"), 10, "the state message")
        assert sub.on("home/vidpipe/available")[-1].payload == b"online"
    finally:
        sink.close()
    wait_for(
        lambda: [m.payload for m in sub.on("home/vidpipe/available")][-1:] == [b"offline"],
        10,
        "offline at close",
    )
    sub.close()
    # state and availability are retained: a client that arrives later gets them at once
    late = Subscriber(broker.port, "home/vidpipe/+/state", client_id="late")
    try:
        wait_for(lambda: late.on("home/vidpipe/front/state"), 10, "the retained state")
        (state,) = late.on("home/vidpipe/front/state")
        assert state.payload == b"streaming" and state.retain
    finally:
        late.close()


def test_broker_restart_buffers_bounded_then_resumes(broker: Mosquitto) -> None:
    sub = Subscriber(broker.port, "vidpipe/#")
    metrics = Metrics()
    cfg = MqttSinkConfig(
        host="127.0.0.1", port=broker.port, buffer_size=3, reconnect_min_s=1, reconnect_max_s=2
    )
    sink = MqttSink("mqtt", cfg, metrics)
    try:
        wait_for(lambda: connected(metrics), 20, "the sink to connect")
        sink.handle(frame_result("cam", 0, [("person", 0.9)]))
        wait_for(lambda: sub.on("vidpipe/cam/detections"), 10, "the first event")
        broker.stop()
        wait_for(lambda: not connected(metrics), 20, "the sink to notice the broker is gone")
        for seq in range(1, 6):  # 5 events while disconnected, room for 3
            sink.handle(frame_result("cam", seq, [("person", 0.9)]))
        assert value(metrics, "vidpipe_sink_dropped_total", sink="mqtt", reason="buffer_full") == 2
        broker.start()
        wait_for(lambda: connected(metrics), 30, "the sink to reconnect")
        sink.handle(frame_result("cam", 6, [("person", 0.9)]))

        def frames() -> set[int]:
            return {json.loads(m.payload)["frame"] for m in sub.on("vidpipe/cam/detections")}

        wait_for(lambda: {3, 4, 5, 6} <= frames(), 30, "buffered and new events after restart")
        assert not {1, 2} & frames()  # the two oldest were dropped, and counted
    finally:
        sink.close()
        sub.close()


def test_last_will_says_offline_when_the_process_dies(broker: Mosquitto) -> None:
    sub = Subscriber(broker.port, "vidpipe/available")
    script = textwrap.dedent(
        f"""
        import time
        from vidpipe.config import MqttSinkConfig
        from vidpipe.metrics import Metrics
        from vidpipe.sinks.mqtt import MqttSink
        m = Metrics()
        MqttSink("mqtt", MqttSinkConfig(host="127.0.0.1", port={broker.port}), m)
        while m.registry.get_sample_value("vidpipe_mqtt_connected", {{"sink": "mqtt"}}) != 1:
            time.sleep(0.05)
        print("connected", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"connected"
        wait_for(lambda: [m.payload for m in sub.on("vidpipe/available")] == [b"online"], 10, "on")
        proc.kill()  # no clean disconnect: only the broker's Last Will can say offline
        wait_for(
            lambda: [m.payload for m in sub.on("vidpipe/available")][-1:] == [b"offline"],
            30,
            "the Last Will",
        )
    finally:
        proc.kill()
        proc.wait(10)
        sub.close()


def test_password_from_a_secret_is_used_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password = "mqtt-Pa55word-xyz"
    cfg = parse_config(
        textwrap.dedent(
            """
            model: {path: m.onnx}
            sinks:
              - {type: mqtt, host: 127.0.0.1, port: PORT, username: cam, password: "${MQTT_PW}"}
            """
        ).replace("PORT", "1883"),
        env={"MQTT_PW": password},
    )
    mqtt_cfg = cfg.sinks[0]
    assert isinstance(mqtt_cfg, MqttSinkConfig) and mqtt_cfg.password == password
    assert redact_text(f"pw={password}") == "pw=***"  # registered as a secret at load time
    caplog.set_level(logging.DEBUG)
    with Mosquitto(tmp_path / "auth", users={"cam": password}) as broker:
        wrong = Metrics()
        bad = MqttSink(
            "mqtt",
            mqtt_cfg.model_copy(update={"port": broker.port, "password": "nope-nope"}),
            wrong,
        )
        try:
            wait_for(lambda: "refused the connection" in caplog.text, 20, "the refusal logged")
            assert not connected(wrong)
        finally:
            bad.close()
        good_metrics = Metrics()
        good = MqttSink("mqtt", mqtt_cfg.model_copy(update={"port": broker.port}), good_metrics)
        try:
            wait_for(lambda: connected(good_metrics), 20, "the sink to log in")
        finally:
            good.close()
    assert password not in caplog.text
    assert "nope-nope" not in caplog.text


def test_tls_with_a_private_ca(tmp_path: Path) -> None:
    """The broker's listener speaks TLS only: connecting proves the sink uses it."""
    certs = make_certs(tmp_path / "certs")
    with Mosquitto(tmp_path / "tls", tls=certs) as broker:
        metrics = Metrics()
        cfg = MqttSinkConfig(
            host="127.0.0.1", port=broker.port, tls=MqttTlsConfig(ca_file=certs.ca)
        )
        sink = MqttSink("mqtt", cfg, metrics)
        try:
            wait_for(lambda: connected(metrics), 20, "a TLS connection")
        finally:
            sink.close()
