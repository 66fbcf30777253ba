"""Config models of tracking, zones and lines (fields of ``CameraConfig``).

Class names are resolved against the model's labels when the pipeline is assembled
(``vidpipe.track.stage.build_scenes``), because the labels are not known while the YAML is
parsed.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vidpipe.config.base import ConfigModel as _Model

Point = tuple[float, float]


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _check_name(kind: str, v: str) -> str:
    if not _NAME.fullmatch(v):
        raise ValueError(
            f"{kind} name may use only letters, digits, '_', '-', '.' and must start with a "
            "letter or digit (it is a metric label)"
        )
    return v


def _check_points(points: list[Point], coords: str) -> list[Point]:
    for i, (x, y) in enumerate(points):
        if coords == "normalized" and not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            raise ValueError(
                f"points[{i}] = [{x:g}, {y:g}]: normalized coordinates must lie within 0..1 "
                "(use coords: pixel for pixel coordinates)"
            )
        if coords == "pixel" and (x < 0 or y < 0):
            raise ValueError(f"points[{i}] = [{x:g}, {y:g}]: pixel coordinates cannot be negative")
    return points


class TrackingConfig(_Model):
    """Multi-object tracking of one camera (Norfair, IoU matching with a Kalman filter)."""

    enabled: bool = Field(
        False, description="track objects and give them ids; zones or lines turn it on"
    )
    max_lost_frames: int = Field(
        15,
        ge=1,
        le=1000,
        description="detector frames a steadily seen track survives without a matching "
        "detection (bridges occlusions and missed detections; each match adds 2 back)",
    )
    min_hits: int = Field(
        2,
        ge=1,
        le=100,
        description="detector frames with a match before a new track is confirmed and gets an "
        "id (fewer with detect_fps decimation: each hit counts the frames skipped)",
    )
    min_iou: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="least IoU between a detection and a track's predicted box for a match",
    )

    @model_validator(mode="after")
    def _hits_below_lost(self) -> TrackingConfig:
        if self.min_hits > self.max_lost_frames:
            raise ValueError(
                f"min_hits ({self.min_hits}) must not exceed max_lost_frames "
                f"({self.max_lost_frames})"
            )
        return self


Anchor = Literal["bottom_center", "center"]
Coords = Literal["pixel", "normalized"]


class ZoneConfig(_Model):
    """A polygon zone: objects entering and leaving it are events, those inside a gauge."""

    name: str = Field(min_length=1, max_length=64, description="unique per camera; a label")
    coords: Coords = Field(
        "pixel", description="pixel: frame pixels; normalized: 0..1 of width and height"
    )
    points: list[Point] = Field(description="polygon corners [[x, y], ...], at least 3")
    classes: list[str | int] | None = Field(
        None, description="only these classes (names or ids); default: every class"
    )
    anchor: Anchor = Field(
        "bottom_center", description="the point of a box that must be inside the zone"
    )
    min_frames: int = Field(
        2,
        ge=1,
        le=100,
        description="detector frames in a row a track must be seen inside (outside) to enter "
        "(leave): a box wobbling across the zone's edge makes no events",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name("zone", v)

    @field_validator("points")
    @classmethod
    def _points(cls, v: list[Point], info: ValidationInfo) -> list[Point]:
        if len(v) < 3:
            raise ValueError(f"a zone needs at least 3 points, got {len(v)}")
        coords = info.data.get("coords", "pixel")
        _check_points(v, coords)
        area2 = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(v, v[1:] + v[:1], strict=True))
        if area2 == 0:
            raise ValueError("the zone's points enclose no area (all on one line?)")
        return v


class LineConfig(_Model):
    """A directed line from points[0] to points[1]: objects crossing it are counted.

    Crossing from the line's right-hand side to its left-hand side (as seen on screen, looking
    from points[0] to points[1]) is ``in``; the other way is ``out``. The drawn line has an
    arrow pointing to its ``in`` side.
    """

    name: str = Field(min_length=1, max_length=64, description="unique per camera; a label")
    coords: Coords = Field(
        "pixel", description="pixel: frame pixels; normalized: 0..1 of width and height"
    )
    points: list[Point] = Field(description="[[x1, y1], [x2, y2]]: start and end")
    classes: list[str | int] | None = Field(
        None, description="only these classes (names or ids); default: every class"
    )
    anchor: Anchor = Field("bottom_center", description="the point of a box that crosses")
    min_distance_px: float = Field(
        4.0,
        ge=0,
        description="an object changes sides only once its anchor is this far past the line, "
        "so that jitter along the line is not counted",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name("line", v)

    @field_validator("points")
    @classmethod
    def _points(cls, v: list[Point], info: ValidationInfo) -> list[Point]:
        if len(v) != 2:
            raise ValueError(f"a line needs exactly 2 points, got {len(v)}")
        if v[0] == v[1]:
            raise ValueError("the line's two points are the same")
        return _check_points(v, info.data.get("coords", "pixel"))


def check_scene(tracking: TrackingConfig, zones: list[ZoneConfig], lines: list[LineConfig]) -> None:
    """Cross-field checks of one camera: unique names, tracking not switched off."""
    for kind, names in (("zone", [z.name for z in zones]), ("line", [ln.name for ln in lines])):
        seen: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in seen:
                raise ValueError(
                    f"duplicate {kind} name {name!r} ({kind}s[{seen[name]}] and {kind}s[{i}])"
                )
            seen[name] = i
    if (zones or lines) and "enabled" in tracking.model_fields_set and not tracking.enabled:
        raise ValueError("zones and lines need tracking: remove tracking.enabled: false")
