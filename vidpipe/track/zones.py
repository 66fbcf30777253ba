"""Zone and line logic over track observations: which tracks entered, left or crossed.

Both watchers are fed, frame by frame, the confirmed tracks that were matched to a detection
in that frame (``Observations``) and the ids of tracks that ended. A track that is alive but
unmatched (occluded, or missed by the detector) is simply not observed: it keeps its zone
membership and its side of each line, so short occlusions make no events. State is kept per
live track only and dropped when the track ends, so it is bounded by the number of tracks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.labels import Labels
from vidpipe.track.geometry import (
    FloatArray,
    anchor_points,
    crosses_segment,
    into_frame,
    points_in_polygon,
    signed_distance,
)
from vidpipe.types import TrackEvent


@dataclass(frozen=True, slots=True)
class Observations:
    """Confirmed tracks matched to a detection in one frame.

    Attributes:
        tracker_id: ``(M,)`` int64 track ids.
        class_id: ``(M,)`` int32 classes.
        xyxy: ``(M, 4)`` boxes in frame pixels.
    """

    tracker_id: npt.NDArray[np.int64]
    class_id: npt.NDArray[np.int32]
    xyxy: npt.NDArray[np.float32]

    @classmethod
    def empty(cls) -> Observations:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros((0, 4), np.float32))

    def __len__(self) -> int:
        return int(self.tracker_id.shape[0])


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """The frame that events happen in."""

    camera: str
    seq: int
    wall_time: float
    t_capture: float


def _track_event(
    kind: str,
    frame: FrameInfo,
    where: str,
    labels: Labels,
    tid: int,
    cid: int,
    point: tuple[float, float],
    **extra: Any,
) -> TrackEvent:
    """One zone or line event of track ``tid`` at ``frame`` (``extra``: dwell, reason, ...)."""
    return TrackEvent(
        kind=kind,
        camera=frame.camera,
        seq=frame.seq,
        wall_time=frame.wall_time,
        where=where,
        tracker_id=tid,
        class_id=cid,
        label=labels.name(cid),
        point=point,
        **extra,
    )


def _eligible(obs: Observations, class_ids: frozenset[int] | None) -> npt.NDArray[np.bool_]:
    if class_ids is None:
        return np.ones(len(obs), dtype=bool)
    wanted = np.fromiter(class_ids, dtype=np.int64, count=len(class_ids))
    return np.asarray(np.isin(obs.class_id, wanted))


@dataclass(slots=True)
class _Inside:
    class_id: int
    t_enter: float
    point: tuple[float, float]


@dataclass(slots=True)
class _Pending:
    """A track seen on the other side of the zone's edge than it counts as, not yet long enough."""

    inside: bool
    frames: int
    t_first: float


class ZoneWatch:
    """One polygon zone: enter and leave events with dwell time, and who is inside.

    A track counts as having entered (left) once its anchor is seen inside (outside) in
    ``min_frames`` observations in a row, so a box whose edge wobbles across the zone's edge
    does not enter and leave again and again. The dwell time runs from the first of those
    frames.

    Args:
        camera_labels: class names, indexed by class id (for events).
        name: the zone's name.
        polygon: ``(K, 2)`` corners in frame pixels.
        class_ids: classes that count; None: every class.
        anchor: ``"bottom_center"`` or ``"center"`` of each box.
        min_frames: observations in a row that make an enter or a leave.
        frame_size: ``(width, height)`` the polygon was resolved for; anchors are moved into
            the frame (``geometry.into_frame``) so that a zone drawn to the frame's edge
            contains boxes clipped to it.
    """

    def __init__(
        self,
        camera_labels: Labels,
        name: str,
        polygon: FloatArray,
        class_ids: frozenset[int] | None,
        anchor: str,
        min_frames: int = 1,
        *,
        frame_size: tuple[int, int],
    ) -> None:
        self.name = name
        self.polygon = polygon
        self.frame_size = frame_size
        self.class_ids = class_ids
        self.anchor = anchor
        self.min_frames = min_frames
        self._labels = camera_labels
        self._inside: dict[int, _Inside] = {}
        self._pending: dict[int, _Pending] = {}

    def update(self, frame: FrameInfo, obs: Observations, ended: Iterable[int]) -> list[TrackEvent]:
        """Events of one frame: tracks that entered, left, or ended while inside."""
        events: list[TrackEvent] = []
        keep = _eligible(obs, self.class_ids)
        if keep.any():
            pts = anchor_points(obs.xyxy[keep], self.anchor)
            inside = points_in_polygon(into_frame(pts, *self.frame_size), self.polygon)
            for tid, cid, pt, now_in in zip(
                obs.tracker_id[keep].tolist(),
                obs.class_id[keep].tolist(),
                pts.tolist(),
                inside.tolist(),
                strict=True,
            ):
                event = self._observe(frame, tid, cid, (pt[0], pt[1]), now_in)
                if event is not None:
                    events.append(event)
        for tid in ended:
            self._pending.pop(tid, None)
            if tid in self._inside:
                events.append(self._leave(frame, tid, "lost"))
        return events

    def _observe(
        self, frame: FrameInfo, tid: int, cid: int, point: tuple[float, float], now_in: bool
    ) -> TrackEvent | None:
        was = self._inside.get(tid)
        if was is not None:
            was.point = point
        if now_in == (was is not None):
            self._pending.pop(tid, None)
            return None
        pending = self._pending.get(tid)
        if pending is None or pending.inside != now_in:
            pending = self._pending[tid] = _Pending(now_in, 0, frame.t_capture)
        pending.frames += 1
        if pending.frames < self.min_frames:
            return None
        del self._pending[tid]
        if now_in:
            self._inside[tid] = _Inside(cid, pending.t_first, point)
            return self._event("enter", frame, tid, cid, point)
        return self._leave(frame, tid, "exited", pending.t_first)

    def reset(self, frame: FrameInfo) -> list[TrackEvent]:
        """Every track inside leaves (reason ``reset``): the camera's tracks start over."""
        self._pending.clear()
        return [self._leave(frame, tid, "reset") for tid in list(self._inside)]

    def counts(self) -> dict[int, int]:
        """Tracks inside now, per class id (a snapshot: the live view may call it anytime)."""
        out: dict[int, int] = {}
        for item in list(self._inside.values()):
            out[item.class_id] = out.get(item.class_id, 0) + 1
        return out

    def _leave(
        self, frame: FrameInfo, tid: int, reason: str, t_left: float | None = None
    ) -> TrackEvent:
        item = self._inside.pop(tid)
        t_end = frame.t_capture if t_left is None else t_left
        dwell_s = max(0.0, t_end - item.t_enter)
        return self._event("leave", frame, tid, item.class_id, item.point, dwell_s, reason)

    def _event(
        self,
        kind: str,
        frame: FrameInfo,
        tid: int,
        cid: int,
        point: tuple[float, float],
        dwell_s: float | None = None,
        reason: str | None = None,
    ) -> TrackEvent:
        return _track_event(
            kind, frame, self.name, self._labels, tid, cid, point, dwell_s=dwell_s, reason=reason
        )


@dataclass(slots=True)
class _Side:
    side: int  # -1: left of a -> b on screen, +1: right
    point: tuple[float, float]  # the last anchor seen on that side, beyond the dead band


class LineWatch:
    """One directed line: ``cross`` events with direction ``in`` (right to left) or ``out``.

    A track changes sides only when its anchor is more than ``min_distance_px`` past the line
    (a dead band), so an object standing on the line, or jittering along it, is not counted
    again and again; and only a path that passes between the line's two ends counts.

    Args:
        camera_labels: class names, indexed by class id (for events).
        name: the line's name.
        a: start point in frame pixels.
        b: end point.
        class_ids: classes that count; None: every class.
        anchor: ``"bottom_center"`` or ``"center"`` of each box.
        min_distance_px: the dead band's half width.
    """

    def __init__(
        self,
        camera_labels: Labels,
        name: str,
        a: FloatArray,
        b: FloatArray,
        class_ids: frozenset[int] | None,
        anchor: str,
        min_distance_px: float,
    ) -> None:
        self.name = name
        self.a = a
        self.b = b
        self.class_ids = class_ids
        self.anchor = anchor
        self.min_distance_px = min_distance_px
        self._labels = camera_labels
        self._sides: dict[int, _Side] = {}
        self.crossings = {"in": 0, "out": 0}  # since start, for drawing

    def update(self, frame: FrameInfo, obs: Observations, ended: Iterable[int]) -> list[TrackEvent]:
        """Cross events of one frame; forgets tracks that ended."""
        events: list[TrackEvent] = []
        keep = _eligible(obs, self.class_ids)
        if keep.any():
            pts = anchor_points(obs.xyxy[keep], self.anchor)
            dist = signed_distance(pts, self.a, self.b)
            for tid, cid, pt, d in zip(
                obs.tracker_id[keep].tolist(),
                obs.class_id[keep].tolist(),
                pts.tolist(),
                dist.tolist(),
                strict=True,
            ):
                if abs(d) <= self.min_distance_px:
                    continue  # in the dead band: keep the side it had
                point = (pt[0], pt[1])
                side = -1 if d < 0 else 1
                was = self._sides.get(tid)
                if (
                    was is not None
                    and was.side != side
                    and crosses_segment(was.point, point, self.a, self.b)
                ):
                    direction = "in" if side < 0 else "out"
                    self.crossings[direction] += 1
                    events.append(self._event(frame, tid, cid, point, direction))
                self._sides[tid] = _Side(side, point)
        for tid in ended:
            self._sides.pop(tid, None)
        return events

    def reset(self) -> None:
        """Forget every track (the camera's tracks start over)."""
        self._sides.clear()

    def _event(
        self, frame: FrameInfo, tid: int, cid: int, point: tuple[float, float], direction: str
    ) -> TrackEvent:
        return _track_event(
            "cross", frame, self.name, self._labels, tid, cid, point, direction=direction
        )
