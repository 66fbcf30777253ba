"""Draw the README's picture of zones and lines on a real frame, with real tracked detections.

    VIDPIPE_ASSETS=../shared/assets .venv/bin/python scripts/zones_picture.py docs/zones.png

Runs the walkway clip's first FRAME frames (every other one, like ``detect_fps: 5``) through
the real model and the real tracking step with the README's example zones and line, then
draws the last frame with ``draw_detections`` and ``CameraScene.draw``, scaled to 640 px wide.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import cv2
import yaml

from vidpipe.assets import default_assets_dir
from vidpipe.config import parse_config
from vidpipe.metrics import Metrics
from vidpipe.plan import build_scheduler, plan_inference
from vidpipe.postprocess.draw import draw_detections
from vidpipe.track.stage import TrackingStage
from vidpipe.types import Frame, FrameResult

FRAME = 436  # person 2 walking towards the exit line, inside the table zone

CAMERA = """
name: walkway
url: one-by-one-person-detection.mp4
detect_fps: 5
classes: [person]
zones:
  - name: table
    coords: normalized
    points: [[0.4, 0.7], [0.75, 0.7], [0.75, 1.0], [0.4, 1.0]]
    classes: [person]
lines:
  - name: exit
    coords: normalized
    points: [[0.78, 0.35], [0.78, 1.0]]
    classes: [person]
"""


def main(out: Path) -> None:
    assets = default_assets_dir()
    doc = {
        "model": {
            "path": str(assets / "models" / "yolox_nano.onnx"),
            "labels": str(assets / "models" / "coco80.txt"),
        },
        "cameras": [yaml.safe_load(CAMERA)],
    }
    cfg = parse_config(yaml.safe_dump(doc), "zones_picture", env={})
    plan = plan_inference(cfg, Metrics())  # the camera's class filter and its scene
    loaded = plan.loaded
    results: list[FrameResult] = []
    detector = next(iter(plan.detectors.values()))
    scheduler = build_scheduler(
        cfg, detector, Metrics(), results.append, max_frame_age_s=float("inf")
    )
    scheduler.start()
    cap = cv2.VideoCapture(str(assets / "videos" / "one-by-one-person-detection.mp4"))
    last = None
    for seq in range(FRAME + 1):
        ok, image = cap.read()
        if not ok:
            raise SystemExit(f"the clip ended before frame {FRAME}")
        if seq % 2 == 0:
            scheduler.submit(Frame("walkway", seq, time.monotonic(), image))
            last = image
    scheduler.close(60)
    tracked: list[FrameResult] = []
    stage = TrackingStage(plan.scenes, tracked.append, Metrics())
    for r in results:
        stage(r)
    assert last is not None
    picture = draw_detections(last, tracked[-1].detections, loaded.labels)
    picture = stage.scenes["walkway"].draw(picture)
    picture = cv2.resize(picture, (640, 360), interpolation=cv2.INTER_AREA)
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), picture, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(f"{out}: frame {tracked[-1].seq}, {len(tracked[-1].detections)} detection(s)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/zones.png"))
