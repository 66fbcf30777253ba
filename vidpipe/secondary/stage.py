"""The secondary stage: an embedder model on crops of tracked objects, beside detection.

A result stage (``vidpipe.stages``) after tracking. For each camera it has a ``CropRule`` per
``secondary:`` entry: a confirmed track of a class in ``on``, whose box is at least
``min_box``, gets a crop at most once per ``every_s`` of capture time and at most
``max_per_track`` in all. The crop is copied out of the frame (only then is a device or
fitted picture brought to the host) and queued for its model's ``Lane``; a full queue drops it
(``vidpipe_secondary_dropped_total{reason="secondary_busy"}``). The result itself passes on at
once, whatever the model is doing.

Embeddings arrive on the model's thread and are added to their track's running sum, under the
stage's lock (the result thread reads the same per-track state). On the result thread, at the
next result of the track's camera:

* a track with ``STABLE_CROPS`` embeddings is placed in the model's ``Gallery``: it gets a
  global id, an earlier person's when it matches one (a ``ReidEvent`` rides on the result);
* a track in ``FrameResult.ended_tracks`` is placed once more with its final mean and, once
  its crops in flight are back (at most ``SUMMARY_WAIT_S``), summarised: a ``TrackSummary``
  rides on the result and its state is forgotten.

The result's ``global_ids`` name the global id of each of its tracks that has one (the
camera's first ``secondary:`` entry's model).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.config.models import ReidConfig, SecondaryConfig
from vidpipe.preprocess.crops import crop_box, device_crop
from vidpipe.secondary.embedder import Vector, normalised
from vidpipe.secondary.gallery import Gallery
from vidpipe.secondary.lane import Abandoned, Crop, Embedder, Lane
from vidpipe.secondary.metrics import SecondaryMetrics
from vidpipe.types import DeviceImage, Event, FrameResult, ReidEvent, TrackSummary, host_image

log = logging.getLogger(__name__)

#: Embeddings after which a live track is placed in the gallery. The mean of three crops a
#: second apart already averages over a stride or two and a turn of the body, which one crop
#: does not; waiting for more would leave a person who crosses a camera in a few seconds
#: without a global id until the track ends.
STABLE_CROPS = 3
#: How long an ended track waits for its crops still in flight before it is summarised
#: without them.
SUMMARY_WAIT_S = 2.0
_ERROR_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class CropRule:
    """What one camera crops for one model (a ``secondary:`` entry, its classes resolved)."""

    model: str
    class_ids: frozenset[int]
    min_box: tuple[int, int]
    every_s: float
    max_per_track: int
    include_embeddings: bool

    @classmethod
    def of(cls, cfg: SecondaryConfig, class_ids: Iterable[int]) -> CropRule:
        return cls(
            cfg.model,
            frozenset(class_ids),
            cfg.min_box,
            cfg.every_s,
            cfg.max_per_track,
            cfg.include_embeddings,
        )


@dataclass(slots=True)
class _Track:
    """One track's state for one model (under the stage's lock)."""

    class_id: int
    first_wall: float  # the first result it was seen in, time.time()
    last_crop_t: float = -float("inf")  # t_capture of its last crop due
    submitted: int = 0
    pending: int = 0  # queued or in flight
    total: Vector | None = None  # sum of the normalised embeddings
    embedded: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    placed_at: int = 0  # embeddings when last placed in the gallery (0: never)
    ended_at: float | None = None  # time.time() of the result it ended in
    ended_mono: float = 0.0


_Key = tuple[str, str, int]  # model, camera, track id


class SecondaryStage:
    """The result stage (see the module docstring).

    Args:
        rules: per camera name, its crop rules (class ids resolved against its detector's
            labels); cameras not in it pass straight through.
        embedders: per model name, its opened embedder (the stage closes them).
        reid: matching across cameras.
        metrics: ``secondary_metrics(metrics)``.
        queue_sizes: per model name, the crops that may wait for it (default 64).
    """

    def __init__(
        self,
        rules: Mapping[str, list[CropRule]],
        embedders: Mapping[str, Embedder],
        reid: ReidConfig,
        metrics: SecondaryMetrics,
        queue_sizes: Mapping[str, int] | None = None,
    ) -> None:
        self.rules = {cam: list(r) for cam, r in rules.items() if r}
        self.embedders = dict(embedders)
        self._metrics = metrics
        ids = itertools.count(1)  # one counter: global ids are unique across models too
        self.galleries = {
            name: Gallery(
                reid.threshold,
                reid.window_s,
                reid.links,
                reassociate_s=reid.reassociate_s,
                enabled=reid.enabled,
                ids=ids,
            )
            for name in self.embedders
        }
        self._lock = threading.Lock()
        self._tracks: dict[_Key, _Track] = {}
        self._dirty: dict[tuple[str, str], set[int]] = {}  # (model, camera) -> tracks to settle
        self._last_error_log = -float("inf")
        self.errors = 0
        for name in self.embedders:
            metrics.activate(name)
        sizes = dict(queue_sizes or {})
        self.lanes = {
            name: Lane(e, sizes.get(name, 64), self._answered) for name, e in self.embedders.items()
        }

    # ------------------------------------------------------------------ the result thread

    def __call__(self, result: FrameResult) -> FrameResult:
        rules = self.rules.get(result.camera)
        if rules is None:
            return result
        try:
            return self._process(result, rules)
        except Exception:  # a result is never lost to this stage
            self.errors += 1
            now = time.monotonic()
            if now - self._last_error_log >= _ERROR_LOG_INTERVAL_S:
                self._last_error_log = now
                log.exception("camera %s: secondary stage failed; result passed on", result.camera)
            return result

    def _process(self, result: FrameResult, rules: list[CropRule]) -> FrameResult:
        events: list[Event] = []
        image: npt.NDArray[np.uint8] | None = None
        for rule in rules:
            image = self._crop_due(result, rule, image)
            with self._lock:
                events += self._settle(result, rule)
        gallery = self.galleries[rules[0].model]
        gids: dict[int, int] = {}
        tids = result.detections.tracker_id
        if tids is not None and len(gallery):
            with self._lock:
                for tid in tids[tids >= 0].tolist():
                    gid = gallery.global_id(result.camera, tid)
                    if gid is not None:
                        gids[tid] = gid
        if not events and not gids:
            return result
        return dataclasses.replace(result, events=(*result.events, *events), global_ids=gids)

    def _crop_due(
        self, result: FrameResult, rule: CropRule, image: npt.NDArray[np.uint8] | None
    ) -> npt.NDArray[np.uint8] | None:
        """Queue the crops ``rule`` makes due in ``result``; returns the host picture if it
        had to be fetched (so that a second rule does not fetch it again)."""
        det = result.detections
        if det.tracker_id is None or not len(det):
            return image
        wanted = (det.tracker_id >= 0) & np.isin(det.class_id, list(rule.class_ids))
        size = det.xyxy[:, 2:] - det.xyxy[:, :2]
        big = (size[:, 0] >= rule.min_box[0]) & (size[:, 1] >= rule.min_box[1])
        for i in np.flatnonzero(wanted).tolist():
            tid = int(det.tracker_id[i])
            key = (rule.model, result.camera, tid)
            with self._lock:
                track = self._tracks.get(key)
                if track is None:
                    track = self._tracks[key] = _Track(int(det.class_id[i]), result.wall_time)
                due = (
                    bool(big[i])
                    and track.submitted < rule.max_per_track
                    and result.t_capture - track.last_crop_t >= rule.every_s
                )
                if due:  # a dropped crop counts for the timing too: retried every_s later
                    track.last_crop_t = result.t_capture
            if due:
                image = self._queue_crop(result, rule, tid, track, det.xyxy[i], image)
        return image

    def _queue_crop(
        self,
        result: FrameResult,
        rule: CropRule,
        tid: int,
        track: _Track,
        xyxy: npt.NDArray[np.float32],
        image: npt.NDArray[np.uint8] | None,
    ) -> npt.NDArray[np.uint8] | None:
        if result.image is None:
            self._metrics.dropped.labels(model=rule.model, reason="no_image").inc()
            return image
        box = crop_box(xyxy.tolist(), result.width, result.height)
        if box is None:
            return image
        if isinstance(result.image, DeviceImage):  # cut on the GPU: no frame to the host
            pixels: Any = device_crop(result.image, box)
        else:
            if image is None:
                image = host_image(result.image)
            x1, y1, x2, y2 = box
            pixels = image[y1:y2, x1:x2].copy()
        crop = Crop(rule.model, result.camera, tid, pixels, result.wall_time, time.monotonic())
        with self._lock:
            track.pending += 1  # before the offer: the answer may come back at once
        if self.lanes[rule.model].offer(crop):
            with self._lock:
                track.submitted += 1
            self._metrics.submitted.labels(model=rule.model).inc()
        else:
            with self._lock:
                track.pending -= 1
            self._metrics.dropped.labels(model=rule.model, reason="secondary_busy").inc()
        self._metrics.queue_depth.labels(model=rule.model).set(self.lanes[rule.model].depth)
        return image

    def _settle(self, result: FrameResult, rule: CropRule) -> list[Event]:
        """Tracks of ``result``'s camera for ``rule``'s model that ended, or have new
        embeddings: place them, summarise the ended ones (the caller holds the lock)."""
        camera, model = result.camera, rule.model
        dirty = self._dirty.setdefault((model, camera), set())
        for tid in result.ended_tracks:
            track = self._tracks.get((model, camera, tid))
            if track is not None and track.ended_at is None:
                track.ended_at, track.ended_mono = result.wall_time, time.monotonic()
                dirty.add(tid)
        if not dirty:
            return []
        events: list[Event] = []
        now = time.monotonic()
        for tid in sorted(dirty):
            track = self._tracks.get((model, camera, tid))
            if track is None:
                dirty.discard(tid)
            elif track.ended_at is not None:
                if track.pending <= 0 or now - track.ended_mono > SUMMARY_WAIT_S:
                    events += self._summarise(result, rule, tid, track)
                    del self._tracks[(model, camera, tid)]
                    dirty.discard(tid)
            else:
                if track.embedded >= min(STABLE_CROPS, rule.max_per_track):
                    events += self._place(result, model, tid, track)
                dirty.discard(tid)
        self._metrics.tracks.labels(model=model).set(sum(1 for k in self._tracks if k[0] == model))
        return events

    def _place(self, result: FrameResult, model: str, tid: int, track: _Track) -> list[Event]:
        if track.total is None or track.placed_at == track.embedded:
            return []
        track.placed_at = track.embedded
        match = self.galleries[model].place(
            result.camera, tid, normalised(track.total), track.first_wall, result.wall_time
        )
        if match is None:
            return []
        self._metrics.reid_matches.labels(model=model).inc()
        return [
            ReidEvent(
                camera=result.camera,
                seq=result.seq,
                wall_time=result.wall_time,
                track_id=tid,
                global_id=match.global_id,
                matched_camera=match.camera,
                matched_track_id=match.track_id,
                similarity=match.similarity,
            )
        ]

    def _summarise(
        self, result: FrameResult, rule: CropRule, tid: int, track: _Track
    ) -> list[Event]:
        if track.total is None:
            return []  # never embedded: nothing to say of it
        events = self._place(result, rule.model, tid, track)
        gallery = self.galleries[rule.model]
        gallery.end(result.camera, tid, result.wall_time)
        gid = gallery.global_id(result.camera, tid)
        assert gid is not None  # placed just now, or earlier
        summary = TrackSummary(
            camera=result.camera,
            seq=result.seq,
            wall_time=result.wall_time,
            track_id=tid,
            global_id=gid,
            class_id=track.class_id,
            label=result.labels.name(track.class_id),
            first_seen=track.first_seen,
            last_seen=track.last_seen,
            crops=track.embedded,
            embedding=normalised(track.total),
            model=rule.model,
            record_embedding=rule.include_embeddings,
        )
        return [*events, summary]

    # ------------------------------------------------------------------ the model's thread

    def _answered(self, crop: Crop, result: object) -> None:
        """An embedding, or the error instead of it (model thread, feeder thread)."""
        model = crop.model
        vector = result if isinstance(result, np.ndarray) else None
        with self._lock:
            track = self._tracks.get((model, crop.camera, crop.track_id))
            if track is not None:
                track.pending -= 1
                if vector is not None:
                    track.total = vector.copy() if track.total is None else track.total + vector
                    track.embedded += 1
                    track.first_seen = track.first_seen or crop.wall_time
                    track.last_seen = crop.wall_time
                self._dirty.setdefault((model, crop.camera), set()).add(crop.track_id)
        if vector is not None:
            self._metrics.embedded.labels(model=model).inc()
            self._metrics.latency.labels(model=model).observe(time.monotonic() - crop.t_queued)
        else:
            reason = "shutdown" if isinstance(result, Abandoned) else "inference_error"
            self._metrics.dropped.labels(model=model, reason=reason).inc()

    # ------------------------------------------------------------------ lifecycle

    def embed(self, model: str | None = None) -> Embedder:
        """The embedder of ``model`` (None: the first), for search by picture (``embed``)."""
        return self.embedders[model or next(iter(self.embedders))]

    def close(self, timeout_s: float = 5.0) -> bool:
        """Embed what is queued and in flight within ``timeout_s``; what is left is counted
        (``reason="shutdown"``). Every request of every model has finished when this returns.
        True if nothing was abandoned."""
        deadline = time.monotonic() + timeout_s
        finished = True
        for lane in self.lanes.values():
            finished = lane.close(max(0.0, deadline - time.monotonic())) and finished
        return finished
