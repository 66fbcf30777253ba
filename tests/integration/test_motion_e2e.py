"""The motion gate end to end: the real daemon and OpenVINO on the walkway clip.

The clip (see ``test_tracking_e2e``) shows six people, one after the other, each standing at
the table for 10-25 s with empty stretches between them. With the gate on, at every frame due
(no ``detect_fps``, as in configs/demo.yaml), the still frames are not inferred, and the line
and zone events are the same as without the gate: 6 crossings of the exit line, each person
entering and leaving the table zone once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, metric, scrape, scrape_soon, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

CLIP_FRAMES = 1394
#: Frames at which each of the 6 people crosses the line (see test_tracking_e2e).
CROSSINGS_SEEN = (190, 440, 690, 860, 1188, 1350)
SLACK_FRAMES = 10


def all_frames_accounted(port: int) -> bool:
    """The file ended and every decoded frame was inferred or dropped with a reason."""
    text = scrape_soon(port)  # "" while the model is still compiling
    cam = {"camera": "walkway"}
    if metric(text, "vidpipe_camera_state", **cam, state="stopped") != 1:
        return False
    captured = metric(text, "vidpipe_frames_captured_total", **cam)
    inferred = metric(text, "vidpipe_frames_inferred_total", **cam)
    dropped = metric(text, "vidpipe_frames_dropped_total", **cam)  # every reason
    return captured == CLIP_FRAMES and inferred + dropped == captured


def run_walkway(
    assets_dir: Path, tmp_path: Path, run_daemon, motion: dict
) -> tuple[str, list[dict]]:
    """Metrics text and JSONL records of one daemon run over the whole clip."""
    port = free_port()
    out = tmp_path / f"walkway-{motion['enabled']}.jsonl"
    scene = {"coords": "normalized", "classes": ["person"]}
    daemon = run_daemon(
        {
            "model": {
                "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                "labels": str(assets_dir / "models" / "coco80.txt"),
            },
            "http": {"port": port},
            "scheduler": {"max_frame_age_ms": 60000},  # no too_old drops on a loaded machine
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [
                {
                    "name": "walkway",
                    "url": str(assets_dir / "videos" / "one-by-one-person-detection.mp4"),
                    "classes": ["person"],
                    "motion": motion,
                    "zones": [
                        {
                            "name": "table",
                            **scene,
                            "points": [[0.4, 0.7], [0.75, 0.7], [0.75, 1.0], [0.4, 1.0]],
                        }
                    ],
                    "lines": [{"name": "exit", **scene, "points": [[0.78, 0.35], [0.78, 1.0]]}],
                }
            ],
        }
    )
    wait_for(
        lambda: daemon.proc.poll() is not None or all_frames_accounted(port),
        360,
        "the whole clip through the pipeline",
    )
    assert daemon.proc.poll() is None, daemon.log()[-3000:]
    text = scrape(port)
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]
    assert "Traceback" not in daemon.log()
    return text, [json.loads(line) for line in out.read_text().splitlines()]


def event_story(records: list[dict]) -> list[tuple[str, ...]]:
    """Every zone and line event, in order, without track ids, frames or times."""
    return [
        (r["event"], r.get("zone") or r.get("line"), r.get("direction") or r.get("reason") or "")
        for r in records
        if "event" in r
    ]


def test_motion_gate_skips_still_frames_and_keeps_the_events(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    _, plain = run_walkway(assets_dir, tmp_path, run_daemon, {"enabled": False})
    text, gated = run_walkway(assets_dir, tmp_path, run_daemon, {"enabled": True, "max_skip_s": 2})

    cam = {"camera": "walkway"}
    inferred = metric(text, "vidpipe_frames_inferred_total", **cam)
    no_motion = metric(text, "vidpipe_frames_dropped_total", **cam, reason="no_motion")
    print(f"walkway with the motion gate: {inferred:.0f} of {CLIP_FRAMES} frames inferred")
    # people stand still at the table for most of the clip: at least a third is skipped
    assert no_motion > CLIP_FRAMES / 3
    assert metric(text, "vidpipe_frames_dropped_total", **cam) == no_motion  # no other drop
    assert inferred + no_motion == CLIP_FRAMES
    assert 0 < metric(text, "vidpipe_motion_ratio", **cam) < 1
    labels = {"camera": "walkway", "line": "exit", "class": "person"}
    assert metric(text, "vidpipe_line_crossings_total", **labels, direction="in") == 6
    assert metric(text, "vidpipe_line_crossings_total", **labels, direction="out") == 0

    # the same events as without the gate, in the same order, at about the same frames
    assert event_story(gated) == event_story(plain)
    crossings = [r for r in gated if r.get("event") == "cross"]
    assert len({e["tracker_id"] for e in crossings}) == 6  # six different people
    for seen, event in zip(CROSSINGS_SEEN, crossings, strict=True):
        assert abs(event["frame"] - seen) <= SLACK_FRAMES, (seen, crossings)
    plain_zone = [r for r in plain if r.get("zone")]
    gated_zone = [r for r in gated if r.get("zone")]
    # frame numbers are media time (an unpaced file's clock is processing time): the dwell,
    # enter to leave, of each person who stood at the table is the same within max_skip_s
    for a, b in zip(plain_zone, gated_zone, strict=True):
        assert (a["event"], a.get("reason")) == (b["event"], b.get("reason"))
        assert abs(a["frame"] - b["frame"]) <= 2 * 10, (a, b)  # within max_skip_s
