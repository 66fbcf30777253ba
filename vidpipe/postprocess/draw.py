"""Draw detections onto a copy of a frame."""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.types import Detections

_FONT = cv2.FONT_HERSHEY_SIMPLEX


def _make_palette(n: int) -> tuple[tuple[int, int, int], ...]:
    """``n`` well-spread, saturated BGR colours (hues stepped by the golden ratio)."""
    colours = []
    for i in range(n):
        r, g, b = colorsys.hsv_to_rgb((i * 0.618033988749895) % 1.0, 0.85, 0.95)
        colours.append((round(b * 255), round(g * 255), round(r * 255)))
    return tuple(colours)


#: Box colour of class ``k`` is ``PALETTE[k % len(PALETTE)]`` (BGR); the same on every run.
PALETTE: tuple[tuple[int, int, int], ...] = _make_palette(32)


def class_colour(class_id: int) -> tuple[int, int, int]:
    """Deterministic BGR colour of a class id."""
    return PALETTE[class_id % len(PALETTE)]


def _text_colour(bgr: tuple[int, int, int]) -> tuple[int, int, int]:
    b, g, r = bgr
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (255, 255, 255)


def draw_detections(
    image: npt.NDArray[np.uint8], det: Detections, labels: Sequence[str]
) -> npt.NDArray[np.uint8]:
    """Draw boxes and ``"label 0.87"`` captions onto a copy of ``image``.

    Args:
        image: ``(H, W, 3)`` uint8 BGR frame; not modified.
        det: detections in ``image`` pixels.
        labels: class names indexed by class id; an id without a name is drawn as a number.

    Returns:
        ``(H, W, 3)`` uint8 annotated copy.

    Raises:
        ValueError: ``image`` is not ``(H, W, 3)`` uint8.
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be (H, W, 3) uint8, got {image.shape} {image.dtype}")
    out = np.array(image, order="C", copy=True)
    height, width = out.shape[:2]
    # Scale line and text with the frame so that 4K and 320p both stay legible.
    thickness = max(1, round(min(height, width) / 360))
    font_scale = 0.4 * thickness
    boxes = np.rint(det.xyxy).astype(np.int32).tolist()
    for (x1, y1, x2, y2), score, cid in zip(
        boxes, det.score.tolist(), det.class_id.tolist(), strict=True
    ):
        colour = class_colour(cid)
        cv2.rectangle(out, (x1, y1), (x2, y2), colour, thickness, cv2.LINE_AA)
        name = labels[cid] if 0 <= cid < len(labels) else str(cid)
        caption = f"{name} {score:.2f}"
        (text_w, text_h), baseline = cv2.getTextSize(caption, _FONT, font_scale, thickness)
        # Caption above the box, or inside it when the box touches the top edge.
        top = y1 - text_h - baseline if y1 - text_h - baseline >= 0 else y1
        cv2.rectangle(out, (x1, top), (x1 + text_w, top + text_h + baseline), colour, -1)
        cv2.putText(
            out,
            caption,
            (x1, top + text_h),
            _FONT,
            font_scale,
            _text_colour(colour),
            thickness,
            cv2.LINE_AA,
        )
    return out
