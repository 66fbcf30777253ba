"""postprocess(): decode -> class filter -> NMS -> un-letterbox -> clip, on real decoders."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.postprocess.decode import DecodeParams, decode_yolov8
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.types import Letterbox

W, H = 64, 64
PARAMS = DecodeParams(W, H, 0.3)


def yolov8_output(
    dets: list[tuple[tuple[float, float, float, float], float, int]], num_classes: int = 4
):
    """``(4 + C, 84)`` raw output holding ``(box xyxy in input px, score, class)`` triples."""
    out = np.zeros((4 + num_classes, 84), np.float32)
    for i, ((x1, y1, x2, y2), score, cid) in enumerate(dets):
        out[:4, i] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        out[4 + cid, i] = score
    return out


@pytest.mark.parametrize(
    ("box", "letterbox", "want"),
    [
        ((8, 4, 24, 20), Letterbox(1.0, 64, 64), (8, 4, 24, 20)),
        ((8, 4, 24, 20), Letterbox(0.5, 128, 128), (16, 8, 48, 40)),
        ((8, 4, 24, 20), Letterbox(0.25, 256, 100), (32, 16, 96, 80)),
        ((40, 2, 70, 30), Letterbox(0.5, 100, 128), (80, 4, 100, 60)),  # clipped at src_w
        ((-6, -4, 10, 60), Letterbox(0.5, 128, 100), (0, 0, 20, 100)),  # clipped at 0 and src_h
        ((10, 50, 20, 60), Letterbox(0.5, 128, 80), (20, 80, 40, 80)),  # wholly in padding
    ],
    ids=["identity", "half", "non-square", "clip-right", "clip-left-top-bottom", "in-padding"],
)
def test_unletterbox_and_clip(box, letterbox, want):
    det = postprocess([yolov8_output([(box, 0.9, 1)])], letterbox, decode_yolov8, PARAMS, 0.45)
    np.testing.assert_allclose(det.xyxy, [want], atol=1e-4)
    assert det.xyxy.dtype == np.float32


@pytest.mark.parametrize(
    ("class_ids", "want_classes"),
    [(None, [2, 0, 1]), (frozenset({0, 2}), [2, 0]), (frozenset({3}), []), (frozenset(), [])],
    ids=["all", "two", "absent", "empty-set"],
)
def test_class_filter(class_ids, want_classes):
    out = yolov8_output(
        [((0, 0, 10, 10), 0.8, 0), ((20, 20, 30, 30), 0.5, 1), ((40, 40, 50, 50), 0.9, 2)]
    )
    det = postprocess([out], Letterbox(1.0, W, H), decode_yolov8, PARAMS, 0.45, class_ids)
    np.testing.assert_array_equal(det.class_id, want_classes)


def test_nms_is_class_aware_and_result_sorted():
    out = yolov8_output(
        [
            ((0, 0, 20, 20), 0.6, 0),
            ((1, 1, 20, 20), 0.7, 0),  # same class, IoU 0.9: suppresses the 0.6 box
            ((0, 0, 20, 20), 0.5, 3),  # other class, same place: kept
            ((40, 40, 60, 60), 0.95, 0),
        ]
    )
    det = postprocess([out], Letterbox(1.0, W, H), decode_yolov8, PARAMS, 0.45)
    np.testing.assert_allclose(det.score, [0.95, 0.7, 0.5])
    np.testing.assert_array_equal(det.class_id, [0, 0, 3])


def test_score_threshold_comes_from_params():
    out = yolov8_output([((0, 0, 10, 10), 0.4, 0), ((20, 20, 30, 30), 0.6, 1)])
    strict = DecodeParams(W, H, 0.5)
    det = postprocess([out], Letterbox(1.0, W, H), decode_yolov8, strict, 0.45)
    np.testing.assert_array_equal(det.class_id, [1])


def test_nothing_detected_gives_empty_detections():
    det = postprocess([yolov8_output([])], Letterbox(0.5, 128, 128), decode_yolov8, PARAMS, 0.45)
    assert len(det) == 0 and det.xyxy.shape == (0, 4)
