"""The motion gate's decisions, on synthetic frames."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vidpipe.capture.motion import MotionGate, camera_phase, changed_fraction, grey_copy
from vidpipe.config import CameraConfig, CaptureConfig, ConfigError, MotionConfig, parse_config
from vidpipe.metrics import Metrics


def scene(square_x: int | None = None, size: int = 40) -> np.ndarray:
    image = np.full((432, 768, 3), 90, dtype=np.uint8)
    if square_x is not None:
        image[200 : 200 + size, square_x : square_x + size] = 250
    return image


def test_identical_frames_do_not_change() -> None:
    a = grey_copy(scene())
    assert a.shape == (90, 160)
    assert changed_fraction(a, grey_copy(scene()), 25) == 0.0


def test_a_moving_square_changes_about_its_area() -> None:
    a, b = grey_copy(scene(100)), grey_copy(scene(400))
    # two 40x40 squares (old place, new place) of a 768x432 picture: about 0.96 %
    assert 0.005 < changed_fraction(a, b, 25) < 0.02


@pytest.mark.parametrize(
    ("min_area", "size", "admitted"),
    [
        (0.002, 40, True),  # about 1 % moved
        (0.05, 40, False),  # needs 5 %
        (0.002, 4, False),  # a 4-pixel speck is below 0.2 % (and blurred away)
    ],
)
def test_min_area_decides(min_area: float, size: int, admitted: bool) -> None:
    gate = MotionGate(MotionConfig(enabled=True, min_area=min_area, max_skip_s=100))
    assert gate.admit(scene(), 0.0) == 0  # first frame: no reference
    assert (gate.admit(scene(300, size), 0.1) is not None) is admitted


def test_max_skip_s_forces_a_frame_and_counts_the_skipped() -> None:
    metrics = Metrics()
    gate = MotionGate(MotionConfig(enabled=True, max_skip_s=1.0), metrics.camera("c"))
    got = [gate.admit(scene(), i / 10) for i in range(25)]
    assert got[0] == 0 and got[10] == 9 and got[20] == 9
    assert [i for i, g in enumerate(got) if g is not None] == [0, 10, 20]
    dropped = metrics.registry.get_sample_value(
        "vidpipe_frames_dropped_total", {"camera": "c", "reason": "no_motion"}
    )
    assert dropped == 22
    assert gate.motion_ratio == pytest.approx(1 / 25)


def test_slow_change_adds_up_against_the_last_inferred_frame() -> None:
    gate = MotionGate(MotionConfig(enabled=True, threshold=25, max_skip_s=100))
    gate.admit(np.full((432, 768, 3), 100, np.uint8), 0.0)
    # +10 grey levels per frame: never 25 from one frame to the next, but 30 after 3 frames
    got = [gate.admit(np.full((432, 768, 3), 100 + 10 * i, np.uint8), i) for i in (1, 2, 3)]
    assert got == [None, None, 2]


def test_camera_motion_replaces_the_capture_default() -> None:
    default = MotionConfig(enabled=True, max_skip_s=3)
    off = CameraConfig(name="a", url="x.mp4", motion=MotionConfig(enabled=False))
    inherits = CameraConfig(name="b", url="x.mp4")
    assert MotionGate.for_camera(off, default) is None
    gate = MotionGate.for_camera(inherits, default)
    assert gate is not None and gate.cfg.max_skip_s == 3
    assert MotionGate.for_camera(inherits, CaptureConfig().motion) is None  # off by default


def test_bad_motion_settings_name_the_camera() -> None:
    text = """
model: {path: m.onnx}
cameras:
  - name: door
    url: door.mp4
    motion: {enabled: true, min_area: 2}
"""
    with pytest.raises(ConfigError) as err:
        parse_config(text, "t.yaml")
    assert "cameras[0].motion.min_area" in str(err.value)


def test_cameras_force_their_frames_out_of_step() -> None:
    """Still scenes, started together: each camera's first forced frame comes early by its
    phase, then every ``max_skip_s``, so the forced frames of many cameras are spread out."""
    forced: list[list[int]] = []
    for name in ("cam0", "cam1", "cam2", "cam3"):
        camera = CameraConfig(name=name, url="x.mp4")
        gate = MotionGate.for_camera(camera, MotionConfig(enabled=True, max_skip_s=1.0))
        assert gate is not None and gate.phase == camera_phase(name)
        got = [gate.admit(scene(), i / 10) for i in range(35)]
        admitted = [i for i, g in enumerate(got) if g is not None]
        assert admitted[0] == 0  # a new stream's first frame is always inferred
        # frame i is at i/10 s: forced once i/10 >= (1 - phase) s (float rounding: +-1 frame)
        assert abs(admitted[1] - 10 * (1 - gate.phase)) <= 1
        gaps = [b - a for a, b in itertools.pairwise(admitted[1:])]
        assert len(gaps) >= 1 and set(gaps) <= {10, 11}  # then every max_skip_s, as before
        forced.append(admitted[1:])
    assert len({f[0] for f in forced}) >= 3  # not in step (two may share a tenth by chance)
    assert len({camera_phase(f"cam{i}") // 0.1 for i in range(40)}) == 10  # every tenth used


def test_a_phase_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="phase"):
        MotionGate(MotionConfig(enabled=True), phase=1.0)
