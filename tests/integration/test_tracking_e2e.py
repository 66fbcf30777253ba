"""Tracking, a zone and a line, end to end: the real daemon and OpenVINO on the walkway clip.

How the expected count was verified (by hand, by looking at the frames):

``one-by-one-person-detection.mp4`` is 768x432, 10 fps, 1394 frames. Every 10th frame was
written to PNG (cv2, under /tmp) in contact sheets of 25 and looked at, then, with the line
below drawn on them by ``vidpipe.track.draw.draw_scene``, frames 8 and 2 before and 4 after
each crossing. Six people come one after the other. Each walks in from the bottom edge of the
picture (left of the middle), walks up to the round table, stands there for 10-25 s, then
walks out at the right edge of the picture, passing the pillar right of the table:

    person  clip frames   leaves to the right (crosses x = 0.78 of the width)
    1       60-200        about frame 190
    2       230-445       about frame 440
    3       505-695       about frame 690
    4       750-865       about frame 860
    5       925-1195      about frame 1188
    6       1240-1360     about frame 1350

Nobody is right of x = 0.78 before leaving, and nobody comes back. A line from (0.78, 0.35) to
(0.78, 1.0) (normalized; pointing down the picture, so its left-hand side on screen, its "in"
side, is the right of the picture) is therefore crossed exactly 6 times, all "in", none "out",
each by a different person, each within 10 frames of the frame in the table.

Detection runs at ``detect_fps: 5`` on the 10 fps clip (every other frame: the tracker must
bridge the decimation), as fast as inference goes (a file camera, not paced).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, metric, scrape, scrape_soon, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

#: Frames at which each of the 6 people crosses the line, as seen in the clip (see above).
CROSSINGS_SEEN = (190, 440, 690, 860, 1188, 1350)
SLACK_FRAMES = 10


def all_frames_accounted(port: int) -> bool:
    """The file ended and every decoded frame was inferred, decimated or dropped."""
    text = scrape_soon(port)  # "" while the model is still compiling
    cam = {"camera": "walkway"}
    if metric(text, "vidpipe_camera_state", **cam, state="stopped") != 1:
        return False
    captured = metric(text, "vidpipe_frames_captured_total", **cam)
    inferred = metric(text, "vidpipe_frames_inferred_total", **cam)
    dropped = metric(text, "vidpipe_frames_dropped_total", **cam)  # every reason
    return captured == 1394 and inferred + dropped == captured


def test_walkway_line_counts_six_people_leaving(assets_dir: Path, tmp_path: Path, run_daemon):
    port = free_port()
    out = tmp_path / "walkway.jsonl"
    daemon = run_daemon(
        {
            "model": {
                "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                "labels": str(assets_dir / "models" / "coco80.txt"),
            },
            "http": {"port": port},
            # a loaded 2-core machine must not turn queueing into too_old drops: the count
            # below needs every frame due for detection
            "scheduler": {"max_frame_age_ms": 60000},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [
                {
                    "name": "walkway",
                    "url": str(assets_dir / "videos" / "one-by-one-person-detection.mp4"),
                    "detect_fps": 5,
                    "classes": ["person"],
                    "zones": [
                        {
                            "name": "table",
                            "coords": "normalized",
                            "points": [[0.4, 0.7], [0.75, 0.7], [0.75, 1.0], [0.4, 1.0]],
                            "classes": ["person"],
                        }
                    ],
                    "lines": [
                        {
                            "name": "exit",
                            "coords": "normalized",
                            "points": [[0.78, 0.35], [0.78, 1.0]],
                            "classes": ["person"],
                        }
                    ],
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

    labels = {"camera": "walkway", "line": "exit", "class": "person"}
    assert metric(text, "vidpipe_line_crossings_total", **labels, direction="in") == 6
    assert metric(text, "vidpipe_line_crossings_total", **labels, direction="out") == 0
    cam = {"camera": "walkway"}
    assert metric(text, "vidpipe_frames_dropped_total", **cam, reason="decimated") > 600
    decimated = metric(text, "vidpipe_frames_dropped_total", **cam, reason="decimated")
    assert metric(text, "vidpipe_frames_dropped_total", **cam) == decimated  # no other drop
    gauge = {"camera": "walkway", "zone": "table", "class": "person"}
    assert metric(text, "vidpipe_zone_objects", **gauge) == 0  # everybody left

    records = [json.loads(line) for line in out.read_text().splitlines()]
    frames = [r for r in records if "detections" in r]
    events = [r for r in records if "event" in r]
    crossings = [e for e in events if e["event"] == "cross"]
    assert [e["direction"] for e in crossings] == ["in"] * 6
    assert len({e["tracker_id"] for e in crossings}) == 6  # six different people
    for seen, event in zip(CROSSINGS_SEEN, crossings, strict=True):
        assert abs(event["frame"] - seen) <= SLACK_FRAMES, (seen, crossings)

    # results come in capture order, and every detection carries a track id field
    seqs = [r["frame"] for r in frames]
    assert seqs == sorted(seqs)
    assert all("tracker_id" in d for r in frames for d in r["detections"])
    tracked = {d["tracker_id"] for r in frames for d in r["detections"]} - {None}
    assert {e["tracker_id"] for e in crossings} <= tracked

    # each person who crossed had entered the table zone before, and left it around then
    for cross in crossings:
        mine = [e for e in events if e["tracker_id"] == cross["tracker_id"] and "zone" in e]
        assert [e["event"] for e in mine] == ["enter", "leave"], mine
        assert mine[0]["frame"] < cross["frame"]
        assert mine[1]["reason"] == "exited" and mine[1]["dwell_s"] > 0
