"""The motion gate in a real capture worker: clips made here with cv2.VideoWriter."""

from __future__ import annotations

import itertools
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.component.capture_rig import Rig
from vidpipe.types import CameraState

FPS = 10
FRAMES = 100  # 10 s of media time


def write_clip(path: Path, moving: bool) -> Path:
    """A 320x240 clip at 10 fps: one frame repeated, or a white square crossing it."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), FPS, (320, 240))
    assert writer.isOpened()
    rng = np.random.default_rng(7)
    background = rng.integers(60, 120, (240, 320, 3), dtype=np.uint8)
    for i in range(FRAMES):
        image = background.copy()
        if moving:
            x = (i * 3) % 280
            image[100:140, x : x + 40] = 255
        writer.write(image)
    writer.release()
    return path


def run_file(rig: Rig, clip: Path, **camera: object) -> tuple[list[int], dict[str, float]]:
    worker, states = rig.worker("cam", str(clip), "block", **camera)
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    captured = rig.value("vidpipe_frames_captured_total", camera="cam")
    dropped = {
        r: rig.value("vidpipe_frames_dropped_total", camera="cam", reason=r)
        for r in ("decimated", "no_motion", "overwritten")
    }
    forwarded = int(captured - sum(dropped.values()))
    frames = rig.collector.wait_count("cam", forwarded, 5)
    return [f.seq for f in frames], {"captured": captured, **dropped}


@pytest.mark.timeout(30)
def test_static_clip_is_inferred_only_every_max_skip_s(rig: Rig, tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "static.avi", moving=False)
    motion = {"enabled": True, "max_skip_s": 2.0}
    seqs, counts = run_file(rig, clip, motion=motion)

    assert counts["captured"] == FRAMES
    # frame 0 (no reference yet), then one every 2 s of media time: 0, 20, 40, 60, 80
    assert seqs == [0, 20, 40, 60, 80]
    assert counts["no_motion"] == FRAMES - len(seqs)
    assert rig.value("vidpipe_motion_ratio", camera="cam") == pytest.approx(1 / FRAMES)


@pytest.mark.timeout(30)
def test_static_clip_without_the_gate_is_inferred_in_full(rig: Rig, tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "static.avi", moving=False)
    seqs, counts = run_file(rig, clip)
    assert seqs == list(range(FRAMES)) and counts["no_motion"] == 0


@pytest.mark.timeout(30)
def test_moving_clip_is_inferred_at_every_due_frame(rig: Rig, tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "moving.avi", moving=True)
    motion = {"enabled": True, "max_skip_s": 2.0}
    seqs, counts = run_file(rig, clip, motion=motion, detect_fps=5)

    assert counts["captured"] == FRAMES
    assert counts["no_motion"] == 0
    assert counts["decimated"] == FRAMES // 2
    assert seqs == list(range(0, FRAMES, 2))  # every due frame of detect_fps 5
    assert rig.value("vidpipe_motion_ratio", camera="cam") == 1.0
    # the counters add up: every decoded frame was forwarded or dropped with a reason
    assert len(seqs) + counts["decimated"] + counts["no_motion"] == counts["captured"]


@pytest.mark.timeout(30)
def test_still_frames_travel_with_the_next_inferred_frame(rig: Rig, tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "static.avi", moving=False)
    worker, states = rig.worker("cam", str(clip), "block", motion={"enabled": True})
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    frames = rig.collector.wait_count("cam", 5, 5)
    assert [f.still_frames for f in frames] == [0, 19, 19, 19, 19]
    for a, b in itertools.pairwise(frames):
        assert b.seq - a.seq == b.still_frames + 1
