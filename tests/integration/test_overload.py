"""Overload is a designed state: a process given three times the cameras it can infer keeps
inferring near its capacity, sheds the rest fairly across cameras, counts every shed frame
with a reason and says so in ``vidpipe_overloaded``.

Real OpenVINO, the real model, the walkway clip. The capacity is measured first, in the same
test, the way the density bench's ceiling is: file cameras read as fast as inference takes
them (the ``block`` mailbox: nothing is shed, every core infers). Then three times as many
cameras as that capacity holds at the clip's 10 fps play the clip in real time (``newest``
mailboxes, as live cameras get). Every figure comes from the daemon's own counters over one
window; nothing here is a timing assertion.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from tests.precision import with_precision
from vidpipe.config import Config
from vidpipe.daemon import Daemon
from vidpipe.overload import SHED_REASONS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLIP = "one-by-one-person-detection.mp4"  # 768x432, 10 fps
CLIP_FPS = 10.0
OVERLOAD = 3.0
WARMUP_S = 4.0
# Shedding whole groups of pictures (a keyframe a second on this clip) hands each camera its
# frames in runs, so a camera's share over a few seconds depends on which groups it decoded:
# a longer window makes the worst camera's share less noisy (0.85-0.93 of the mean over
# 10-20 s windows on the 2-core Xeon).
WINDOW_S = 20.0


def _config(assets_dir: Path, cameras: int, realtime: bool) -> Config:
    camera = {"url": str(assets_dir / "videos" / CLIP), "loop": True, "realtime": realtime}
    doc: dict[str, Any] = {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "http": {"enabled": False},
        "logging": {"level": "WARNING"},
        "cameras": [{"name": f"cam{i}", **camera} for i in range(cameras)],
    }
    return Config.model_validate(with_precision(doc))


def _snapshot(daemon: Daemon) -> dict[str, Any]:
    """Per camera: captured and inferred; drops by reason; in one pass over the registry."""
    cams: dict[str, dict[str, float]] = {}
    drops: dict[str, float] = {}
    overloaded = None
    for family in daemon.metrics.registry.collect():
        for s in family.samples:
            cam = s.labels.get("camera")
            if s.name == "vidpipe_frames_inferred_total" and cam:
                cams.setdefault(cam, {"captured": 0.0, "inferred": 0.0})["inferred"] += s.value
            elif s.name == "vidpipe_frames_captured_total" and cam:
                cams.setdefault(cam, {"captured": 0.0, "inferred": 0.0})["captured"] += s.value
            elif s.name == "vidpipe_frames_dropped_total":
                drops[s.labels["reason"]] = drops.get(s.labels["reason"], 0.0) + s.value
            elif s.name == "vidpipe_overloaded":
                overloaded = s.value
    return {"cams": cams, "drops": drops, "overloaded": overloaded, "t": time.monotonic()}


def _window(cfg: Config) -> dict[str, Any]:
    """Start a daemon, warm up, measure one window of its counters, shut it down."""
    daemon = Daemon(cfg)
    daemon.start()
    try:
        time.sleep(WARMUP_S)
        before = _snapshot(daemon)
        time.sleep(WINDOW_S)
        after = _snapshot(daemon)
    finally:
        daemon.shutdown()
    seconds = after["t"] - before["t"]
    inferred = {
        name: (row["inferred"] - before["cams"].get(name, {}).get("inferred", 0.0)) / seconds
        for name, row in after["cams"].items()
    }
    captured = sum(row["captured"] for row in after["cams"].values()) - sum(
        row["captured"] for row in before["cams"].values()
    )
    drops = {r: n - before["drops"].get(r, 0.0) for r, n in after["drops"].items()}
    return {
        "fps": inferred,
        "total_fps": sum(inferred.values()),
        "captured": captured,
        "inferred": sum(inferred.values()) * seconds,
        "drops": drops,
        "overloaded": after["overloaded"],
    }


@pytest.fixture(scope="module")
def overload(assets_dir: Path) -> dict[str, Any]:
    """The capacity window, then the window of three times the cameras it holds."""
    capacity = _window(_config(assets_dir, cameras=4, realtime=False))
    cameras = math.ceil(OVERLOAD * capacity["total_fps"] / CLIP_FPS)
    over = _window(_config(assets_dir, cameras=cameras, realtime=True))
    over["cameras"] = cameras
    over["capacity"] = capacity
    over["report"] = (
        f"capacity {capacity['total_fps']:.1f} fps; {cameras} cameras: "
        f"{over['total_fps']:.1f} fps, per camera {min(over['fps'].values()):.2f}-"
        f"{max(over['fps'].values()):.2f}, drops {over['drops']}"
    )
    print(over["report"])
    return over


def test_the_capacity_run_sheds_nothing(overload: dict[str, Any]) -> None:
    capacity = overload["capacity"]
    live_sheds = ("overwritten", "mailbox_full")  # files read as fast as inference takes them
    assert sum(capacity["drops"].get(r, 0) for r in live_sheds) == 0, overload["report"]
    assert capacity["overloaded"] == 0.0, overload["report"]


def test_overload_sheds_fairly_and_counts_every_frame(overload: dict[str, Any]) -> None:
    report, cameras = overload["report"], overload["cameras"]
    assert len(overload["fps"]) == cameras, report
    # fair: the worst camera gets at least 0.8 of the mean
    mean_fps = overload["total_fps"] / cameras
    assert min(overload["fps"].values()) >= 0.8 * mean_fps, report
    # every frame not inferred is counted with a reason, and the box says it is full
    drops = overload["drops"]
    assert sum(drops.get(r, 0) for r in SHED_REASONS) > 0, report
    unaccounted = overload["captured"] - overload["inferred"] - sum(drops.values())
    assert abs(unaccounted) <= 2 * cameras, report  # frames in flight at the window's edges
    assert overload["overloaded"] == 1.0, report


def test_overload_never_collapses(overload: dict[str, Any]) -> None:
    """Three times the cameras keep most of the capacity: live cameras past what inference
    takes leave whole groups of pictures undecoded (``capture.shed_gops``), so decoding the
    frames that would be shed does not take the cores from inference. On the 2-core Xeon
    they kept 0.81-1.19 of it in nine runs, against 0.68-0.91 decoding every frame in six
    (benchmarks/README.md, overload); the spread is mostly the capacity's own, which varied
    from 89 to 117 fps between runs on one machine. A collapse, as one GPU process past its
    count once did, fails here at once."""
    capacity_fps = overload["capacity"]["total_fps"]
    assert overload["total_fps"] >= 0.75 * capacity_fps, overload["report"]
