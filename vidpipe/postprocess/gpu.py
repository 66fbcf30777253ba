"""Decode, score filter and class-aware NMS for a whole batch, on the GPU (PyTorch).

The same function as :func:`vidpipe.postprocess.pipeline.postprocess` with the decoders of
:mod:`vidpipe.postprocess.decode`, for a batch of outputs in device memory, such that only the
candidates come back to the host: a few hundred bytes per frame instead of, for YOLOX-Nano
at 416, a 1.2 MB float output.

:class:`GpuPostprocess` holds what every model type shares: the score filter's last step,
the class masks, NMS, un-letterboxing and the one small copy to the host. A model type says
which rows can be candidates and which columns to bring back (``_columns``) and how their
boxes are decoded (``_boxes``), and registers itself in :data:`GPU_POSTPROCESSORS`
(``register_gpu_postprocess``); an executor that postprocesses on the device looks the model
type up there.

The split between device and host is set by the GIL, not by arithmetic. Every PyTorch call
gives up the GIL and takes it back, and in a process with a hundred camera threads each
take-back waits behind them: 5-15 ms (``python -m benchmarks.overload_model``; on the H200
the completion threads sat here while the scheduler waited for their I/O sets, and a process
inferring 1,322 fps at 64 cameras fell to 48 at 96). So the device does only what needs the
whole output, in about 15 calls and one copy: the best class, the score, the filter at the
batch's lowest threshold, the class masks, and the gather of the candidate rows. Everything
after it is numpy on a few hundred rows, which keeps the GIL: each image's own threshold,
the box decode (the CPU decoder's own formulas, so the boxes are the CPU path's bit for
bit), NMS and un-letterboxing. The device path took about 100 PyTorch calls per batch when
the NMS, the boxes and the un-letterboxing ran there.

It matches the CPU path step by step: candidates are the rows the CPU decoder keeps at the
image's threshold (YOLOX: objectness and ``objectness * best class probability`` at or above
it; YOLOv8: the best class score; SSD: the confidence, up to the first row with
``image_id < 0``); the class filter; greedy NMS in score order (stable, ties in row order)
where a box is dropped when its IoU with a kept box of the same image and class is strictly
above the threshold; IoU in float64 without the legacy ``+1``; boxes divided by the letterbox
scale and clipped to the frame.

Greedy NMS is sequential, so it is solved as a fixed point instead of one box at a time:
``keep[i] = not any(keep[j] and overlap[j, i] for j ranked before i)``. Starting from
"keep everything", each pass fixes at least the next box in rank order, and the unique
solution of that equation is the greedy result; a pass that changes nothing proves it. Real
frames converge in a handful of passes. Only pairs of the same image and class are compared
(a list of pairs, not a matrix over the batch). An image with more than :data:`MAX_MATRIX`
candidates (a score threshold near zero) takes the CPU path for that image, and the caller
can count it (``host_fallbacks``).

torch is imported lazily by the caller's executor: this module only touches the ``torch``
object it is given, so importing it costs nothing on a CPU-only install. The code runs on CPU
tensors too (the tests compare it with the CPU decoders there).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from vidpipe.postprocess.decode import (
    DECODERS,
    DecodeParams,
    _cxcywh_to_xyxy,
    _yolox_grid,
)
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.types import Detections, Letterbox

#: Most candidates of one image suppressed here; an image with more takes the CPU path.
MAX_MATRIX = 2048
#: Most same-image, same-class pairs compared at once (float64: 16 MiB a column).
_MAX_PAIRS = MAX_MATRIX * MAX_MATRIX // 2

# Columns of the rows brought back from the device: the image, the row of the output, the
# score and the class, then each model type's own (``_columns``).
_IMG, _ROW, _SCORE, _CLASS, _OWN = 0, 1, 2, 3, 4

F32 = npt.NDArray[np.float32]


@dataclass
class GpuPostprocessStats:
    """What the last calls did (for metrics and tests)."""

    candidates: int = 0
    nms_passes: int = 0
    host_fallbacks: int = 0


class GpuPostprocess(abc.ABC):
    """Batch postprocessing of one model type's outputs on one device (the shared part).

    Args:
        torch: the ``torch`` module.
        device: the device the outputs live on.
        input_w: model input width, pixels.
        input_h: model input height, pixels.
        num_classes: the model's class count (0 where the output does not say: SSD).
        iou_threshold: NMS IoU threshold.
    """

    #: The ``model.type`` this class postprocesses (a key of ``decode.DECODERS``).
    model_type: ClassVar[str] = ""

    def __init__(
        self,
        torch: Any,
        device: Any,
        input_w: int,
        input_h: int,
        num_classes: int,
        iou_threshold: float,
    ) -> None:
        self.torch = torch
        self.device = device
        self.input_w, self.input_h = input_w, input_h
        self.num_classes = num_classes
        self.iou_threshold = float(iou_threshold)
        self.stats = GpuPostprocessStats()
        self._index: Any = None  # (B, A, 2) float32: each row's image and row (``_indexed``)

    @classmethod
    @abc.abstractmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        """The class count that one frame's output of shape ``frame_shape`` holds."""

    @abc.abstractmethod
    def _columns(self, out: Any, thr: float, class_masks: Any | None) -> tuple[Any, Any]:
        """On the device: ``(ok, cols)``, ``ok (B, A)`` bool for the rows that can be
        candidates at the batch's lowest threshold ``thr`` (class filter applied), and
        ``cols (B, A, K)`` float32: the score, the class, then what ``_boxes`` and
        ``_passes`` read."""

    @abc.abstractmethod
    def _boxes(self, rows: F32) -> F32:
        """On the host: the ``(M, 4)`` float32 boxes, in input pixels, of candidate rows."""

    def _passes(self, rows: F32, thr: F32) -> npt.NDArray[np.bool_]:
        """On the host: which rows pass their own image's threshold ``thr`` (per row)."""
        return np.asarray(rows[:, _SCORE] >= thr)

    def __call__(
        self,
        out: Any,
        letterboxes: Sequence[Letterbox],
        score_thresholds: Sequence[float],
        class_masks: Any | None = None,
    ) -> list[Detections]:
        """Decode, filter, suppress and un-letterbox ``len(letterboxes)`` images.

        Args:
            out: ``(B', ...)`` float device tensor of the model's output, ``B' >= B``; rows
                past ``B`` are ignored (a CUDA graph's stale rows).
            letterboxes: per image, how its frame was placed into the input.
            score_thresholds: per image (each camera has its own threshold).
            class_masks: None (keep every class), or what ``masks_for`` gives for the images.

        Returns:
            Per image, detections in frame pixels by score descending, as the CPU path gives.
        """
        b = len(letterboxes)
        if b == 0:
            return []
        out = out[:b]
        if out.dtype != self.torch.float32:
            out = out.float()
        thr = np.asarray(score_thresholds, np.float32)
        # float32 like the tensors it is compared with; the lowest keeps a superset of every
        # image's candidates, and each image's own threshold is applied on the host.
        ok, cols = self._columns(out, float(thr.min()), class_masks)
        rows = self._indexed(cols)[ok].cpu().numpy()  # the one sync and copy
        img = rows[:, _IMG].astype(np.int64)
        keep = self._passes(rows, thr[img])
        rows, img = rows[keep], img[keep]
        self.stats.candidates += len(rows)
        fallbacks = np.flatnonzero(np.bincount(img, minlength=b) > MAX_MATRIX)
        if fallbacks.size:
            inside = ~np.isin(img, fallbacks)
            rows, img = rows[inside], img[inside]
        box = self._boxes(rows)
        kept = self._suppress(img, rows[:, _CLASS].astype(np.int64), box, rows[:, _SCORE])
        result = _unletterbox(
            box[kept], rows[kept, _SCORE], rows[kept, _CLASS], img[kept], letterboxes
        )
        for i in fallbacks.tolist():
            self.stats.host_fallbacks += 1
            result[i] = self._on_host(out, i, letterboxes[i], score_thresholds[i], class_masks)
        return result

    def _indexed(self, cols: Any) -> Any:
        """``cols`` with each row's image and row in front (a cached constant, grown to the
        largest batch seen: two more columns cost no call)."""
        torch = self.torch
        b, a = cols.shape[:2]
        if self._index is None or self._index.shape[0] < b or self._index.shape[1] != a:
            img, row = torch.meshgrid(
                torch.arange(b, device=self.device),
                torch.arange(a, device=self.device),
                indexing="ij",
            )
            self._index = torch.stack([img, row], dim=2).to(torch.float32)
        return torch.cat([self._index[:b], cols], dim=2)

    def masks_for(self, wanted: Sequence[frozenset[int] | None]) -> Any | None:
        """The ``class_masks`` argument for images that keep ``wanted`` classes each (None:
        all); None when every image keeps all.

        Returns:
            ``(B, K + 1)`` bool device tensor: column ``c < K`` says whether class ``c`` is
            kept, column ``K`` whether any other id is (True only for images that keep all:
            SSD labels have no known upper bound). ``K`` is the model's class count, or for
            SSD one more than the largest wanted id.
        """
        if all(w is None for w in wanted):
            return None
        width = self.num_classes or 1 + max((max(w, default=-1) for w in wanted if w), default=0)
        keep = np.ones((len(wanted), width + 1), bool)
        for i, w in enumerate(wanted):
            if w is not None:
                keep[i] = False
                keep[i, [c for c in w if 0 <= c < width]] = True
        return self.torch.from_numpy(keep).to(self.device)

    def _class_ok(self, class_masks: Any | None, class_id: Any) -> Any | None:
        """``(B, A)`` bool: whether each row's class is kept by its image's mask (None: all)."""
        if class_masks is None:
            return None
        other = class_masks.shape[1] - 1
        inside = (class_id >= 0) & (class_id < other)
        return self.torch.gather(class_masks, 1, self.torch.where(inside, class_id, other))

    def _suppress(
        self, img: npt.NDArray[np.int64], cls: npt.NDArray[np.int64], box: F32, score: F32
    ) -> npt.NDArray[np.int64]:
        """Indices of the kept candidates, grouped by image, by score descending."""
        # Rank by image, then score descending; stable, so ties stay in row order as in the
        # CPU path's stable argsort.
        order = np.argsort(-score, kind="stable")
        order = order[np.argsort(img[order], kind="stable")]
        ranked_img = img[order]
        first, second = _pairs(ranked_img, cls[order])
        ranked_box = box[order].astype(np.float64)
        keep = np.ones(len(order), bool)
        lo = 0  # the pairs of whole images at a time, at most _MAX_PAIRS
        while lo < len(first):
            hi = _chunk_end(ranked_img[first], lo)
            keep &= self._fixed_point(ranked_box, first[lo:hi], second[lo:hi])
            lo = hi
        return order[keep]

    def _fixed_point(
        self,
        box: npt.NDArray[np.float64],
        first: npt.NDArray[np.int64],
        second: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.bool_]:
        """Greedy NMS over ranked boxes, as the fixed point of the module docstring:
        ``first[k]`` is ranked before ``second[k]``, same image and class."""
        over = _pair_iou(box, first, second) > self.iou_threshold
        a, c = first[over], second[over]
        keep = np.ones(len(box), bool)
        while True:
            self.stats.nms_passes += 1
            new = np.ones(len(box), bool)
            new[c[keep[a]]] = False
            if np.array_equal(new, keep):
                return keep
            keep = new

    def _on_host(
        self,
        out: Any,
        i: int,
        lb: Letterbox,
        score_threshold: float,
        class_masks: Any | None,
    ) -> Detections:
        """Image ``i`` on the CPU path (too many candidates for the pairs)."""
        wanted = None
        if class_masks is not None and not bool(class_masks[i, -1]):
            wanted = frozenset(np.flatnonzero(class_masks[i, :-1].cpu().numpy()).tolist())
        return postprocess(
            [out[i].float().cpu().numpy()],
            lb,
            DECODERS[self.model_type],
            DecodeParams(self.input_w, self.input_h, score_threshold),
            self.iou_threshold,
            wanted,
        )


GPU_POSTPROCESSORS: dict[str, type[GpuPostprocess]] = {}
"""Model type -> its device postprocessor (``register_gpu_postprocess``)."""


def register_gpu_postprocess(cls: type[GpuPostprocess]) -> type[GpuPostprocess]:
    """Class decorator: ``cls`` postprocesses ``cls.model_type`` outputs on the device."""
    if cls.model_type not in DECODERS:
        raise ValueError(f"no CPU decoder for model type {cls.model_type!r} to match")
    GPU_POSTPROCESSORS[cls.model_type] = cls
    return cls


@register_gpu_postprocess
class YoloxGpuPostprocess(GpuPostprocess):
    """YOLOX: ``(B, A, 5 + C)`` outputs (``decode.decode_yolox``); own columns: the raw box
    ``x, y, log w, log h`` and the objectness."""

    model_type = "yolox"

    def __init__(self, torch: Any, device: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(torch, device, *args, **kwargs)
        self._grid, self._stride = _yolox_grid(self.input_w, self.input_h)

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return int(frame_shape[-1]) - 5

    def _columns(self, out: Any, thr: float, class_masks: Any | None) -> tuple[Any, Any]:
        if out.ndim != 3 or out.shape[1] != len(self._grid) or out.shape[2] != 5 + self.num_classes:
            raise ValueError(
                f"YOLOX output has shape {tuple(out.shape)}, expected (B, "
                f"{len(self._grid)}, {5 + self.num_classes})"
            )
        obj = out[:, :, 4]
        best_p, class_id = out[:, :, 5:].max(dim=2)
        score = obj * best_p
        ok = (obj >= thr) & (score >= thr)
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted
        picked = self.torch.stack([score, class_id.float()], dim=2)
        return ok, self.torch.cat([picked, out[:, :, :5]], dim=2)

    def _passes(self, rows: F32, thr: F32) -> npt.NDArray[np.bool_]:
        return np.asarray((rows[:, _OWN + 4] >= thr) & (rows[:, _SCORE] >= thr))

    def _boxes(self, rows: F32) -> F32:
        anchor = rows[:, _ROW].astype(np.int64)
        s = self._stride[anchor]
        cxcy = (rows[:, _OWN : _OWN + 2] + self._grid[anchor]) * s
        wh = np.exp(rows[:, _OWN + 2 : _OWN + 4]) * s
        return _cxcywh_to_xyxy(cxcy, wh)


@register_gpu_postprocess
class Yolov8GpuPostprocess(GpuPostprocess):
    """YOLOv8 / YOLO11: ``(B, 4 + C, A)`` outputs (``decode.decode_yolov8``); own columns:
    the box ``cx, cy, w, h``."""

    model_type = "yolov8"

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return int(frame_shape[-2]) - 4

    def _columns(self, out: Any, thr: float, class_masks: Any | None) -> tuple[Any, Any]:
        if out.ndim != 3 or out.shape[1] != 4 + self.num_classes:
            raise ValueError(
                f"YOLOv8 output has shape {tuple(out.shape)}, expected (B, "
                f"{4 + self.num_classes}, N)"
            )
        score, class_id = out[:, 4:, :].max(dim=1)
        ok = score >= thr
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted
        picked = self.torch.stack([score, class_id.float()], dim=2)
        return ok, self.torch.cat([picked, out[:, :4, :].transpose(1, 2)], dim=2)

    def _boxes(self, rows: F32) -> F32:
        return _cxcywh_to_xyxy(rows[:, _OWN : _OWN + 2], rows[:, _OWN + 2 : _OWN + 4])


@register_gpu_postprocess
class SsdGpuPostprocess(GpuPostprocess):
    """SSD ``DetectionOutput``: ``(B, 1, N, 7)`` or ``(B, N, 7)`` outputs, rows ``image_id,
    label, conf, x_min, y_min, x_max, y_max`` normalised to 0-1 (``decode.decode_ssd``); own
    columns: the normalised box."""

    model_type = "ssd"

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return 0  # the output does not say; class masks are sized by the wanted ids

    def _columns(self, out: Any, thr: float, class_masks: Any | None) -> tuple[Any, Any]:
        if out.shape[-1] != 7 or out.ndim not in (3, 4) or (out.ndim == 4 and out.shape[1] != 1):
            raise ValueError(f"SSD output has shape {tuple(out.shape)}, expected (B, 1, N, 7)")
        rows = out.reshape(out.shape[0], -1, 7)
        listed = (rows[:, :, 0] < 0).cumsum(dim=1) == 0  # the first image_id < 0 ends the list
        score = rows[:, :, 2]
        class_id = rows[:, :, 1].long()  # truncates toward zero, as numpy's astype
        ok = listed & (score >= thr)
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted
        picked = self.torch.stack([score, class_id.float()], dim=2)
        return ok, self.torch.cat([picked, rows[:, :, 3:7]], dim=2)

    def _boxes(self, rows: F32) -> F32:
        scale = np.array([self.input_w, self.input_h] * 2, dtype=np.float32)
        return np.asarray(rows[:, _OWN : _OWN + 4] * scale, np.float32)


def _pairs(
    img: npt.NDArray[np.int64], cls: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every pair ``(first, second)`` of ranked boxes (positions in rank order, grouped by
    image) of the same image and class, ``first`` ranked before ``second``; image-major."""
    n = len(img)
    # Positions grouped by (image, class); stable sorts keep rank order inside a group.
    by = np.argsort(cls, kind="stable")
    by = by[np.argsort(img[by], kind="stable")]
    new_group = np.r_[True, (img[by][1:] != img[by][:-1]) | (cls[by][1:] != cls[by][:-1])]
    group_end = np.r_[np.flatnonzero(new_group)[1:], n][np.cumsum(new_group) - 1]
    later = group_end - np.arange(n) - 1  # partners after each position in its group
    i = np.repeat(np.arange(n), later)
    step = np.arange(len(i)) - np.repeat(np.cumsum(later) - later, later)
    return by[i], by[i + 1 + step]


def _chunk_end(first_img: npt.NDArray[np.int64], lo: int) -> int:
    """The end of the pairs from ``lo`` that fit in ``_MAX_PAIRS`` without splitting an
    image (``first_img``: the image of each pair, non-decreasing)."""
    hi = lo + _MAX_PAIRS
    if hi >= len(first_img):
        return len(first_img)
    return max(int(np.searchsorted(first_img, first_img[hi], "left")), lo + 1)


def _pair_iou(
    box: npt.NDArray[np.float64], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """IoU of the pairs of ``(N, 4)`` float64 boxes; 0 where the union is empty. The same
    operations, in the same order, as the CPU NMS's matrix (``first`` as its row)."""
    size = np.clip(box[:, 2:] - box[:, :2], 0, None)
    area = size[:, 0] * size[:, 1]
    top_left = np.maximum(box[first, :2], box[second, :2])
    bottom_right = np.minimum(box[first, 2:], box[second, 2:])
    overlap = np.clip(bottom_right - top_left, 0, None)
    inter = overlap[:, 0] * overlap[:, 1]
    union = area[first] + area[second] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-300), 0.0)


def _unletterbox(
    xyxy: F32,
    score: F32,
    class_id: F32,
    img: npt.NDArray[np.int64],
    letterboxes: Sequence[Letterbox],
) -> list[Detections]:
    """Per image (candidates grouped by image), boxes in frame pixels: divided by the
    letterbox scale and clipped to the frame, in float32 as the CPU path."""
    bounds = np.searchsorted(img, np.arange(len(letterboxes) + 1), "left")
    result = []
    for i, lb in enumerate(letterboxes):
        lo, hi = bounds[i], bounds[i + 1]
        limit = np.array([lb.src_w, lb.src_h, lb.src_w, lb.src_h], np.float32)
        box = np.minimum(np.maximum(xyxy[lo:hi] / np.float32(lb.scale), np.float32(0.0)), limit)
        result.append(Detections(box, score[lo:hi].copy(), class_id[lo:hi].astype(np.int64)))
    return result
