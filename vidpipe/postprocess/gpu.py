"""YOLOX decode, score filter and class-aware NMS for a whole batch, on the GPU (PyTorch).

The same function as :func:`vidpipe.postprocess.pipeline.postprocess` with
:func:`~vidpipe.postprocess.decode.decode_yolox`, run on a ``(B, A, 5 + C)`` device tensor so
that only the kept detections come back to the host: a few hundred bytes per frame instead of
the 1.2 MB float output of YOLOX-Nano at 416.

It matches the CPU path step by step: candidates are rows with objectness and
``objectness * best class probability`` at or above the threshold; the class filter; greedy
NMS in score order (stable, ties in anchor order) where a box is dropped when its IoU with a
kept box of the same image and class is strictly above the threshold; IoU in float64 without
the legacy ``+1``; boxes divided by the letterbox scale and clipped to the frame.

Greedy NMS is sequential, so it is solved here as a fixed point instead of one box at a time:
``keep[i] = not any(keep[j] and overlap[j, i] for j ranked before i)``. Starting from
"keep everything", each pass fixes at least the next box in rank order, and the unique
solution of that equation is the greedy result; a pass that changes nothing proves it. Real
frames converge in a handful of passes (a suppressed box can only free boxes it was the sole
suppressor of). Candidates are processed in chunks of whole images so that the IoU matrix
stays small; an image with more than :data:`MAX_MATRIX` candidates (a score threshold near
zero) takes the CPU path for that image, and the caller can count it (``host_fallbacks``).

torch is imported lazily by the caller's executor: this module only touches the ``torch``
object it is given, so importing it costs nothing on a CPU-only install.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidpipe.postprocess.decode import STRIDES, DecodeParams, decode_yolox
from vidpipe.postprocess.nms import nms_class_aware
from vidpipe.types import Detections, Letterbox

#: Largest IoU matrix side computed at once (float64: 32 MiB at the limit).
MAX_MATRIX = 2048


@dataclass
class GpuPostprocessStats:
    """What the last calls did (for metrics and tests)."""

    candidates: int = 0
    nms_passes: int = 0
    host_fallbacks: int = 0


class YoloxGpuPostprocess:
    """Batch postprocessing of YOLOX outputs on one CUDA device.

    Args:
        torch: the ``torch`` module.
        device: the device the outputs live on.
        input_w: model input width, pixels.
        input_h: model input height, pixels.
        num_classes: C of the ``(A, 5 + C)`` output.
        iou_threshold: NMS IoU threshold.
    """

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
        grid, stride = [], []
        for s in STRIDES:
            gy, gx = torch.meshgrid(
                torch.arange(input_h // s, device=device),
                torch.arange(input_w // s, device=device),
                indexing="ij",
            )
            grid.append(torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1))
            stride.append(torch.full((gx.numel(), 1), s, device=device))
        self._grid = torch.cat(grid).to(torch.float32)
        self._stride = torch.cat(stride).to(torch.float32)
        self.stats = GpuPostprocessStats()

    def __call__(
        self,
        out: Any,
        letterboxes: Sequence[Letterbox],
        score_thresholds: Sequence[float],
        class_masks: Any | None = None,
    ) -> list[Detections]:
        """Decode, filter, suppress and un-letterbox ``len(letterboxes)`` images.

        Args:
            out: ``(B', A, 5 + C)`` float device tensor, ``B' >= B``; rows past ``B`` are
                ignored (a CUDA graph's stale rows).
            letterboxes: per image, how its frame was placed into the input.
            score_thresholds: per image (each camera has its own threshold).
            class_masks: None, or a ``(B, C)`` bool device tensor: True for classes to keep.

        Returns:
            Per image, detections in frame pixels by score descending, as the CPU path gives.
        """
        torch = self.torch
        b = len(letterboxes)
        if b == 0:
            return []
        out = out[:b]
        if out.shape[1] != self._grid.shape[0] or out.shape[2] != 5 + self.num_classes:
            raise ValueError(
                f"YOLOX output has shape {tuple(out.shape)}, expected (B, "
                f"{self._grid.shape[0]}, {5 + self.num_classes})"
            )
        thr = torch.tensor(list(score_thresholds), dtype=torch.float32, device=self.device)
        obj = out[:, :, 4].float()
        best_p, class_id = out[:, :, 5:].float().max(dim=2)
        score = obj * best_p
        ok = (obj >= thr[:, None]) & (score >= thr[:, None])
        if class_masks is not None:
            ok &= torch.gather(class_masks, 1, class_id)
        img, anchor = ok.nonzero(as_tuple=True)  # one sync: the candidate count
        self.stats.candidates += int(img.numel())
        rows = out[img, anchor, :4].float()
        s = self._stride[anchor]
        cxcy = (rows[:, 0:2] + self._grid[anchor]) * s
        wh = torch.exp(rows[:, 2:4]) * s
        xyxy = torch.cat([cxcy - wh * 0.5, cxcy + wh * 0.5], dim=1)
        cand = _Candidates(img, xyxy, score[img, anchor], class_id[img, anchor])
        kept = self._suppress(cand, b)
        return self._to_host(cand, kept, letterboxes, out, score_thresholds, class_masks)

    def _suppress(self, cand: _Candidates, b: int) -> Any:
        """Indices into ``cand`` of the kept boxes, grouped by image, by score descending.

        Whole images are gathered into ranges of at most ``MAX_MATRIX`` candidates; an image
        with more is left out here and recorded in ``_fallback_images``.
        """
        torch = self.torch
        counts = torch.bincount(cand.img, minlength=b).tolist()
        kept: list[Any] = []
        self._fallback_images: list[int] = []
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
        # Rank by image, then score descending; stable, so ties stay in anchor order as in the
        # CPU path's stable argsort. Images never overlap: they are compared as groups below.
        order = torch.argsort(-score, stable=True)
        order = order[torch.argsort(cand.img[lo:hi][order], stable=True)]
        box = cand.xyxy[lo:hi][order].double()
        group = cand.img[lo:hi][order] * self.num_classes + cand.class_id[lo:hi][order]
        overlap = (_iou(torch, box) > self.iou_threshold) & (group[:, None] == group[None, :])
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
        """Un-letterbox the kept boxes on the device, then one small copy to the host."""
        torch = self.torch
        scale = torch.tensor([lb.scale for lb in letterboxes], dtype=torch.float32)
        limit = torch.tensor([[lb.src_w, lb.src_h] for lb in letterboxes], dtype=torch.float32)
        img = cand.img[kept]
        xyxy = cand.xyxy[kept] / scale.to(self.device)[img, None]
        lim = limit.to(self.device)[img].repeat(1, 2)
        xyxy = torch.minimum(torch.clamp(xyxy, min=0.0), lim)
        packed = torch.cat(
            [xyxy, cand.score[kept, None], cand.class_id[kept, None].float(), img[:, None].float()],
            dim=1,
        ).cpu()
        rows = packed.numpy()
        per_image = np.searchsorted(rows[:, 6], np.arange(len(letterboxes) + 1) - 0.5)
        result = []
        for i in range(len(letterboxes)):
            r = rows[per_image[i] : per_image[i + 1]]
            result.append(Detections(r[:, 0:4].copy(), r[:, 4].copy(), r[:, 5].astype(np.int64)))
        for i in self._fallback_images:
            self.stats.host_fallbacks += 1
            result[i] = self._host_image(
                out[i], letterboxes[i], score_thresholds[i], class_masks, i
            )
        return result

    def _host_image(
        self, out: Any, lb: Letterbox, thr: float, class_masks: Any | None, i: int
    ) -> Detections:
        """The CPU path for one image with too many candidates for one IoU matrix."""
        det = decode_yolox(
            [out.float().cpu().numpy()], DecodeParams(self.input_w, self.input_h, thr)
        )
        if class_masks is not None and len(det):
            det = det.select(class_masks[i].cpu().numpy()[det.class_id])
        if not len(det):
            return Detections.empty()
        keep = nms_class_aware(det.xyxy, det.score, det.class_id, self.iou_threshold)
        xyxy = det.xyxy[keep] / np.float32(lb.scale)
        np.clip(xyxy[:, 0::2], 0.0, lb.src_w, out=xyxy[:, 0::2])
        np.clip(xyxy[:, 1::2], 0.0, lb.src_h, out=xyxy[:, 1::2])
        return Detections(xyxy, det.score[keep], det.class_id[keep])


@dataclass(frozen=True)
class _Candidates:
    """Rows that passed the score filter, flattened over the batch, image-major."""

    img: Any  # (M,) long
    xyxy: Any  # (M, 4) float32, input pixels
    score: Any  # (M,) float32
    class_id: Any  # (M,) long


def _iou(torch: Any, box: Any) -> Any:
    """``(N, N)`` IoU of ``(N, 4)`` float64 boxes with themselves; 0 where the union is empty."""
    x1, y1, x2, y2 = box.unbind(1)
    area = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    iw = (torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])).clamp(
        min=0
    )
    ih = (torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])).clamp(
        min=0
    )
    inter = iw * ih
    union = area[:, None] + area[None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=1e-300), torch.zeros_like(inter))
