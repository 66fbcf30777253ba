"""Pure geometry of zones and lines, in frame pixels.

Image coordinates: x to the right, y down. For a directed line ``a -> b`` the signed distance
of a point is ``cross(b - a, p - a) / |b - a|``: negative on the line's left-hand side as seen
on screen (looking from ``a`` to ``b``), positive on its right-hand side. Crossing from right
to left is ``in``, from left to right ``out``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vidpipe.config import LineConfig, ZoneConfig

FloatArray = npt.NDArray[np.float64]


def to_pixels(
    points: Sequence[tuple[float, float]], coords: str, width: int, height: int
) -> FloatArray:
    """Config points as a ``(K, 2)`` float64 array in frame pixels.

    Args:
        points: ``[(x, y), ...]`` as configured.
        coords: ``"pixel"`` (taken as they are) or ``"normalized"`` (0..1 of width, height).
        width: frame width in pixels.
        height: frame height in pixels.
    """
    arr = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if coords == "normalized":
        arr = arr * np.array([width, height], dtype=np.float64)
    return arr


def anchor_points(xyxy: npt.ArrayLike, anchor: str) -> FloatArray:
    """The ``(N, 2)`` anchor point of each ``(N, 4)`` box: bottom centre or centre."""
    boxes = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    x = (boxes[:, 0] + boxes[:, 2]) / 2.0
    y = boxes[:, 3] if anchor == "bottom_center" else (boxes[:, 1] + boxes[:, 3]) / 2.0
    return np.stack([x, y], axis=1)


def points_in_polygon(points: npt.ArrayLike, polygon: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Even-odd rule: which of the ``(N, 2)`` points lie inside the ``(K, 2)`` polygon.

    A point exactly on the right or bottom edge counts as outside, one on the left or top edge
    as inside (the usual half-open convention, so that tiled zones never share a point). Points
    of boxes clipped to the frame go through :func:`into_frame` first, so that a zone drawn to
    the frame's bottom or right edge contains them.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    poly = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
    px = pts[:, 0:1]  # (N, 1) against (1, K) edges
    py = pts[:, 1:2]
    x0, y0 = poly[:, 0][None, :], poly[:, 1][None, :]
    x1, y1 = np.roll(poly[:, 0], -1)[None, :], np.roll(poly[:, 1], -1)[None, :]
    straddles = (y0 > py) != (y1 > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = x0 + (py - y0) * (x1 - x0) / (y1 - y0)
    hits = straddles & (px < x_cross)
    return np.asarray(np.count_nonzero(hits, axis=1) % 2 == 1)


def into_frame(points: npt.ArrayLike, width: int, height: int) -> FloatArray:
    """``(N, 2)`` points moved into the frame's pixel area, the half-open ``[0, width) x
    [0, height)``.

    Boxes are clipped to the closed frame ``[0, width] x [0, height]``: a person walking in
    from the bottom has ``y2 = height`` exactly, so their bottom-centre anchor lies on the bottom
    edge of a zone drawn to the frame's edge, which :func:`points_in_polygon` counts as outside.
    Moving such a point to the largest float below ``height`` puts it inside that zone and
    changes no other answer: nothing can be drawn between it and the frame's edge.

    This keeps the half-open rule, rather than counting every boundary point as inside,
    because zones may tile the picture: with a closed rule, a point on the edge two adjacent
    zones share would be inside both (counted twice, and entering one before leaving the
    other). With this one, every point of the frame is in exactly one of the tiles, and the
    frame's own edges, which no other zone can lie beyond, belong to the zones drawn to them.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    last = np.nextafter(np.array([width, height], dtype=np.float64), 0.0)
    return np.asarray(np.clip(pts, 0.0, last))


def signed_distance(points: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Signed distance in pixels of ``(N, 2)`` points from the line through ``a -> b``.

    Negative: the line's left-hand side on screen; positive: its right-hand side.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    a_ = np.asarray(a, dtype=np.float64)
    d = np.asarray(b, dtype=np.float64) - a_
    rel = pts - a_
    cross = d[0] * rel[:, 1] - d[1] * rel[:, 0]
    return np.asarray(cross / float(np.hypot(d[0], d[1])))


def crosses_segment(
    p0: npt.ArrayLike, p1: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike
) -> bool:
    """Whether the path ``p0 -> p1`` passes the line between ``a`` and ``b`` (ends included).

    ``p0`` and ``p1`` are on opposite sides of the infinite line (the caller knows); this
    checks that the crossing point lies on the segment, not on its extension.
    """
    p0_ = np.asarray(p0, dtype=np.float64)
    p1_ = np.asarray(p1, dtype=np.float64)
    a_ = np.asarray(a, dtype=np.float64)
    b_ = np.asarray(b, dtype=np.float64)
    r = p1_ - p0_
    s = b_ - a_
    denom = r[0] * s[1] - r[1] * s[0]
    if denom == 0:
        return False  # parallel: it cannot change sides
    q = a_ - p0_
    u = (q[0] * r[1] - q[1] * r[0]) / denom  # position along a -> b
    return bool(0.0 <= u <= 1.0)


@dataclass(frozen=True, slots=True)
class Scene:
    """One camera's zones and lines resolved to pixels for one frame size.

    Attributes:
        width: frame width the points were resolved for.
        height: frame height.
        zones: ``(name, (K, 2) polygon)`` per zone, in config order.
        lines: ``(name, a, b)`` per line, in config order.
    """

    width: int
    height: int
    zones: tuple[tuple[str, FloatArray], ...]
    lines: tuple[tuple[str, FloatArray, FloatArray], ...]


def resolve_scene(
    zones: Sequence[ZoneConfig], lines: Sequence[LineConfig], width: int, height: int
) -> Scene:
    """Zones and lines of a camera in pixels of a ``width`` x ``height`` frame."""
    resolved_lines = []
    for ln in lines:
        a, b = to_pixels(ln.points, ln.coords, width, height)
        resolved_lines.append((ln.name, a, b))
    return Scene(
        width,
        height,
        tuple((z.name, to_pixels(z.points, z.coords, width, height)) for z in zones),
        tuple(resolved_lines),
    )
