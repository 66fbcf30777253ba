"""The demo's table zone, end to end: ``configs/demo.yaml``'s walkway camera in the real daemon.

Six people walk into the walkway clip one after the other, from the bottom edge of the picture,
stop at the round table and leave to the right (tests/integration/test_tracking_e2e.py tells
how that was checked by eye). The demo's ``table`` zone reaches the bottom edge (normalized
y = 1.0), so each person's box is clipped at y = 432 while they walk in. Before the zone test
moved anchors into the frame (``geometry.into_frame``), the third person left the zone on such a
frame and entered it again two frames later: 7 enters and 7 leaves instead of 6.

The count comes from the scene (six people), and was the same at f32 and at bf16 on this clip;
a precision that makes it differ is a finding, not noise.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import free_port, metric, scrape, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CLIP_FRAMES = 1394  # one-by-one-person-detection.mp4, 10 fps
PASSES = 2


def demo_walkway(repo_root: Path, assets_dir: Path) -> dict[str, Any]:
    """The demo config with only its walkway camera, played as fast as inference goes."""
    text = (repo_root / "configs" / "demo.yaml").read_text()
    demo = yaml.safe_load(text.replace("${VIDPIPE_ASSETS}", str(assets_dir)))
    (walkway,) = [c for c in demo["cameras"] if c["name"] == "walkway"]
    assert [z["name"] for z in walkway["zones"]] == ["table"]
    assert walkway["loop"] is True
    # Paced at 10 fps a pass takes 139 s, and a busy machine drops frames (newest kept), which
    # would change the tracks. Unpaced, every frame of every pass is inferred.
    walkway = {**walkway, "realtime": False}
    return {
        "model": demo["model"],
        "inference": demo["inference"],
        "scheduler": {"max_frame_age_ms": 60000},  # no too_old drops on a loaded machine
        "cameras": [walkway],
    }


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines[:-1] if line.strip()]  # the last may be partial


def test_each_pass_of_the_walkway_gives_six_enters_and_six_leaves(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    out = tmp_path / "walkway.jsonl"
    config = demo_walkway(repo_root, assets_dir)
    config["http"] = {"port": port}
    config["sinks"] = [{"type": "jsonl", "path": str(out)}]
    daemon = run_daemon(config)

    def passes_done() -> bool:
        # results come in capture order: a frame of the next pass means both are complete
        return daemon.proc.poll() is not None or any(
            r.get("frame", 0) >= PASSES * CLIP_FRAMES for r in records(out)
        )

    wait_for(passes_done, 540, f"{PASSES} passes of the walkway clip in the JSONL sink")
    assert daemon.proc.poll() is None, daemon.log()[-3000:]
    text = scrape(port)
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]

    # every frame of the passes was inferred and written: nothing dropped on the way
    cam = {"camera": "walkway"}
    assert metric(text, "vidpipe_frames_dropped_total", **cam) == 0
    # (the live view's own sink keeps only the newest frame: its drops are by design)
    assert metric(text, "vidpipe_sink_dropped_total", sink="jsonl:0") == 0
    rows = records(out)
    frames = {r["frame"] for r in rows if "detections" in r}
    assert set(range(PASSES * CLIP_FRAMES)) <= frames

    zone_events = [r for r in rows if r.get("zone") == "table"]
    for n in range(PASSES):
        mine = [e for e in zone_events if e["frame"] // CLIP_FRAMES == n]
        kinds = Counter(e["event"] for e in mine)
        assert (kinds["enter"], kinds["leave"]) == (6, 6), (n, [_brief(e) for e in mine])
        # six different people, each entering once and then leaving once
        by_track: dict[int, list[str]] = {}
        for e in mine:
            by_track.setdefault(e["tracker_id"], []).append(e["event"])
        assert sorted(by_track.values()) == [["enter", "leave"]] * 6, by_track


def _brief(event: dict[str, Any]) -> tuple[Any, ...]:
    return (event["frame"], event["event"], event["tracker_id"], event.get("point"))
