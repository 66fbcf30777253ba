"""Detection events as JSON-ready dicts, shared by the MQTT and webhook sinks."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np

from vidpipe.types import FrameResult


def iso_time(wall_time: float) -> str:
    """``wall_time`` (``time.time()``) as an ISO 8601 UTC timestamp with milliseconds."""
    return dt.datetime.fromtimestamp(wall_time, dt.UTC).isoformat(timespec="milliseconds")


def detection_event(result: FrameResult) -> dict[str, Any]:
    """The event of one frame: camera, timestamp, frame number, size and detections."""
    return {
        "camera": result.camera,
        "timestamp": iso_time(result.wall_time),
        "time": round(result.wall_time, 3),
        "frame": result.seq,
        "width": result.width,
        "height": result.height,
        "detections": result.detection_dicts(),
    }


def filter_detections(
    result: FrameResult, classes: frozenset[str] | None, min_score: float
) -> FrameResult:
    """``result`` with only the detections of ``classes`` (None: all) scoring ``min_score``+."""
    det = result.detections
    keep = det.score >= min_score
    if classes is not None:
        names = [
            result.labels[c] if 0 <= c < len(result.labels) else str(c)
            for c in det.class_id.tolist()
        ]
        keep &= np.array([n in classes for n in names], dtype=bool).reshape(-1)
    if bool(keep.all()):
        return result
    return dataclasses.replace(result, detections=det.select(keep))
