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
    area_a = _area(a64)
    area_b = _area(b64)
    top_left = np.maximum(a64[:, None, :2], b64[None, :, :2])
    bottom_right = np.minimum(a64[:, None, 2:], b64[None, :, 2:])
    wh = np.clip(bottom_right - top_left, 0.0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def _area(xyxy: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    wh = np.clip(xyxy[:, 2:] - xyxy[:, :2], 0.0, None)
    return wh[:, 0] * wh[:, 1]


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
    classes = None if class_id is None else np.asarray(class_id).reshape(-1)
    if classes is not None and classes.shape != scores.shape:
        raise ValueError(f"nms: score has shape {scores.shape} but class_id has {classes.shape}")
    # Stable sort: equal scores keep their input order, so results are reproducible.
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best, rest = order[0], order[1:]
        keep.append(int(best))
        suppress = box_iou(boxes[best], boxes[rest])[0] > iou_threshold
        if classes is not None:
            suppress &= classes[rest] == classes[best]
        order = rest[~suppress]
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
