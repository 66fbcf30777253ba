"""The overload bench's camera counts given as multiples of a measured capacity."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.overload import _cameras

WALKWAY = "videos/one-by-one-person-detection.mp4"  # 10 fps


def test_a_plain_count_is_taken_as_given(assets_dir: Path) -> None:
    assert _cameras("24", None, assets_dir / WALKWAY) == 24


@pytest.mark.parametrize(("count", "fps", "cameras"), [("3x", 100.0, 30), ("1.5x", 93.8, 15)])
def test_a_multiple_is_of_the_cameras_the_capacity_holds_at_the_clips_rate(
    assets_dir: Path, count: str, fps: float, cameras: int
) -> None:
    # 1.5 x 93.8 fps / 10 fps = 14.07 cameras: rounded up, so the load is at least the multiple
    assert _cameras(count, {"total_fps": fps}, assets_dir / WALKWAY) == cameras
