"""The daemon end to end into MQTT and a webhook: real RTSP, OpenVINO, mosquitto, HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.component.test_webhook_sink import Endpoint
from tests.integration.conftest import free_port, scrape, wait_for
from tests.mosquitto import Mosquitto, Subscriber
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_daemon_publishes_detections_states_and_webhook_events(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    videos = assets_dir / "videos"
    hook = Endpoint()
    port = free_port()
    try:
        with (
            Mosquitto(tmp_path / "broker") as broker,
            RtspServer(videos, loop=True) as rtsp,
        ):
            sub = Subscriber(broker.port, "site/#")
            config = {
                "model": {
                    "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                    "labels": str(assets_dir / "models" / "coco80.txt"),
                },
                "http": {"port": port},
                "capture": {"stall_timeout_s": 5, "read_timeout_ms": 2000},
                "sinks": [
                    {
                        "type": "mqtt",
                        "host": "127.0.0.1",
                        "port": broker.port,
                        "topic_prefix": "site",
                    },
                    {
                        "type": "webhook",
                        "url": hook.url,
                        "classes": ["bottle"],
                        "min_score": 0.5,
                        "cooldown_s": 2.0,
                    },
                ],
                "cameras": [{"name": "belt", "url": rtsp.url("bottle-detection")}],
            }
            daemon = run_daemon(config)
            wait_for(lambda: sub.on("site/belt/detections"), 90, "detections on MQTT")
            event = json.loads(sub.on("site/belt/detections")[0].payload)
            assert {"v", "ts", "frame", "detections"} <= set(event) and event["v"] == 1
            assert "bottle" in {d["label"] for d in event["detections"]}
            assert [m.payload for m in sub.on("site/belt/state")][-1] == b"streaming"
            assert b"online" in [m.payload for m in sub.on("site/available")]
            wait_for(lambda: len(hook.events) >= 2, 60, "two webhook events")
            assert all({d["label"] for d in e["detections"]} == {"bottle"} for e in hook.events)
            # the cool-down (exactly tested in test_webhook_sink) thins the per-frame stream
            assert len(hook.events) < len(sub.on("site/belt/detections"))
            text = scrape(port)
            assert 'vidpipe_mqtt_connected{sink="mqtt"} 1.0' in text

            rtsp.kill()  # the camera goes away: its state on MQTT follows
            wait_for(
                lambda: [m.payload for m in sub.on("site/belt/state")][-1] != b"streaming",
                30,
                "a non-streaming state on MQTT",
            )
            assert daemon.terminate(30) == 0, daemon.log()[-3000:]
            wait_for(
                lambda: [m.payload for m in sub.on("site/available")][-1] == b"offline",
                10,
                "offline after shutdown",
            )
            sub.close()
    finally:
        hook.close()
