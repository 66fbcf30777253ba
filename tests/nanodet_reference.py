"""An independent reading of NanoDet-m, for checking vidpipe's ``nanodet`` model type.

Written from NanoDet's own code, not from vidpipe's: the keep-ratio resize matrix of
RangiLyu/nanodet ``nanodet/data/transform/warp.py`` (``get_resize_matrix``: the picture
centred on the input, ``cv2.warpPerspective`` with its default bilinear filter and a 0 border,
boxes mapped back through the inverse matrix as ``warp_boxes`` does), the GFL decoding of
``nanodet/model/head/gfl_head.py`` (softmax over ``reg_max + 1`` bins per side, expectation
times the stride, ``distance2bbox`` clipped to the input), with the anchor points and the
per-anchor best class of the ONNX sample this export comes from
(Kazuhito00/MOT-Tracking-by-Detection-Pipeline ``Detector/nanodet/nanodet_onnx.py``:
``x * stride + 0.5 * (stride - 1)``). Normalisation is done here in numpy and the model runs
in onnxruntime (f32), so neither vidpipe's letterbox, OpenVINO's PrePostProcessor, vidpipe's
decoder nor its NMS takes part. Outputs are taken by name.

Differences from vidpipe that are deliberate and small: the warp places the picture at a
fractional offset and scales it by the exact ratio, where vidpipe truncates the picture's size
to whole pixels and centres it on a whole pixel, so boxes differ by under a pixel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

STRIDES = (8, 16, 32)
REG_MAX = 7
MEAN = np.array([103.53, 116.28, 123.675], np.float32)
STD = np.array([57.375, 57.12, 58.395], np.float32)
SIZE = 416


def resize_matrix(src_w: int, src_h: int, dst_w: int = SIZE, dst_h: int = SIZE) -> np.ndarray:
    """NanoDet's keep-ratio resize: centre the source on the origin, scale, move to the
    destination's centre (3x3)."""
    centre = np.eye(3)
    centre[0, 2], centre[1, 2] = -src_w / 2, -src_h / 2
    ratio = dst_h / src_h if src_w / src_h < dst_w / dst_h else dst_w / src_w
    scale = np.diag([ratio, ratio, 1.0])
    move = np.eye(3)
    move[0, 2], move[1, 2] = 0.5 * dst_w, 0.5 * dst_h
    return move @ scale @ centre


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Greedy NMS of one class, IoU without the +1."""
    order = list(np.argsort(-scores, kind="stable"))
    keep: list[int] = []
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    while order:
        i = order.pop(0)
        keep.append(i)
        rest = np.array(order, dtype=int)
        if not rest.size:
            break
        w = np.clip(
            np.minimum(boxes[i, 2], boxes[rest, 2]) - np.maximum(boxes[i, 0], boxes[rest, 0]),
            0,
            None,
        )
        h = np.clip(
            np.minimum(boxes[i, 3], boxes[rest, 3]) - np.maximum(boxes[i, 1], boxes[rest, 1]),
            0,
            None,
        )
        inter = w * h
        ious = inter / (area[i] + area[rest] - inter)
        order = [int(j) for j, o in zip(rest, ious, strict=True) if o <= iou]
    return keep


def sample_letterbox(image: np.ndarray, resize: str = "linear") -> tuple[np.ndarray, np.ndarray]:
    """The ONNX sample's ``_resize_image``: the long side to 416, the short one truncated to
    whole pixels, centred on a whole pixel with ``copyMakeBorder`` (0); and the 3x3 matrix
    from image to input pixels (per-axis ratios, as the sample maps boxes back)."""
    h, w = image.shape[:2]
    new_h, new_w, top, left = SIZE, SIZE, 0, 0
    if h > w:
        new_w = int(SIZE / (h / w))
        left = int((SIZE - new_w) * 0.5)
    elif h < w:
        new_h = int(SIZE * (h / w))
        top = int((SIZE - new_h) * 0.5)
    flag = cv2.INTER_AREA if resize == "area" else cv2.INTER_LINEAR
    small = cv2.resize(image, (new_w, new_h), interpolation=flag)
    placed = cv2.copyMakeBorder(
        small, top, SIZE - new_h - top, left, SIZE - new_w - left, cv2.BORDER_CONSTANT, value=0
    )
    m = np.array([[new_w / w, 0, left], [0, new_h / h, top], [0, 0, 1]], np.float64)
    return placed, m


class NanoDetReference:
    """NanoDet-m run by onnxruntime with NanoDet's own pre- and post-processing.

    ``resize``: ``linear`` (the sample's letterbox with the bilinear filter NanoDet was
    trained with and vidpipe resizes with), ``area`` (the sample as it is, INTER_AREA), or
    ``warp`` (the training code's warpPerspective at a fractional offset).
    """

    def __init__(self, model: Path, labels: list[str], resize: str = "linear") -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # this export lists its weights as inputs: a warning each
        self.session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name
        self.labels = labels
        self.resize = resize

    def raw(self, image: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The outputs by name, and the 3x3 matrix from image to input pixels."""
        if self.resize == "warp":
            h, w = image.shape[:2]
            m = resize_matrix(w, h)
            placed = cv2.warpPerspective(image, m, dsize=(SIZE, SIZE))
        else:
            placed, m = sample_letterbox(image, self.resize)
        x = ((placed.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)[None]
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, {self.input_name: x}), strict=True)), m

    def detect(
        self, image: np.ndarray, source: str, score: float = 0.30, iou: float = 0.45
    ) -> dict[str, Any]:
        """One image's record in the ``expected.jsonl`` format (boxes in image pixels)."""
        outs, m = self.raw(image)
        boxes, scores = [], []
        for s in STRIDES:
            cls = outs[f"cls_pred_stride_{s}"][0]
            dis = outs[f"dis_pred_stride_{s}"][0].reshape(-1, 4, REG_MAX + 1)
            dist = (_softmax(dis) * np.arange(REG_MAX + 1)).sum(-1) * s
            n = SIZE // s
            xs, ys = np.meshgrid(np.arange(n) * s, np.arange(n) * s)
            cx, cy = xs.ravel() + 0.5 * (s - 1), ys.ravel() + 0.5 * (s - 1)
            b = np.stack([cx - dist[:, 0], cy - dist[:, 1], cx + dist[:, 2], cy + dist[:, 3]], 1)
            boxes.append(np.clip(b, 0, SIZE))
            scores.append(cls)
        box = np.concatenate(boxes)
        all_scores = np.concatenate(scores)
        cls_id, best = all_scores.argmax(1), all_scores.max(1)
        kept = np.flatnonzero(best >= score)
        dets = []
        for c in np.unique(cls_id[kept]):
            idx = kept[cls_id[kept] == c]
            for i in _nms(box[idx], best[idx], iou):
                dets.append((int(c), float(best[idx][i]), box[idx][i]))
        h, w = image.shape[:2]
        inv = np.linalg.inv(m)
        out = []
        for c, sc, b in sorted(dets, key=lambda d: -d[1]):
            corners = np.array([[b[0], b[1], 1], [b[2], b[3], 1], [b[0], b[3], 1], [b[2], b[1], 1]])
            xy = corners @ inv.T
            xy = xy[:, :2] / xy[:, 2:]
            x1, y1 = np.clip(xy[:, 0].min(), 0, w), np.clip(xy[:, 1].min(), 0, h)
            x2, y2 = np.clip(xy[:, 0].max(), 0, w), np.clip(xy[:, 1].max(), 0, h)
            label = self.labels[c] if c < len(self.labels) else str(c)
            out.append({"class_id": c, "label": label, "score": sc, "box": [x1, y1, x2, y2]})
        return {"source": source, "width": w, "height": h, "detections": out}
