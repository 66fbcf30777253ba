"""Draw detections onto a copy of a frame."""

from __future__ import annotations

import colorsys

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.labels import Labels
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


def _draw_caption(
    out: npt.NDArray[np.uint8],
    caption: str,
    x: int,
    y: int,
    colour: tuple[int, int, int],
    thickness: int,
) -> None:
    """Caption on a filled background above ``(x, y)``, kept inside the frame."""
    font_scale = 0.4 * thickness
    (text_w, text_h), baseline = cv2.getTextSize(caption, _FONT, font_scale, thickness)
    height, width = out.shape[:2]
    box_h = text_h + baseline
    x = min(max(x, 0), max(width - text_w, 0))
    y = min(max(y, 0), height - 1)
    # Above the box where there is room, else just inside its top edge.
    top = y - box_h if y - box_h >= 0 else y
    cv2.rectangle(out, (x, top), (x + text_w, top + box_h), colour, -1)
    cv2.putText(
        out,
        caption,
        (x, top + text_h),
        _FONT,
        font_scale,
        _text_colour(colour),
        thickness,
        cv2.LINE_AA,
    )


def draw_detections(
    image: npt.NDArray[np.uint8], det: Detections, labels: Labels
) -> npt.NDArray[np.uint8]:
    """Draw boxes and ``"label 0.87"`` captions onto a copy of ``image``.

    A tracked detection's caption carries its track id: ``"person #12 0.87"``.

    Args:
        image: ``(H, W, 3)`` uint8 BGR frame; not modified.
        det: detections in ``image`` pixels.
        labels: the class names; an id without a name is drawn as a number.

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
    boxes = np.rint(det.xyxy).astype(np.int32).tolist()
    tids = det.tracker_id.tolist() if det.tracker_id is not None else [-1] * len(det)
    for (x1, y1, x2, y2), score, cid, tid in zip(
        boxes, det.score.tolist(), det.class_id.tolist(), tids, strict=True
    ):
        colour = class_colour(cid)
        # LINE_8, not LINE_AA: boxes keep their exact class colour and draw faster.
        cv2.rectangle(out, (x1, y1), (x2, y2), colour, thickness, cv2.LINE_8)
        name = labels.name(cid)
        caption = f"{name} #{tid} {score:.2f}" if tid >= 0 else f"{name} {score:.2f}"
        _draw_caption(out, caption, x1, y1, colour, thickness)
    return out
