"""Decode, score filter and class-aware NMS for a whole batch, on the GPU (PyTorch).

The same function as :func:`vidpipe.postprocess.pipeline.postprocess` with the decoders of
:mod:`vidpipe.postprocess.decode`, run on a batch of outputs in device memory so that only the
kept detections come back to the host: a few hundred bytes per frame instead of, for
YOLOX-Nano at 416, a 1.2 MB float output.

:class:`GpuPostprocess` holds what every model type shares: per-image thresholds and class
masks, NMS, un-letterboxing and the one small copy to the host. A model type only says which
rows are candidates and where their boxes are (``_candidates``), and registers itself in
:data:`GPU_POSTPROCESSORS` (``register_gpu_postprocess``); an executor that postprocesses on
the device looks the model type up there.

It matches the CPU path step by step: candidates are the rows the CPU decoder keeps at the
image's threshold (YOLOX: objectness and ``objectness * best class probability`` at or above
it; YOLOv8: the best class score; SSD: the confidence, up to the first row with
``image_id < 0``); the class filter; greedy NMS in score order (stable, ties in row order)
where a box is dropped when its IoU with a kept box of the same image and class is strictly
above the threshold; IoU in float64 without the legacy ``+1``; boxes divided by the letterbox
scale and clipped to the frame.

Greedy NMS is sequential, so it is solved here as a fixed point instead of one box at a time:
``keep[i] = not any(keep[j] and overlap[j, i] for j ranked before i)``. Starting from
"keep everything", each pass fixes at least the next box in rank order, and the unique
solution of that equation is the greedy result; a pass that changes nothing proves it. Real
frames converge in a handful of passes (a suppressed box can only free boxes it was the sole
suppressor of). Candidates are processed in chunks of whole images so that the IoU matrix
stays small; an image with more than :data:`MAX_MATRIX` candidates (a score threshold near
zero) takes the CPU path for that image, and the caller can count it (``host_fallbacks``).

torch is imported lazily by the caller's executor: this module only touches the ``torch``
object it is given, so importing it costs nothing on a CPU-only install. The code runs on CPU
tensors too (the tests compare it with the CPU decoders there).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from vidpipe.postprocess.decode import DECODERS, STRIDES, DecodeParams
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.types import Detections, Letterbox

#: Largest IoU matrix side computed at once (float64: 32 MiB at the limit).
MAX_MATRIX = 2048


@dataclass
class GpuPostprocessStats:
    """What the last calls did (for metrics and tests)."""

    candidates: int = 0
    nms_passes: int = 0
    host_fallbacks: int = 0


@dataclass(frozen=True)
class _Candidates:
    """Rows that passed the score filter, flattened over the batch, image-major."""

    img: Any  # (M,) long
    xyxy: Any  # (M, 4) float32, input pixels
    score: Any  # (M,) float32
    class_id: Any  # (M,) long


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
        self._fallback_images: list[int] = []

    @classmethod
    @abc.abstractmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        """The class count that one frame's output of shape ``frame_shape`` holds."""

    @abc.abstractmethod
    def _candidates(self, out: Any, thr: Any, class_masks: Any | None) -> _Candidates:
        """The rows of ``out`` (``B`` images) that the CPU decoder would keep, class filter
        applied; ``thr`` is the ``(B,)`` float32 threshold per image."""

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
        thr = self.torch.tensor(
            list(score_thresholds), dtype=self.torch.float32, device=self.device
        )
        cand = self._candidates(out, thr, class_masks)
        self.stats.candidates += int(cand.img.numel())
        kept = self._suppress(cand, b)
        return self._to_host(cand, kept, letterboxes, out, score_thresholds, class_masks)

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

    def _suppress(self, cand: _Candidates, b: int) -> Any:
        """Indices into ``cand`` of the kept boxes, grouped by image, by score descending.

        Whole images are gathered into ranges of at most ``MAX_MATRIX`` candidates; an image
        with more is left out here and recorded in ``_fallback_images``.
        """
        torch = self.torch
        self._fallback_images = []
        total = int(cand.img.numel())  # known on the host since the nonzero
        if total <= MAX_MATRIX:  # the usual case: one range, no per-image counts to sync for
            if not total:
                return torch.empty(0, dtype=torch.long, device=self.device)
            return self._suppress_range(cand, 0, total)
        counts = torch.bincount(cand.img, minlength=b).tolist()
        kept: list[Any] = []
        lo = hi = 0  # the range being gathered; candidates are image-major (row-major nonzero)
        for i, n in enumerate(counts):
            if hi - lo + n > MAX_MATRIX and hi > lo:
                kept.append(self._suppress_range(cand, lo, hi))
                lo = hi
            if n > MAX_MATRIX:
                self._fallback_images.append(i)
                lo = hi = hi + n
                continue
            hi += n
        if hi > lo:
            kept.append(self._suppress_range(cand, lo, hi))
        if not kept:
            return torch.empty(0, dtype=torch.long, device=self.device)
        return torch.cat(kept)

    def _suppress_range(self, cand: _Candidates, lo: int, hi: int) -> Any:
        """Greedy class-aware NMS over candidates ``lo:hi`` (whole images), fixed-point form."""
        torch = self.torch
        score = cand.score[lo:hi]
        # Rank by image, then score descending; stable, so ties stay in row order as in the
        # CPU path's stable argsort. Images never overlap: they are compared as groups below.
        order = torch.argsort(-score, stable=True)
        order = order[torch.argsort(cand.img[lo:hi][order], stable=True)]
        box = cand.xyxy[lo:hi][order].double()
        img, cls = cand.img[lo:hi][order], cand.class_id[lo:hi][order]
        # Image and class compared separately: SSD labels have no upper bound to pack them by.
        same = (img[:, None] == img[None, :]) & (cls[:, None] == cls[None, :])
        overlap = (_iou(torch, box) > self.iou_threshold) & same
        rank = torch.arange(len(box), device=self.device)
        overlap &= rank[:, None] < rank[None, :]  # only a higher-ranked box suppresses
        keep = torch.ones(len(box), dtype=torch.bool, device=self.device)
        while True:
            self.stats.nms_passes += 1
            suppressed = (overlap & keep[:, None]).any(dim=0)
            new = ~suppressed
            if torch.equal(new, keep):
                break
            keep = new
        return lo + order[keep]

    def _to_host(
        self,
        cand: _Candidates,
        kept: Any,
        letterboxes: Sequence[Letterbox],
        out: Any,
        score_thresholds: Sequence[float],
        class_masks: Any | None,
    ) -> list[Detections]:
        """One small copy of the kept rows to the host, then un-letterbox them there: a few
        hundred rows are cheaper in numpy (float32, the same IEEE division and clip) than a
        dozen more device kernels, each a GIL hand-over for the completion thread."""
        torch = self.torch
        img = cand.img[kept]
        packed = torch.cat(
            [
                cand.xyxy[kept],
                cand.score[kept, None],
                cand.class_id[kept, None].float(),
                img[:, None].float(),
            ],
            dim=1,
        ).cpu()
        rows = packed.numpy()
        per_image = np.searchsorted(rows[:, 6], np.arange(len(letterboxes) + 1) - 0.5)
        result = []
        for i, lb in enumerate(letterboxes):
            r = rows[per_image[i] : per_image[i + 1]]
            xyxy = r[:, 0:4] / np.float32(lb.scale)
            limit = np.array([lb.src_w, lb.src_h, lb.src_w, lb.src_h], np.float32)
            xyxy = np.minimum(np.maximum(xyxy, np.float32(0.0)), limit)
            result.append(Detections(xyxy, r[:, 4].copy(), r[:, 5].astype(np.int64)))
        for i in self._fallback_images:
            self.stats.host_fallbacks += 1
            wanted = None
            if class_masks is not None and not bool(class_masks[i, -1]):
                wanted = frozenset(np.flatnonzero(class_masks[i, :-1].cpu().numpy()).tolist())
            result[i] = postprocess(
                [out[i].float().cpu().numpy()],
                letterboxes[i],
                DECODERS[self.model_type],
                DecodeParams(self.input_w, self.input_h, score_thresholds[i]),
                self.iou_threshold,
                wanted,
            )
        return result

    def _gather(self, ok: Any, score: Any, class_id: Any, boxes: Callable[..., Any]) -> _Candidates:
        """Candidates where ``ok`` (``(B, A)`` bool); ``boxes(img, row)`` gives their
        ``(M, 4)`` float32 boxes in input pixels."""
        img, row = ok.nonzero(as_tuple=True)  # one sync: the candidate count
        return _Candidates(img, boxes(img, row), score[img, row], class_id[img, row])


GPU_POSTPROCESSORS: dict[str, type[GpuPostprocess]] = {}
"""Model type -> its device postprocessor (``register_gpu_postprocess``)."""


def register_gpu_postprocess(cls: type[GpuPostprocess]) -> type[GpuPostprocess]:
    """Class decorator: ``cls`` postprocesses ``cls.model_type`` outputs on the device."""
    if cls.model_type not in DECODERS:
        raise ValueError(f"no CPU decoder for model type {cls.model_type!r} to match")
    GPU_POSTPROCESSORS[cls.model_type] = cls
    return cls


def _xyxy(torch: Any, cxcy: Any, wh: Any) -> Any:
    """``(M, 2)`` centres and sizes to ``(M, 4)`` boxes, as ``decode._cxcywh_to_xyxy``."""
    half = wh * 0.5
    return torch.cat([cxcy - half, cxcy + half], dim=1)


@register_gpu_postprocess
class YoloxGpuPostprocess(GpuPostprocess):
    """YOLOX: ``(B, A, 5 + C)`` outputs (``decode.decode_yolox``)."""

    model_type = "yolox"

    def __init__(self, torch: Any, device: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(torch, device, *args, **kwargs)
        grid, stride = [], []
        for s in STRIDES:
            gy, gx = torch.meshgrid(
                torch.arange(self.input_h // s, device=device),
                torch.arange(self.input_w // s, device=device),
                indexing="ij",
            )
            grid.append(torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1))
            stride.append(torch.full((gx.numel(), 1), s, device=device))
        self._grid = torch.cat(grid).to(torch.float32)
        self._stride = torch.cat(stride).to(torch.float32)

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return int(frame_shape[-1]) - 5

    def _candidates(self, out: Any, thr: Any, class_masks: Any | None) -> _Candidates:
        if out.ndim != 3 or out.shape[1] != len(self._grid) or out.shape[2] != 5 + self.num_classes:
            raise ValueError(
                f"YOLOX output has shape {tuple(out.shape)}, expected (B, "
                f"{len(self._grid)}, {5 + self.num_classes})"
            )
        obj = out[:, :, 4].float()
        best_p, class_id = out[:, :, 5:].float().max(dim=2)
        score = obj * best_p
        ok = (obj >= thr[:, None]) & (score >= thr[:, None])
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted

        def boxes(img: Any, anchor: Any) -> Any:
            rows = out[img, anchor, :4].float()
            s = self._stride[anchor]
            return _xyxy(
                self.torch,
                (rows[:, 0:2] + self._grid[anchor]) * s,
                self.torch.exp(rows[:, 2:4]) * s,
            )

        return self._gather(ok, score, class_id, boxes)


@register_gpu_postprocess
class Yolov8GpuPostprocess(GpuPostprocess):
    """YOLOv8 / YOLO11: ``(B, 4 + C, A)`` outputs (``decode.decode_yolov8``)."""

    model_type = "yolov8"

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return int(frame_shape[-2]) - 4

    def _candidates(self, out: Any, thr: Any, class_masks: Any | None) -> _Candidates:
        if out.ndim != 3 or out.shape[1] != 4 + self.num_classes:
            raise ValueError(
                f"YOLOv8 output has shape {tuple(out.shape)}, expected (B, "
                f"{4 + self.num_classes}, N)"
            )
        score, class_id = out[:, 4:, :].float().max(dim=1)
        ok = score >= thr[:, None]
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted

        def boxes(img: Any, anchor: Any) -> Any:
            rows = out[img, :4, anchor].float()  # (M, 4): advanced indices first
            return _xyxy(self.torch, rows[:, 0:2], rows[:, 2:4])

        return self._gather(ok, score, class_id, boxes)


@register_gpu_postprocess
class SsdGpuPostprocess(GpuPostprocess):
    """SSD ``DetectionOutput``: ``(B, 1, N, 7)`` or ``(B, N, 7)`` outputs, rows ``image_id,
    label, conf, x_min, y_min, x_max, y_max`` normalised to 0-1 (``decode.decode_ssd``)."""

    model_type = "ssd"

    @classmethod
    def classes_in(cls, frame_shape: Sequence[int]) -> int:
        return 0  # the output does not say; class masks are sized by the wanted ids

    def _candidates(self, out: Any, thr: Any, class_masks: Any | None) -> _Candidates:
        torch = self.torch
        if out.shape[-1] != 7 or out.ndim not in (3, 4) or (out.ndim == 4 and out.shape[1] != 1):
            raise ValueError(f"SSD output has shape {tuple(out.shape)}, expected (B, 1, N, 7)")
        rows = out.reshape(out.shape[0], -1, 7).float()
        listed = (rows[:, :, 0] < 0).cumsum(dim=1) == 0  # the first image_id < 0 ends the list
        score = rows[:, :, 2]
        class_id = rows[:, :, 1].long()  # truncates toward zero, as numpy's astype
        ok = listed & (score >= thr[:, None])
        if (wanted := self._class_ok(class_masks, class_id)) is not None:
            ok &= wanted
        scale = torch.tensor(
            [self.input_w, self.input_h] * 2, dtype=torch.float32, device=self.device
        )

        def boxes(img: Any, row: Any) -> Any:
            return rows[img, row, 3:7] * scale

        return self._gather(ok, score, class_id, boxes)


def _iou(torch: Any, box: Any) -> Any:
    """``(N, N)`` IoU of ``(N, 4)`` float64 boxes with themselves; 0 where the union is empty.

    Corners are paired as ``(x, y)`` columns, so each step is one kernel for both axes: the
    same subtractions, clamps and products as per coordinate, in fewer calls.
    """
    size = (box[:, 2:] - box[:, :2]).clamp(min=0)
    area = size[:, 0] * size[:, 1]
    top_left = torch.maximum(box[:, None, :2], box[None, :, :2])
    bottom_right = torch.minimum(box[:, None, 2:], box[None, :, 2:])
    overlap = (bottom_right - top_left).clamp(min=0)
    inter = overlap[..., 0] * overlap[..., 1]
    union = area[:, None] + area[None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=1e-300), torch.zeros_like(inter))
