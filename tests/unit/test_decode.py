"""Decoders: raw tensors built from known boxes must decode back to those boxes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vidpipe.postprocess.decode import (
    DECODERS,
    DecodeParams,
    _yolox_grid,
    check_output_shapes,
    decode_nanodet,
    decode_ssd,
    decode_yolov8,
    decode_yolox,
    num_anchors,
)

# A small input keeps the tensors readable: 64x64 -> 8*8 + 4*4 + 2*2 = 84 anchors.
W, H = 64, 64


def yolox_index(stride: int, gx: int, gy: int, input_w: int = W, input_h: int = H) -> int:
    """Row of anchor (gx, gy) of the head with ``stride``: heads 8, 16, 32; row-major."""
    index = 0
    for s in (8, 16, 32):
        if s == stride:
            return index + gy * (input_w // s) + gx
        index += (input_w // s) * (input_h // s)
    raise ValueError(stride)


def yolox_row(
    stride: int, gx: int, gy: int, box_xyxy: tuple[float, ...], obj: float, probs: list[float]
) -> np.ndarray:
    """The raw YOLOX row that decodes to ``box_xyxy`` at anchor (gx, gy)."""
    x1, y1, x2, y2 = box_xyxy
    cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
    head = [cx / stride - gx, cy / stride - gy, math.log(w / stride), math.log(h / stride), obj]
    return np.array(head + probs, dtype=np.float32)


def yolox_tensor(rows: dict[int, np.ndarray], num_classes: int, w: int = W, h: int = H):
    out = np.zeros((num_anchors(w, h), 5 + num_classes), np.float32)
    for index, row in rows.items():
        out[index] = row
    return out


@pytest.mark.parametrize(
    ("stride", "gx", "gy", "box", "obj", "probs", "want_class", "want_score"),
    [
        (8, 0, 0, (0.0, 0.0, 8.0, 8.0), 1.0, [1.0], 0, 1.0),
        (8, 7, 7, (50.0, 52.0, 66.0, 60.0), 0.5, [0.2, 0.8], 1, 0.4),
        (16, 1, 2, (10.0, 30.0, 40.0, 50.0), 0.9, [0.5, 0.1, 0.6], 2, 0.54),
        (32, 1, 0, (30.0, 2.0, 62.0, 40.0), 0.8, [0.75, 0.25], 0, 0.6),
        (32, 0, 1, (-5.0, 40.0, 20.0, 70.0), 1.0, [0.0, 0.0, 0.0, 0.9], 3, 0.9),
    ],
)
def test_yolox_decodes_known_box(stride, gx, gy, box, obj, probs, want_class, want_score):
    out = yolox_tensor(
        {yolox_index(stride, gx, gy): yolox_row(stride, gx, gy, box, obj, probs)}, len(probs)
    )
    det = decode_yolox([out], DecodeParams(W, H, 0.3))
    assert len(det) == 1
    np.testing.assert_allclose(det.xyxy[0], box, atol=1e-4)
    assert det.class_id[0] == want_class
    assert det.score[0] == pytest.approx(want_score, abs=1e-6)


def test_yolox_anchor_order_is_stride_then_row_major():
    grid, stride = _yolox_grid(W, H)
    assert grid.shape == (84, 2) and stride.shape == (84, 1)
    i = yolox_index(16, 1, 2)
    assert i == 64 + 2 * 4 + 1
    assert tuple(grid[i]) == (1.0, 2.0) and stride[i, 0] == 16.0
    assert tuple(grid[1]) == (1.0, 0.0)  # gx varies fastest


def test_yolox_grid_is_cached_and_read_only():
    first = _yolox_grid(96, 64)
    assert _yolox_grid(96, 64) is first
    assert not first[0].flags.writeable and not first[1].flags.writeable
    assert first[0].shape[0] == num_anchors(96, 64) == 12 * 8 + 6 * 4 + 3 * 2


def test_yolox_non_square_input():
    w, h = 96, 64
    box = (60.0, 10.0, 90.0, 30.0)
    index = yolox_index(8, 9, 2, w, h)
    out = yolox_tensor({index: yolox_row(8, 9, 2, box, 1.0, [0.9])}, 1, w, h)
    det = decode_yolox([out], DecodeParams(w, h, 0.5))
    np.testing.assert_allclose(det.xyxy, [box], atol=1e-4)


@pytest.mark.parametrize(
    ("threshold", "kept"),
    [(0.0, 84), (0.25, 1), (np.nextafter(np.float32(0.25), np.float32(1)), 0), (0.9, 0)],
)
def test_yolox_score_threshold_is_inclusive(threshold, kept):
    # 0.5 * 0.5 is exactly 0.25 in float32: the boundary is tested exactly.
    row = yolox_row(8, 3, 3, (20.0, 20.0, 30.0, 30.0), 0.5, [0.5])
    out = yolox_tensor({yolox_index(8, 3, 3): row}, 1)
    det = decode_yolox([out], DecodeParams(W, H, float(threshold)))
    assert len(det) == kept


def test_yolox_nothing_above_threshold_gives_empty_detections():
    det = decode_yolox([yolox_tensor({}, 80)], DecodeParams(W, H, 0.3))
    assert len(det) == 0
    assert det.xyxy.shape == (0, 4) and det.score.shape == (0,) and det.class_id.shape == (0,)


@pytest.mark.parametrize(
    "shape", [(83, 85), (84, 5), (1, 84, 85), (84,)], ids=["anchors", "no-class", "batched", "1d"]
)
def test_yolox_rejects_wrong_shape(shape):
    with pytest.raises(ValueError, match=r"YOLOX output has shape"):
        decode_yolox([np.zeros(shape, np.float32)], DecodeParams(W, H, 0.3))


def test_decoders_reject_several_outputs():
    out = yolox_tensor({}, 1)
    with pytest.raises(ValueError, match="exactly 1 output, got 2"):
        decode_yolox([out, out], DecodeParams(W, H, 0.3))


def yolov8_tensor(boxes: list[tuple[float, ...]], scores: list[list[float]], n: int = 84):
    """``(4 + C, n)`` Ultralytics output with the given boxes in its first columns."""
    out = np.zeros((4 + len(scores[0]), n), np.float32)
    for i, ((x1, y1, x2, y2), cls) in enumerate(zip(boxes, scores, strict=True)):
        out[:4, i] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        out[4:, i] = cls
    return out


@pytest.mark.parametrize(
    ("boxes", "scores", "threshold", "want_xyxy", "want_score", "want_class"),
    [
        ([(1, 2, 11, 22)], [[0.9]], 0.5, [(1, 2, 11, 22)], [0.9], [0]),
        ([(1, 2, 11, 22)], [[0.2, 0.7, 0.4]], 0.5, [(1, 2, 11, 22)], [0.7], [1]),
        (
            [(0, 0, 4, 4), (10, 10, 30, 20)],
            [[0.3, 0.1], [0.1, 0.6]],
            0.5,
            [(10, 10, 30, 20)],
            [0.6],
            [1],
        ),
        ([(0, 0, 4, 4)], [[0.5]], 0.5, [(0, 0, 4, 4)], [0.5], [0]),
        ([(0, 0, 4, 4)], [[0.49]], 0.5, [], [], []),
    ],
    ids=["one-class", "best-class", "two-boxes", "at-threshold", "below"],
)
def test_yolov8_decodes_known_boxes(boxes, scores, threshold, want_xyxy, want_score, want_class):
    det = decode_yolov8([yolov8_tensor(boxes, scores)], DecodeParams(W, H, threshold))
    np.testing.assert_allclose(det.xyxy, np.reshape(want_xyxy, (-1, 4)), atol=1e-5)
    np.testing.assert_allclose(det.score, want_score, atol=1e-6)
    np.testing.assert_array_equal(det.class_id, want_class)


@pytest.mark.parametrize("shape", [(4, 84), (1, 84, 84), (84,)])
def test_yolov8_rejects_wrong_shape(shape):
    with pytest.raises(ValueError, match=r"YOLOv8 output has shape"):
        decode_yolov8([np.zeros(shape, np.float32)], DecodeParams(W, H, 0.3))


def ssd_tensor(rows: list[list[float]], n: int = 10) -> np.ndarray:
    out = np.zeros((1, n, 7), np.float32)
    if rows:
        out[0, : len(rows)] = rows
    if len(rows) < n:
        out[0, len(rows), 0] = -1
    return out


@pytest.mark.parametrize(
    ("rows", "size", "want_xyxy", "want_class"),
    [
        ([[0, 3, 0.9, 0.1, 0.2, 0.5, 1.0]], (100, 50), [(10, 10, 50, 50)], [3]),
        ([[0, 1, 0.2, 0, 0, 1, 1], [0, 2, 0.8, 0, 0, 0.5, 0.5]], (64, 64), [(0, 0, 32, 32)], [2]),
        ([[0, 1, 0.5, 0, 0, 1, 1]], (64, 32), [(0, 0, 64, 32)], [1]),
        ([], (64, 64), [], []),
    ],
    ids=["scaled-non-square", "below-threshold-dropped", "at-threshold", "empty"],
)
def test_ssd_decodes_known_rows(rows, size, want_xyxy, want_class):
    det = decode_ssd([ssd_tensor(rows)], DecodeParams(size[0], size[1], 0.5))
    np.testing.assert_allclose(det.xyxy, np.reshape(want_xyxy, (-1, 4)), atol=1e-4)
    np.testing.assert_array_equal(det.class_id, want_class)


def test_ssd_stops_at_first_negative_image_id():
    out = ssd_tensor([[0, 1, 0.9, 0, 0, 0.5, 0.5]])
    out[0, 2] = [0, 7, 0.99, 0, 0, 1, 1]  # after the terminator: must be ignored
    det = decode_ssd([out], DecodeParams(W, H, 0.3))
    np.testing.assert_array_equal(det.class_id, [1])


def test_ssd_accepts_unbatched_rows_and_rejects_wrong_width():
    rows = ssd_tensor([[0, 1, 0.9, 0, 0, 0.5, 0.5]])[0]
    assert len(decode_ssd([rows], DecodeParams(W, H, 0.3))) == 1
    with pytest.raises(ValueError, match=r"SSD output has shape \(1, 10, 6\)"):
        decode_ssd([np.zeros((1, 10, 6), np.float32)], DecodeParams(W, H, 0.3))


def test_decoder_registry():
    assert set(DECODERS) == {"yolox", "yolov8", "ssd", "nanodet"}
    assert DECODERS["yolox"] is decode_yolox and DECODERS["ssd"] is decode_ssd
    assert DECODERS["yolov8"] is decode_yolov8 and DECODERS["nanodet"] is decode_nanodet


NANODET_416 = [(1, n, 80) for n in (2704, 676, 169)] + [(1, n, 32) for n in (2704, 676, 169)]


@pytest.mark.parametrize(
    ("model_type", "shapes", "size", "labels", "want_classes", "want_problem"),
    [
        ("yolox", [(1, 3549, 85)], 416, 80, 80, None),
        ("yolox", [(-1, 3549, 85)], 416, None, 80, None),
        ("yolox", [(0, 3549, 85)], 416, 80, 80, None),
        ("yolox", [(1, 2100, 85)], 320, 80, 80, None),
        ("yolox", [(1, 3549, 85)], 320, 80, 0, "YOLOX for input 320x320: expected (1, 2100, 5+C)"),
        ("yolox", [(1, 3549, 85)], 416, 91, 80, "has 91 names but the model outputs 80 classes"),
        ("yolox", [(1, 85, 3549)], 416, 80, 0, "(1, 85, 3549) does not look like YOLOX"),
        ("yolox", [(1, 3549, 85), (1, 10)], 416, 80, 0, "exactly 1 output"),
        ("yolov8", [(1, 84, 3549)], 416, 80, 80, None),
        ("yolov8", [(-1, 84, 3549)], 416, None, 80, None),
        ("yolov8", [(1, 3549, 84)], 416, 80, 0, "it looks transposed"),
        ("yolov8", [(1, 84, 3549)], 416, 79, 80, "label file has 79 names"),
        ("ssd", [(1, 1, 200, 7)], 300, 91, 91, None),
        ("ssd", [(1, 1, 200, 7)], 300, None, 0, None),
        ("ssd", [(1, 200, 7)], 300, 91, 91, "expected (1, 1, N, 7)"),
        ("nanodet", NANODET_416, 416, 80, 80, None),
        ("nanodet", NANODET_416[3:] + NANODET_416[:3], 416, None, 80, None),
        ("nanodet", NANODET_416, 416, 79, 80, "label file has 79 names"),
        ("nanodet", NANODET_416, 320, 80, 0, "no class-score and 32-bin distance pair with 1600"),
        ("nanodet", [(1, 3549, 85)], 416, 80, 0, "expected 6 outputs"),
        ("yolox", NANODET_416, 416, 80, 0, "exactly 1 output"),
        (
            "yolo",
            [],
            416,
            80,
            0,
            "unknown model type 'yolo'; valid types: nanodet, ssd, yolov8, yolox",
        ),
    ],
)
def test_check_output_shapes(model_type, shapes, size, labels, want_classes, want_problem):
    num_classes, problems = check_output_shapes(model_type, shapes, size, size, labels)
    assert num_classes == want_classes
    if want_problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and want_problem in problems[0], problems
