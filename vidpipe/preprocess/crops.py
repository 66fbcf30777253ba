"""Crops of boxes, resized for a secondary model (re-identification), from a picture on the
GPU: the NVDEC camera's NV12 frame never comes to the host.

The CPU path cuts ``frame[y1:y2, x1:x2]`` of the BGR picture and resizes it with OpenCV's
``INTER_LINEAR`` (half-pixel centres, taps clamped to the crop, no antialias). Here each output
pixel reads its four taps from the NV12 planes as the GPU letterbox does
(:mod:`vidpipe.preprocess.gpu`: the Y, U and V samples of each tap, converted to BGR with
BT.601 limited range and rounded, then blended), so that a crop on the device equals the CPU
path's crop of the same picture up to the chroma rounding the letterbox already shows. All
crops of one frame are one gather: about a dozen kernels, whatever the number of boxes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.gpu_gate import GPU_GATE
from vidpipe.preprocess.yuv import BGR_FROM_UV, Y_GAIN
from vidpipe.types import DeviceImage

#: width, height of a crop for the re-identification type (its model's input)
CROP_SIZE = (128, 256)


def crop_box(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int] | None:
    """A detection box in frame pixels as the integer crop ``x1, y1, x2, y2`` both paths cut
    (rounded, clipped to the frame); None when nothing of it is inside."""
    x1, y1, x2, y2 = (round(float(v)) for v in box[:4])
    x1, y1, x2, y2 = max(0, x1), max(0, y1), min(width, x2), min(height, y2)
    if x2 - x1 < 1 or y2 - y1 < 1:
        return None
    return x1, y1, x2, y2


def _axis_taps(torch: Any, lo: Any, size: Any, out: int) -> tuple[Any, Any, Any]:
    """Per crop (``lo``, ``size``: ``(M,)`` int64) the two source indices and the second's
    weight of each of ``out`` output positions: ``(M, out)`` each, as ``cv2.resize``
    computes them inside the crop."""
    pos = torch.arange(out, device=lo.device, dtype=torch.float32)[None, :] + 0.5
    src = (pos * (size.float()[:, None] / out) - 0.5).clamp(min=0.0)
    i0 = torch.minimum(src.floor().long(), size[:, None] - 1)
    i1 = torch.minimum(i0 + 1, size[:, None] - 1)
    return lo[:, None] + i0, lo[:, None] + i1, (src - i0.float()).clamp(0.0, 1.0)


def nv12_crops(torch: Any, nv12: Any, boxes: Sequence[tuple[int, int, int, int]], out_w: int,
               out_h: int) -> Any:  # fmt: skip
    """``(M, out_h, out_w, 3)`` uint8 BGR crops of ``boxes`` (``crop_box``'s integer boxes)
    from one ``(H * 3 / 2, W)`` uint8 NV12 frame, on its device and the current stream.

    Raises:
        ValueError: ``nv12`` is not an NV12 frame, or a box lies outside it.
    """
    if nv12.dim() != 2 or nv12.dtype != torch.uint8 or nv12.shape[0] % 3 or nv12.shape[1] % 2:
        raise ValueError(
            f"NV12 frame must be (H*3/2, W) uint8, got {nv12.dtype} {tuple(nv12.shape)}"
        )
    src_h, src_w = nv12.shape[0] * 2 // 3, nv12.shape[1]
    if not boxes:
        return torch.empty((0, out_h, out_w, 3), dtype=torch.uint8, device=nv12.device)
    b = torch.tensor(list(boxes), dtype=torch.long).to(nv12.device, non_blocking=True)
    if any(x1 < 0 or y1 < 0 or x2 > src_w or y2 > src_h for x1, y1, x2, y2 in boxes):
        raise ValueError(f"a crop box lies outside the {src_w}x{src_h} frame: {list(boxes)}")
    y0, y1, wy = _axis_taps(torch, b[:, 1], b[:, 3] - b[:, 1], out_h)
    x0, x1, wx = _axis_taps(torch, b[:, 0], b[:, 2] - b[:, 0], out_w)
    ys = torch.stack([y0, y1], dim=1)  # (M, 2, out_h)
    xs = torch.stack([x0, x1], dim=1)  # (M, 2, out_w)
    luma = ys[:, :, :, None, None] * src_w + xs[:, None, None, :, :]  # (M, 2, h, 2, w)
    chroma = (src_h + ys // 2)[:, :, :, None, None] * src_w + ((xs // 2) * 2)[:, None, None]
    flat = nv12.reshape(-1)
    offsets = torch.tensor([16.0, 128.0, 128.0], device=nv12.device)
    yuv = torch.stack([flat[luma], flat[chroma], flat[chroma + 1]], dim=-1).float() - offsets
    coef = torch.tensor(
        [(Y_GAIN, cu, cv) for cu, cv in BGR_FROM_UV], device=nv12.device, dtype=torch.float32
    )
    bgr = (yuv @ coef.T).round_().clamp_(0.0, 255.0)  # (M, 2, h, 2, w, 3)
    across = torch.lerp(bgr[:, :, :, 0], bgr[:, :, :, 1], wx[:, None, None, :, None])
    out = torch.lerp(across[:, 0], across[:, 1], wy[:, :, None, None])
    return out.round_().clamp_(0.0, 255.0).to(torch.uint8)


def device_crop(image: DeviceImage, box: tuple[int, int, int, int]) -> Any:
    """One ``(256, 128, 3)`` uint8 crop of an NVDEC picture at the re-identification input's
    size, on the picture's device (``crop_box``'s integer ``box``)."""
    import torch

    if not image.nv12.is_cuda:  # a picture in host memory (tests on the CPU build)
        return nv12_crops(torch, image.nv12, [box], CROP_SIZE[0], CROP_SIZE[1])[0]
    with GPU_GATE.work(), torch.cuda.device(image.nv12.device):
        if image.ready is not None:  # written on another stream: wait for it on ours
            torch.cuda.current_stream().wait_event(image.ready)
        return nv12_crops(torch, image.nv12, [box], CROP_SIZE[0], CROP_SIZE[1])[0]


def fit_crop(crop_bgr: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A host BGR crop of any size at ``CROP_SIZE`` (``INTER_LINEAR``, as ``nv12_crops``
    samples): what the re-identification type takes, before its float conversion."""
    if crop_bgr.shape[:2] == (CROP_SIZE[1], CROP_SIZE[0]):
        return crop_bgr
    return np.asarray(cv2.resize(crop_bgr, CROP_SIZE, interpolation=cv2.INTER_LINEAR), np.uint8)
