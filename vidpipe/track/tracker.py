"""One camera's multi-object tracker: Norfair with IoU matching and a Kalman filter.

Why Norfair (the ``norfair-enough`` distribution, a maintained fork of tryolabs/norfair, the
tracker Frigate uses): its dependencies are numpy, scipy and rich, so it installs from
pyproject.toml beside opencv-python-headless 5 and numpy 2. Roboflow's ``trackers`` (the home
of ByteTrack since ``supervision`` dropped it) requires ``opencv-python``, which would install
a second, clashing ``cv2``; upstream ``norfair`` pins ``numpy<2``. See README "Tracking".

Detector decimation (``detect_fps``) and lost frames are handled by Norfair's ``period``: the
number of decoded frames since the camera's previous result, taken from ``Frame.seq``. Frames
the motion gate skipped are such gaps too; and since the picture did not change during them, a
track that was already missing in the frame inferred before them was missing in each of them:
it loses one hit per skipped frame (``Frame.still_frames``), so it ends after as many due
frames as without the gate (at the next inferred frame, at most ``max_skip_s`` later). The
tracker is replaced when the stream epoch changes (a reconnect); track ids keep counting up, so
an id is never reused within a camera while the process runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.config import TrackingConfig
from vidpipe.track.zones import Observations
from vidpipe.types import Detections


@dataclass(frozen=True, slots=True)
class TrackUpdate:
    """What one frame did to a camera's tracks.

    Attributes:
        tracker_id: ``(N,)`` int64, per detection of the frame: its track's id, -1 if it is not
            part of a confirmed track (yet).
        observed: confirmed tracks matched to a detection in this frame.
        ended: ids of confirmed tracks that ended in this frame (lost for too long).
        reset: True if the stream epoch changed and every earlier track was dropped.
    """

    tracker_id: npt.NDArray[np.int64]
    observed: Observations
    ended: frozenset[int] = field(default_factory=frozenset)
    reset: bool = False


class CameraTracker:
    """Track ids for one camera's detections, frame after frame (one thread only).

    Args:
        cfg: the camera's tracking settings.
    """

    def __init__(self, cfg: TrackingConfig) -> None:
        # Imported here, when the daemon starts, not at module import (a daemon without
        # tracking never pays for it) nor on the first frame (it takes a second or more, and
        # would stall the thread that postprocesses).
        import norfair

        self._norfair: Any = norfair
        self.cfg = cfg
        self._tracker: Any = None
        self._epoch: int | None = None
        self._last_seq: int | None = None
        self._id_base = 0  # ids issued by earlier epochs' trackers
        self._alive: set[int] = set()
        self._updates = 0
        self.resets = 0

    @property
    def live_tracks(self) -> int:
        """Tracks Norfair holds now, confirmed or not (bounded by ``max_lost_frames``)."""
        return 0 if self._tracker is None else len(self._tracker.tracked_objects)

    def _new_tracker(self) -> Any:
        if self._tracker is not None:
            self._id_base += int(self._tracker.total_object_count)
        return self._norfair.Tracker(
            distance_function="iou",
            distance_threshold=1.0 - self.cfg.min_iou,
            hit_counter_max=self.cfg.max_lost_frames,
            initialization_delay=self.cfg.min_hits - 1,
            past_detections_length=0,
        )

    def update(self, det: Detections, seq: int, epoch: int, still_frames: int = 0) -> TrackUpdate:
        """Match one frame's detections to tracks.

        Args:
            det: the frame's detections, in frame pixels.
            seq: the frame's sequence number (``Frame.seq``; gaps are decimated or dropped
                frames).
            epoch: the frame's stream epoch; a change resets the tracker.
            still_frames: due frames the motion gate skipped right before this one.
        """
        # a new epoch is a new stream; so is a seq that went back (a restarted capture)
        went_back = self._last_seq is not None and seq < self._last_seq
        reset = self._tracker is not None and (epoch != self._epoch or went_back)
        ended: frozenset[int] = frozenset()
        if reset:
            ended = frozenset(self._alive)
            self._alive = set()
            self.resets += 1
        if self._tracker is None or reset:
            self._tracker = self._new_tracker()
            self._last_seq = None
        self._epoch = epoch
        period = 1 if self._last_seq is None else max(1, seq - self._last_seq)
        self._last_seq = seq
        self._updates += 1
        objects = self._tracker.update(self._norfair_detections(det), period=period)
        if still_frames > 0 and not reset:
            objects = self._miss_still_frames(still_frames)
        return self._collect(det, objects, ended, reset)

    def _miss_still_frames(self, still_frames: int) -> list[Any]:
        """Tracks missing in this frame and in the one before the still stretch lose a hit per
        still frame; returns the tracks still active."""
        for obj in self._tracker.tracked_objects:
            token = obj.last_detection.data[0]
            if token < self._updates - 1:  # matched neither now nor in the previous update
                obj.hit_counter -= still_frames
        return list(self._tracker.get_active_objects())

    def _norfair_detections(self, det: Detections) -> list[Any]:
        """One Norfair detection per box: two points, the class as label, (update, index)."""
        detection = self._norfair.Detection
        corners = det.xyxy.astype(np.float64).reshape(-1, 2, 2)
        token = self._updates
        return [
            detection(points=corners[i], label=cid, data=(token, i))
            for i, cid in enumerate(det.class_id.tolist())
        ]

    def _collect(
        self, det: Detections, objects: list[Any], ended: frozenset[int], reset: bool
    ) -> TrackUpdate:
        tracker_id = np.full(len(det), -1, dtype=np.int64)
        alive: set[int] = set()
        for obj in objects:
            if obj.id is None:
                continue
            tid = self._id_base + int(obj.id)
            alive.add(tid)
            token, index = obj.last_detection.data
            if token == self._updates:  # matched (or created) in this frame
                tracker_id[index] = tid
        ended = ended | frozenset(self._alive - alive)
        self._alive = alive
        seen = np.flatnonzero(tracker_id >= 0)
        observed = Observations(tracker_id[seen], det.class_id[seen], det.xyxy[seen])
        return TrackUpdate(tracker_id, observed, ended, reset)
