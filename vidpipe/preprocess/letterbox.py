"""Letterbox: resize keeping aspect, place the picture, pad the rest. Pure functions.

Where the picture goes, the pad value and the normalisation are the model type's
(``ModelInput``): YOLOX was trained on pictures at the top-left padded with 114, NanoDet on
centred ones padded with 0. Every type is resized bilinearly, as both were trained (NanoDet's
training warps with OpenCV's default bilinear filter; its ONNX sample's INTER_AREA took 7x
the time on a 768x432 frame, 1.21 against 0.17 ms). Normalisation is not done here: the
backend puts it in the graph (``vidpipe.infer.openvino``), so the scheduler writes 0-255
pixels for every model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.types import Letterbox

PAD_VALUE = 114


@dataclass(frozen=True, slots=True)
class ModelInput:
    """How a model type wants its input picture made: part of its one registration
    (``vidpipe.postprocess.decode.register_decoder``).

    Attributes:
        placement: ``top-left`` (pad right and below) or ``centre`` (pad split evenly
            around, the odd pixel right and below).
        pad_value: the pad's value in every channel, before normalisation.
        mean: per-channel (B, G, R) value subtracted in the graph; None: none.
        std: per-channel (B, G, R) divisor applied in the graph after ``mean``; None: none.
    """

    placement: Literal["top-left", "centre"] = "top-left"
    pad_value: int = PAD_VALUE
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None

    @property
    def normalised(self) -> bool:
        """Whether the graph must normalise the 0-255 pixels the scheduler writes."""
        return self.mean is not None or self.std is not None

    def offset(self, new_w: int, new_h: int, dst_w: int, dst_h: int) -> tuple[int, int]:
        """Where the resized ``new_w x new_h`` picture's top-left corner goes in the input."""
        if self.placement == "top-left":
            return 0, 0
        return (dst_w - new_w) // 2, (dst_h - new_h) // 2

    def describe(self) -> str:
        """One line for logs and errors."""
        norm = f", mean {self.mean} std {self.std} in the graph" if self.normalised else ""
        return f"{self.placement}, pad {self.pad_value}{norm}"


DEFAULT_INPUT = ModelInput()
"""YOLOX's (and YOLOv8's, SSD's) input: top-left, pad 114, 0-255 un-normalised;
the only one the GPU letterbox makes."""


def letterbox_geometry(src_w: int, src_h: int, dst_w: int, dst_h: int) -> tuple[float, int, int]:
    """Scale and resized size for fitting ``src`` into ``dst``.

    Returns:
        ``(scale, new_w, new_h)`` with ``new_w <= dst_w`` and ``new_h <= dst_h``.
    """
    if src_w <= 0 or src_h <= 0:
        raise ValueError(f"cannot letterbox an empty image ({src_w}x{src_h})")
    scale = min(dst_w / src_w, dst_h / src_h)
    new_w = min(dst_w, max(1, int(src_w * scale)))  # truncate, as the YOLOX reference does
    new_h = min(dst_h, max(1, int(src_h * scale)))
    return scale, new_w, new_h


def letterbox_into(
    image: npt.NDArray[np.uint8],
    dst: npt.NDArray[np.uint8],
    *,
    pad: bool = True,
    geometry: tuple[float, int, int] | None = None,
    model_input: ModelInput = DEFAULT_INPUT,
) -> Letterbox:
    """Letterbox ``image`` into the preallocated ``dst`` without allocating.

    Args:
        image: ``(H, W, 3)`` uint8 BGR frame.
        dst: ``(h, w, 3)`` uint8 buffer, overwritten entirely (the picture where
            ``model_input`` places it, ``model_input.pad_value`` around it), unless ``pad``
            is False.
        pad: False writes only the picture's region and leaves the pad of ``dst`` as it is:
            for a caller that knows it already holds the pad of this geometry
            (``InputBuffer.fill``, whose memory nothing else writes).
        geometry: ``letterbox_geometry`` of ``image`` into ``dst``, where the caller has it
            already (``InputBuffer.fill`` needs it to decide on the pad).
        model_input: placement and pad value of the model type.

    Returns:
        The mapping back to ``image`` pixels.
    """
    src_h, src_w = image.shape[:2]
    dst_h, dst_w = dst.shape[:2]
    if geometry is None:
        geometry = letterbox_geometry(src_w, src_h, dst_w, dst_h)
    scale, new_w, new_h = geometry
    x0, y0 = model_input.offset(new_w, new_h, dst_w, dst_h)
    region = dst[y0 : y0 + new_h, x0 : x0 + new_w]
    if new_w == src_w and new_h == src_h:
        np.copyto(region, image)
    else:
        cv2.resize(image, (new_w, new_h), dst=region, interpolation=cv2.INTER_LINEAR)
    if pad:
        _pad_around(dst, x0, y0, new_w, new_h, model_input.pad_value)
    return Letterbox(scale=scale, src_w=int(src_w), src_h=int(src_h), pad_x=x0, pad_y=y0)


def _pad_around(dst: np.ndarray, x0: int, y0: int, new_w: int, new_h: int, value: int) -> None:
    """Fill what lies outside ``dst[y0 : y0 + new_h, x0 : x0 + new_w]`` with ``value``.

    Whole rows above and below, then the picture's rows left and right of it: for a
    top-left placement exactly the two writes (below, then right) YOLOX's letterbox made.
    """
    dst_h, dst_w = dst.shape[:2]
    if y0 > 0:
        dst[:y0, :] = value
    if y0 + new_h < dst_h:
        dst[y0 + new_h :, :] = value
    if x0 > 0:
        dst[y0 : y0 + new_h, :x0] = value
    if x0 + new_w < dst_w:
        dst[y0 : y0 + new_h, x0 + new_w :] = value


def letterbox(
    image: npt.NDArray[np.uint8],
    dst_w: int,
    dst_h: int,
    model_input: ModelInput = DEFAULT_INPUT,
) -> tuple[np.ndarray, Letterbox]:
    """Allocating convenience form of ``letterbox_into``: returns ``(dst_h, dst_w, 3)`` uint8."""
    dst = np.empty((dst_h, dst_w, 3), np.uint8)
    return dst, letterbox_into(image, dst, model_input=model_input)


def hwc_to_chw_float(
    src: npt.NDArray[np.uint8],
    dst: npt.NDArray[np.float32],
    planes: Sequence[npt.NDArray[np.uint8]] | None = None,
) -> None:
    """Copy ``(H, W, 3)`` uint8 into a preallocated ``(3, H, W)`` float32 array.

    OpenCV splits the channels into contiguous u8 planes (``planes``: three ``(H, W)``
    scratch arrays, so that nothing is allocated per frame), then each plane is widened in
    one contiguous pass. One strided ``np.copyto`` of the transposed view did both at once
    but took 0.21 ms at 416x416 against 0.07 ms this way (2-core EPYC, numpy 2, OpenCV 5).
    """
    split = cv2.split(src, list(planes) if planes is not None else None)
    for channel in range(3):
        np.copyto(dst[channel], split[channel], casting="unsafe")
