"""IoU and NMS: hand-made tables plus a brute-force cross-check on random boxes."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.postprocess import nms as nms_module
from vidpipe.postprocess.nms import box_iou, nms, nms_class_aware


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ([[0, 0, 10, 10]], [[0, 0, 10, 10]], [[1.0]]),
        ([[0, 0, 10, 10]], [[20, 20, 30, 30]], [[0.0]]),
        ([[0, 0, 10, 10]], [[10, 0, 20, 10]], [[0.0]]),  # touching edges do not overlap
        ([[0, 0, 10, 10]], [[0, 0, 10, 5]], [[0.5]]),  # 0.545 with the legacy +1
        ([[0, 0, 10, 10]], [[5, 0, 15, 10]], [[50 / 150]]),
        ([[0, 0, 10, 10]], [[2, 2, 4, 4]], [[0.04]]),
        ([[5, 5, 5, 5]], [[5, 5, 5, 5]], [[0.0]]),  # two empty boxes: no division by zero
        (
            [[0, 0, 10, 10], [0, 0, 20, 20]],
            [[0, 0, 10, 10], [10, 10, 20, 20], [0, 0, 20, 10]],
            [[1.0, 0.0, 0.5], [0.25, 0.25, 0.5]],
        ),
    ],
    ids=["same", "disjoint", "touching", "no-plus-one", "half-shift", "contained", "empty", "2x3"],
)
def test_box_iou(a, b, want):
    np.testing.assert_allclose(
        box_iou(np.array(a, np.float32), np.array(b, np.float32)), want, atol=1e-7
    )


@pytest.mark.parametrize(("n", "m"), [(0, 0), (0, 3), (3, 0)])
def test_box_iou_empty_shapes(n, m):
    assert box_iou(np.zeros((n, 4)), np.zeros((m, 4))).shape == (n, m)


@pytest.fixture(params=["matrix", "rows"])
def nms_path(request, monkeypatch):
    """Run a test through both NMS implementations (IoU matrix, and row per kept box)."""
    if request.param == "rows":
        monkeypatch.setattr(nms_module, "MATRIX_MAX_BOXES", 0)
    return request.param


@pytest.mark.parametrize(
    ("boxes", "scores", "threshold", "want"),
    [
        ([], [], 0.5, []),
        ([[0, 0, 10, 10]], [0.3], 0.5, [0]),
        ([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 11, 11]], [0.5, 0.9, 0.7], 0.5, [1]),
        ([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]], [0.2, 0.9, 0.5], 0.5, [1, 2, 0]),
        ([[0, 0, 10, 10], [0, 0, 10, 5]], [0.9, 0.8], 0.5, [0, 1]),  # IoU 0.5 is not > 0.5
        ([[0, 0, 10, 10], [0, 0, 10, 5]], [0.9, 0.8], 0.49, [0]),
        ([[0, 0, 10, 10], [0, 0, 10, 5]], [0.9, 0.8], 1.0, [0, 1]),
        ([[0, 0, 10, 10], [0, 0, 10, 10]], [0.6, 0.6], 0.5, [0]),  # tie: first in input order
        # greedy: B is suppressed by A, so B cannot suppress C (IoU(A, C) = 0)
        ([[0, 0, 10, 10], [5, 0, 15, 10], [10, 0, 20, 10]], [0.9, 0.8, 0.7], 0.3, [0, 2]),
    ],
    ids=[
        "no-boxes",
        "single",
        "all-overlap",
        "disjoint-sorted",
        "boundary-kept",
        "boundary-suppressed",
        "threshold-1",
        "tie",
        "greedy-chain",
    ],
)
def test_nms(boxes, scores, threshold, want, nms_path):
    keep = nms(np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32), threshold)
    assert keep.dtype == np.intp
    np.testing.assert_array_equal(keep, want)


@pytest.mark.parametrize(
    ("boxes", "scores", "classes", "want"),
    [
        ([], [], [], []),
        ([[0, 0, 10, 10], [0, 0, 10, 10]], [0.9, 0.8], [0, 1], [0, 1]),
        ([[0, 0, 10, 10], [0, 0, 10, 10]], [0.8, 0.9], [3, 3], [1]),
        (
            [[0, 0, 10, 10], [1, 0, 10, 10], [0, 0, 10, 10], [1, 0, 10, 10]],
            [0.9, 0.8, 0.7, 0.95],
            [0, 0, 1, 1],
            [3, 0],
        ),
    ],
    ids=["no-boxes", "different-classes-kept", "same-class-suppressed", "two-classes-two-pairs"],
)
def test_nms_class_aware(boxes, scores, classes, want, nms_path):
    keep = nms_class_aware(
        np.array(boxes, np.float32).reshape(-1, 4),
        np.array(scores, np.float32),
        np.array(classes, np.int32),
        0.45,
    )
    np.testing.assert_array_equal(keep, want)


def test_nms_class_aware_many_classes(nms_path):
    # 80 classes, each with two identical boxes at the same place: one per class survives.
    classes = np.repeat(np.arange(80, dtype=np.int32), 2)
    boxes = np.tile(np.array([[10, 10, 50, 50]], np.float32), (160, 1))
    scores = np.linspace(0.99, 0.2, 160, dtype=np.float32)
    keep = nms_class_aware(boxes, scores, classes, 0.45)
    np.testing.assert_array_equal(keep, np.arange(0, 160, 2))
    assert len(nms(boxes, scores, 0.45)) == 1


def test_nms_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="score has"):
        nms(np.zeros((3, 4)), np.zeros(2), 0.5)
    with pytest.raises(ValueError, match="class_id has"):
        nms_class_aware(np.zeros((3, 4)), np.zeros(3), np.zeros(2), 0.5)


def brute_force_nms(boxes, scores, classes, threshold):
    """Textbook greedy NMS with Python loops, as an independent reference."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep: list[int] = []
    for i in order:
        if all(
            classes[i] != classes[k]
            or box_iou(boxes[i : i + 1], boxes[k : k + 1])[0, 0] <= threshold
            for k in keep
        ):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("num_classes", [1, 3])
def test_nms_matches_brute_force_on_random_boxes(seed, num_classes, nms_path):
    rng = np.random.default_rng(seed)
    n = 60
    xy = rng.uniform(0, 100, (n, 2))
    wh = rng.uniform(5, 40, (n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    scores = rng.uniform(0, 1, n).astype(np.float32)
    classes = rng.integers(0, num_classes, n).astype(np.int32)
    keep = nms_class_aware(boxes, scores, classes, 0.45)
    assert keep.tolist() == brute_force_nms(boxes, scores, classes, 0.45)
    assert np.all(np.diff(scores[keep]) <= 0)
