"""Box IoU and greedy non-maximum suppression over numpy arrays.

IoU is computed without the legacy ``+1`` on widths and heights (boxes are continuous
coordinates). A box is suppressed when its IoU with a kept, higher-scoring box is strictly
greater than the threshold, as in ``torchvision.ops.nms``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def box_iou(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Pairwise intersection over union.

    Args:
        a: ``(N, 4)`` boxes ``x1, y1, x2, y2``.
        b: ``(M, 4)`` boxes ``x1, y1, x2, y2``.

    Returns:
        ``(N, M)`` float64 IoU; 0 where the union is empty (two degenerate boxes).
    """
    a64 = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    # Per-coordinate columns: broadcasting (N, 1) against (M,) is several times faster than
    # broadcasting the strided (N, 1, 2) against (1, M, 2).
    ax1, ay1, ax2, ay2 = (a64[:, i : i + 1] for i in range(4))
    return _iou(ax1, ay1, ax2, ay2, _area(a64)[:, None], b64, _area(b64))


def _area(xyxy: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``(N,)`` areas of ``(N, 4)`` boxes; 0 for inverted boxes."""
    w = np.maximum(xyxy[:, 2] - xyxy[:, 0], 0.0)
    h = np.maximum(xyxy[:, 3] - xyxy[:, 1], 0.0)
    return w * h


def _iou(
    ax1: npt.ArrayLike,
    ay1: npt.ArrayLike,
    ax2: npt.ArrayLike,
    ay2: npt.ArrayLike,
    area_a: npt.ArrayLike,
    b: npt.NDArray[np.float64],
    area_b: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """IoU of boxes ``a`` (given as broadcastable coordinates) with ``(M, 4)`` boxes ``b``."""
    iw = np.minimum(ax2, b[:, 2]) - np.maximum(ax1, b[:, 0])
    ih = np.minimum(ay2, b[:, 3]) - np.maximum(ay1, b[:, 1])
    inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)
    union = np.add(area_a, area_b) - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


#: Up to this many candidates, NMS computes the whole IoU matrix at once (2 MiB of float64
#: at the limit); above it, one row per kept box, to bound memory when thresholds are low.
MATRIX_MAX_BOXES = 512


def _greedy(
    xyxy: npt.ArrayLike,
    score: npt.ArrayLike,
    class_id: npt.ArrayLike | None,
    iou_threshold: float,
) -> npt.NDArray[np.intp]:
    boxes = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(score).reshape(-1)
    if boxes.shape[0] != scores.shape[0]:
        raise ValueError(f"nms: xyxy has shape {boxes.shape} but score has {scores.shape}")
    classes = np.zeros(scores.shape, np.int64) if class_id is None else np.asarray(class_id)
    if classes.shape != scores.shape:
        raise ValueError(f"nms: score has shape {scores.shape} but class_id has {classes.shape}")
    # Stable sort: equal scores keep their input order, so results are reproducible.
    order = np.argsort(-scores, kind="stable")
    boxes, classes = boxes[order], classes[order]
    if len(order) <= MATRIX_MAX_BOXES:
        kept = _greedy_matrix(boxes, classes, iou_threshold)
    else:
        kept = _greedy_rows(boxes, classes, iou_threshold)
    return order[kept].astype(np.intp, copy=False)


def _greedy_matrix(
    boxes: npt.NDArray[np.float64], classes: np.ndarray, iou_threshold: float
) -> npt.NDArray[np.intp]:
    """Greedy NMS over boxes sorted by score, with the IoU matrix computed once."""
    overlaps = (box_iou(boxes, boxes) > iou_threshold) & (classes[:, None] == classes[None, :])
    removed = np.zeros(len(boxes), dtype=bool)
    keep: list[int] = []
    for i in range(len(boxes)):
        if not removed[i]:
            keep.append(i)
            removed |= overlaps[i]
    return np.asarray(keep, dtype=np.intp)


def _greedy_rows(
    boxes: npt.NDArray[np.float64], classes: np.ndarray, iou_threshold: float
) -> npt.NDArray[np.intp]:
    """Greedy NMS over boxes sorted by score, one IoU row per kept box (O(N) memory)."""
    index = np.arange(len(boxes))
    areas = _area(boxes)
    keep: list[int] = []
    while index.size:
        keep.append(int(index[0]))
        x1, y1, x2, y2 = boxes[0]
        iou = _iou(x1, y1, x2, y2, areas[0], boxes[1:], areas[1:])
        survive = (iou <= iou_threshold) | (classes[1:] != classes[0])
        index, boxes = index[1:][survive], boxes[1:][survive]
        areas, classes = areas[1:][survive], classes[1:][survive]
    return np.asarray(keep, dtype=np.intp)


def nms(xyxy: npt.ArrayLike, score: npt.ArrayLike, iou_threshold: float) -> npt.NDArray[np.intp]:
    """Class-agnostic greedy NMS.

    Args:
        xyxy: ``(N, 4)`` boxes ``x1, y1, x2, y2``.
        score: ``(N,)`` confidences.
        iou_threshold: a box whose IoU with a kept higher-scoring box exceeds this is dropped.

    Returns:
        ``(K,)`` indices into the inputs of the kept boxes, by score descending (ties in
        input order).
    """
    return _greedy(xyxy, score, None, iou_threshold)


def nms_class_aware(
    xyxy: npt.ArrayLike,
    score: npt.ArrayLike,
    class_id: npt.ArrayLike,
    iou_threshold: float,
) -> npt.NDArray[np.intp]:
    """Greedy NMS in which boxes of different classes never suppress each other.

    Args:
        xyxy: ``(N, 4)`` boxes ``x1, y1, x2, y2``.
        score: ``(N,)`` confidences.
        class_id: ``(N,)`` integer classes.
        iou_threshold: a box whose IoU with a kept higher-scoring box of the same class
            exceeds this is dropped.

    Returns:
        ``(K,)`` indices into the inputs of the kept boxes, by score descending (ties in
        input order).
    """
    return _greedy(xyxy, score, class_id, iou_threshold)
