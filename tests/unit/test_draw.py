"""draw_detections(): annotates a copy, never the input."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.labels import Labels
from vidpipe.postprocess.draw import PALETTE, class_colour, draw_detections
from vidpipe.types import Detections

LABELS = Labels(("person", "bicycle", "car"))


def detections(rows: list[tuple[tuple[float, float, float, float], float, int]]) -> Detections:
    if not rows:
        return Detections.empty()
    boxes, scores, classes = zip(*rows, strict=True)
    return Detections(np.array(boxes, np.float32), np.array(scores), np.array(classes))


def grey(height: int = 120, width: int = 160) -> np.ndarray:
    return np.full((height, width, 3), 60, np.uint8)


@pytest.mark.parametrize(
    "rows",
    [
        [((40, 50, 100, 110), 0.87, 0)],
        [((0, 0, 30, 30), 0.5, 2), ((60, 60, 150, 115), 0.99, 1)],
        [((-20, -20, 200, 200), 0.4, 1)],  # box larger than the frame
        [((40, 40, 80, 80), 0.6, 57)],  # class without a label: drawn as its number
    ],
    ids=["one", "two", "outside-frame", "unlabelled"],
)
def test_draws_on_a_copy_inside_box_area(rows):
    image = grey()
    before = image.copy()
    out = draw_detections(image, detections(rows), LABELS)
    np.testing.assert_array_equal(image, before)
    assert out is not image and not np.shares_memory(out, image)
    assert out.shape == image.shape and out.dtype == np.uint8
    for (x1, y1, x2, y2), _, _ in rows:
        x1, y1 = max(int(x1), 0), max(int(y1), 0)
        x2, y2 = min(int(x2), image.shape[1] - 1), min(int(y2), image.shape[0] - 1)
        region = (slice(max(y1 - 3, 0), y2 + 3), slice(max(x1 - 3, 0), x2 + 3))
        assert np.any(out[region] != image[region])


def test_no_detections_returns_equal_copy():
    image = grey()
    out = draw_detections(image, Detections.empty(), LABELS)
    np.testing.assert_array_equal(out, image)
    assert not np.shares_memory(out, image)


def test_read_only_input_is_accepted():
    image = grey()
    image.setflags(write=False)
    out = draw_detections(image, detections([((10, 10, 50, 50), 0.9, 0)]), LABELS)
    assert out.flags.writeable


def test_pixels_far_from_boxes_are_untouched():
    image = grey()
    out = draw_detections(image, detections([((10, 40, 40, 70), 0.9, 0)]), LABELS)
    np.testing.assert_array_equal(out[90:, 100:], image[90:, 100:])


def test_box_is_drawn_in_its_class_colour():
    image = np.zeros((200, 200, 3), np.uint8)
    out = draw_detections(image, detections([((50, 100, 150, 180), 0.9, 2)]), LABELS)
    # middle of the bottom edge: far from the caption, on the 1-px anti-aliased line
    assert tuple(int(v) for v in out[180, 100]) == class_colour(2)


def test_palette_is_deterministic_and_wraps():
    assert class_colour(0) == PALETTE[0]
    assert class_colour(len(PALETTE) + 5) == class_colour(5)
    assert len(set(PALETTE)) == len(PALETTE)


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((10, 10), np.uint8),
        np.zeros((10, 10, 4), np.uint8),
        np.zeros((10, 10, 3), np.float32),
    ],
    ids=["grey", "bgra", "float"],
)
def test_rejects_non_bgr_uint8(image):
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8"):
        draw_detections(image, Detections.empty(), LABELS)
