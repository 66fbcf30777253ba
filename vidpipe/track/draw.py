"""Draw a camera's zones and lines onto a copy of a frame (snapshots, the live view, docs).

Zones are filled translucently in a colour of their own and outlined; lines are drawn with an
arrow at their middle that points to their ``in`` side (crossing along the arrow is ``in``).
Counts, when given, go into the captions.
"""

from __future__ import annotations

from collections.abc import Mapping

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.postprocess.draw import class_colour
from vidpipe.track.geometry import Scene

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_ZONE_ALPHA = 0.25
_LINE_COLOUR = (0, 215, 255)  # BGR amber: stands out on most scenes and from class colours


def _caption(
    out: npt.NDArray[np.uint8], text: str, x: float, y: float, colour: tuple[int, int, int]
) -> None:
    """``text`` on a filled box whose top-left corner is near ``(x, y)``, kept in the frame."""
    scale = max(0.4, min(out.shape[:2]) / 900)
    thickness = max(1, round(scale * 2))
    (w, h), base = cv2.getTextSize(text, _FONT, scale, thickness)
    x0 = int(min(max(x, 0), max(out.shape[1] - w - 4, 0)))
    y0 = int(min(max(y, 0), max(out.shape[0] - h - base - 4, 0)))
    cv2.rectangle(out, (x0, y0), (x0 + w + 4, y0 + h + base + 4), colour, -1)
    b, g, r = colour
    ink = (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (255, 255, 255)
    cv2.putText(out, text, (x0 + 2, y0 + h + 2), _FONT, scale, ink, thickness, cv2.LINE_AA)


def draw_scene(
    image: npt.NDArray[np.uint8],
    scene: Scene,
    *,
    zone_counts: Mapping[str, int] | None = None,
    line_counts: Mapping[str, Mapping[str, int]] | None = None,
) -> npt.NDArray[np.uint8]:
    """Zones and lines of ``scene`` on a copy of ``image``.

    Args:
        image: ``(H, W, 3)`` uint8 BGR frame of the scene's size; not modified.
        scene: zones and lines in pixels (``geometry.resolve_scene``).
        zone_counts: objects inside, per zone name, shown as ``"name: 2"``.
        line_counts: crossings per line name and direction (``{"in": 3, "out": 1}``).

    Returns:
        ``(H, W, 3)`` uint8 annotated copy.

    Raises:
        ValueError: ``image`` is not ``(H, W, 3)`` uint8.
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be (H, W, 3) uint8, got {image.shape} {image.dtype}")
    out = np.array(image, order="C", copy=True)
    thickness = max(1, round(min(out.shape[:2]) / 240))
    if scene.zones:
        fill = out.copy()
        for i, (_name, polygon) in enumerate(scene.zones):
            cv2.fillPoly(fill, [np.rint(polygon).astype(np.int32)], class_colour(i + 7))
        cv2.addWeighted(fill, _ZONE_ALPHA, out, 1 - _ZONE_ALPHA, 0, dst=out)
    for i, (name, polygon) in enumerate(scene.zones):
        colour = class_colour(i + 7)
        pts = np.rint(polygon).astype(np.int32)
        cv2.polylines(out, [pts], True, colour, thickness, cv2.LINE_AA)
        count = zone_counts.get(name) if zone_counts else None
        text = name if count is None else f"{name}: {count}"
        top = pts[np.argmin(pts[:, 1] * 10000 + pts[:, 0])]  # top-most, then left-most corner
        _caption(out, text, top[0], top[1] + thickness, colour)
    for name, a, b in scene.lines:
        _draw_line(out, name, a, b, thickness, line_counts.get(name) if line_counts else None)
    return out


def _draw_line(
    out: npt.NDArray[np.uint8],
    name: str,
    a: npt.NDArray[np.float64],
    b: npt.NDArray[np.float64],
    thickness: int,
    counts: Mapping[str, int] | None,
) -> None:
    pa = (round(a[0]), round(a[1]))
    pb = (round(b[0]), round(b[1]))
    cv2.line(out, pa, pb, _LINE_COLOUR, thickness + 1, cv2.LINE_AA)
    d = b - a
    normal = np.array([d[1], -d[0]]) / float(np.hypot(d[0], d[1]))  # left on screen: "in"
    mid = (a + b) / 2.0
    length = max(12.0, min(out.shape[:2]) / 12)
    tip = mid + normal * length
    cv2.arrowedLine(
        out,
        (round(mid[0]), round(mid[1])),
        (round(tip[0]), round(tip[1])),
        _LINE_COLOUR,
        thickness + 1,
        cv2.LINE_AA,
        tipLength=0.35,
    )
    text = name
    if counts is not None:
        text += f" in {counts.get('in', 0)} / out {counts.get('out', 0)}"
    _caption(out, text, tip[0] + 4, tip[1] - 8, _LINE_COLOUR)
