"""``crop_box``: the integer crop both crop paths cut from a detection box."""

from __future__ import annotations

from vidpipe.preprocess.crops import crop_box


def test_crop_box_rounds_and_clips() -> None:
    assert crop_box((10.4, 20.6, 50.5, 80.49), 640, 360) == (10, 21, 50, 80)
    assert crop_box((-5.0, -3.0, 700.0, 400.0), 640, 360) == (0, 0, 640, 360)
    assert crop_box((650.0, 10.0, 700.0, 40.0), 640, 360) is None
    assert crop_box((5.2, 5.0, 5.4, 9.0), 640, 360) is None  # rounds to no width
