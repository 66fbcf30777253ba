"""A line added by a live reload (SIGHUP) starts counting without restarting the camera."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import free_port, metric, scrape, wait_for
from tests.precision import with_precision

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: The walkway clip's exit line; the first person crosses it at about frame 190 (19 s), see
#: test_tracking_e2e.py for how that was verified.
EXIT_LINE = {
    "name": "exit",
    "coords": "normalized",
    "points": [[0.78, 0.35], [0.78, 1.0]],
    "classes": ["person"],
}


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sighup_adds_a_line_to_a_running_camera(
    assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    port = free_port()
    out = tmp_path / "walkway.jsonl"
    camera = {
        "name": "walkway",
        "url": str(assets_dir / "videos" / "one-by-one-person-detection.mp4"),
        "realtime": True,  # 10 fps, like the camera: the reload lands long before frame 190
        "classes": ["person"],
    }
    cfg: dict[str, Any] = {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "http": {"port": port},
        "scheduler": {"max_frame_age_ms": 60000},  # no too_old drops on a loaded machine
        "sinks": [{"type": "jsonl", "path": str(out)}],
        "cameras": [camera],
    }
    daemon = run_daemon(cfg)
    wait_for(lambda: len(records(out)) >= 5, 120, "the first results")
    assert all("tracker_id" not in d for r in records(out) for d in r["detections"])

    edited = {**cfg, "cameras": [{**camera, "lines": [EXIT_LINE]}]}
    tmp = daemon.config_path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(with_precision(edited)))
    os.replace(tmp, daemon.config_path)
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "replaced on: walkway" in daemon.log(), 60, "the reload applied")
    reloaded_at = max(r["frame"] for r in records(out))
    assert reloaded_at < 170, "the reload came too late to see the first crossing"

    def crossed() -> list[dict[str, Any]]:
        return [r for r in records(out) if r.get("event") == "cross"]

    wait_for(crossed, 120, "the first person crossing the exit line")
    text = scrape(port)
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]

    first = crossed()[0]
    assert first["direction"] == "in" and abs(first["frame"] - 190) <= 10
    labels = {"camera": "walkway", "line": "exit", "class": "person", "direction": "in"}
    assert metric(text, "vidpipe_line_crossings_total", **labels) >= 1
    frames = [r for r in records(out) if "detections" in r]
    seqs = [r["frame"] for r in frames]
    assert seqs == sorted(seqs)  # the camera was not restarted: its sequence never went back
    late = [r for r in frames if r["frame"] > reloaded_at + 10]
    assert late and all("tracker_id" in d for r in late for d in r["detections"])
    assert "restart walkway" not in daemon.log()
