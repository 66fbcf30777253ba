"""The motion gate in a real capture worker: clips made here with cv2.VideoWriter."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.component.capture_rig import Rig
from vidpipe.capture.motion import camera_phase
from vidpipe.types import CameraState

FPS = 10
FRAMES = 100  # 10 s of media time
# Each camera forces its first max_skip_s frame early by its own phase (from its name), so
# that cameras started together are not in step. This name's phase, 0.503, puts the first
# forced frame at 1 s of media time; later ones are 2 s apart, on times exact in binary.
STILL = "static"


def forced_frames(name: str, max_skip_s: float) -> list[int]:
    """The frames a still camera infers: frame 0, then the first one at least
    ``(1 - phase) x max_skip_s`` in, then one every ``max_skip_s``."""
    step = round(max_skip_s * FPS)
    first = math.ceil((1.0 - camera_phase(name)) * step)
    return [0, *range(first, FRAMES, step)]


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


def run_file(
    rig: Rig, clip: Path, name: str = "cam", **camera: object
) -> tuple[list[int], dict[str, float]]:
    worker, states = rig.worker(name, str(clip), "block", **camera)
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    captured = rig.value("vidpipe_frames_captured_total", camera=name)
    dropped = {
        r: rig.value("vidpipe_frames_dropped_total", camera=name, reason=r)
        for r in ("decimated", "no_motion", "overwritten")
    }
    forwarded = int(captured - sum(dropped.values()))
    frames = rig.collector.wait_count(name, forwarded, 5)
    return [f.seq for f in frames], {"captured": captured, **dropped}


@pytest.mark.timeout(30)
def test_static_clip_is_inferred_only_every_max_skip_s(rig: Rig, tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "static.avi", moving=False)
    motion = {"enabled": True, "max_skip_s": 2.0}
    seqs, counts = run_file(rig, clip, STILL, motion=motion)

    assert counts["captured"] == FRAMES
    # frame 0 (no reference yet), then at 1 s (the phase), then one every 2 s: 10, 30, ...
    assert seqs == forced_frames(STILL, 2.0) == [0, 10, 30, 50, 70, 90]
    assert counts["no_motion"] == FRAMES - len(seqs)
    assert rig.value("vidpipe_motion_ratio", camera=STILL) == pytest.approx(1 / FRAMES)


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
    worker, states = rig.worker(STILL, str(clip), "block", motion={"enabled": True})
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    expected = forced_frames(STILL, 2.0)  # the default max_skip_s
    frames = rig.collector.wait_count(STILL, len(expected), 5)
    # the frames skipped before each inferred one
    assert [f.still_frames for f in frames] == [0, 9, 19, 19, 19, 19]
    for a, b in itertools.pairwise(frames):
        assert b.seq - a.seq == b.still_frames + 1
