"""Event clips: triggers from results and events open clips over each camera's packet ring.

``ClipRecorder.observe`` runs inline between tracking and the sinks (the pipeline's result
thread). It only compares scores and times, copies the best crop of a track when it improves,
and attaches the clip events of clips written since the camera's previous result: that is how a
``clip`` record reaches every sink, in the one record format. A clip that no later result can
carry (a removed camera's, those written at shutdown) goes to the sinks on its own
(``send_late_events``). Cutting clips out of the rings, remuxing, crops, sidecars and retention
run on the recorder's own writer thread behind a bounded queue (a full queue drops the clip,
counted).

The recorder never calls into capture: the assembler installs each camera's ``PacketRing`` as
that camera's packet tap, and the recorder reads the ring.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.clips.align import MAX_OFFSET_S, DetectClock, InputOffset, clip_source
from vidpipe.clips.ring import PacketRing, Segment
from vidpipe.clips.shots import Crop, Shot, better_tracks, padded_box
from vidpipe.clips.store import clean_temp, clip_id, enforce
from vidpipe.clips.triggers import trigger_hits
from vidpipe.clips.writer import ClipJob, ClipWriteError, write_clip
from vidpipe.config import CameraConfig, ClipsConfig, SchedulerConfig
from vidpipe.metrics import CLIP_DROPS, CLIP_FAILURES, Metrics
from vidpipe.stages import events_result
from vidpipe.types import ClipEvent, FrameResult, host_image

log = logging.getLogger(__name__)

#: How often the writer thread looks for clips whose time is up.
_TICK_S = 0.2
#: At most one error line per camera per this many seconds.
_ERROR_LOG_INTERVAL_S = 30.0
#: Packets are placed in time by when they were demuxed, which jitters with the reader thread's
#: scheduling (and a loaded machine's); the window is cut this much wider on both sides so that
#: it covers [first - pre_s, last + post_s] in the stream's own timestamps.
_JITTER_S = 0.5
#: The scheduler drops a frame older than this when its turn comes (``max_frame_age_ms``):
#: the latest a trigger can reach the recorder, unless the assembler passes the configured value.
_DEFAULT_MAX_LATENCY_S = SchedulerConfig().max_frame_age_ms / 1000.0
#: Triggers listed in a sidecar (a class trigger fires on every frame: one per track is kept).
_MAX_TRIGGERS = 50
#: A record input's packets of a moment may arrive before its detect picture leaves the
#: decoder (a negative offset, at most MAX_OFFSET_S): its ring keeps this much more pre-roll.
_OFFSET_MARGIN_S = MAX_OFFSET_S


@dataclass(slots=True)
class _OpenClip:
    t_from: float  # monotonic, on the ring's clock: first trigger - pre_s
    t_end: float  # last trigger + post_s, capped at t_from + max_s
    seq: int
    triggers: list[dict[str, Any]] = field(default_factory=list)
    trigger_times: list[float] = field(default_factory=list)  # monotonic, one per trigger
    triggers_total: int = 0
    seen: set[tuple[str, int]] = field(default_factory=set)
    classes: list[str] = field(default_factory=list)
    tracker_ids: list[int] = field(default_factory=list)
    crops: dict[int, Crop] = field(default_factory=dict)
    shots: dict[int, Shot] = field(default_factory=dict)  # clips.crop.source: record
    # a record input's packets of a moment arrive this much after its detect picture is
    # decoded (``align.py``); None: placed by arrival
    offset_s: float | None = None

    def at(self, t_capture: float) -> float:
        """A detect frame's ``t_capture`` on the clock of the ring's packets."""
        return t_capture + (self.offset_s or 0.0)


class _Camera:
    """One camera's clip settings, ring and open clip."""

    def __init__(
        self, cam: CameraConfig, class_ids: frozenset[int], ring: PacketRing, camera_dir: Path
    ) -> None:
        self.name = cam.name
        self.cfg: ClipsConfig = cam.clips
        self.class_ids = class_ids
        self.ring = ring
        self.dir = camera_dir
        self.open: _OpenClip | None = None
        self.announce: list[ClipEvent] = []
        self.last_error_log = -1e9
        self._ids: set[str] = set()
        # a camera with a record input: its ring holds that input's packets, never decoded; a
        # trigger (a detect frame's capture time) is placed by arrival time, moved by the
        # offset between the inputs where their sender reports measure it (``align.py``)
        self.inputs = InputOffset(cam.name, ring.sender_delay) if cam.record_input else None
        # crops cut from the record stream when the clip is written (``shots.py``): the
        # result's picture is not needed
        self.crop_from_record = cam.clips.crop.source == "record"

    def offset(self) -> float | None:
        """The record input's offset against the detect input now; None: not measured."""
        return None if self.inputs is None else self.inputs.offset()

    def source(self, clip: _OpenClip) -> dict[str, Any]:
        """Which input ``clip``'s packets came from and how the two were placed in time."""
        return {} if self.inputs is None else clip_source(clip.offset_s)

    def new_id(self, wall_time: float) -> str:
        """A clip id not yet used by this camera in this process."""
        cid = clip_id(wall_time, self._ids)
        self._ids.add(cid)
        return cid


class ClipRecorder:
    """Every camera's clips. ``observe`` on the result thread; writing on its own thread.

    Args:
        metrics: the process's metrics.
        queue_size: clips waiting to be written; beyond it a clip is dropped (counted).
        clock: the monotonic clock that packet and frame times come from.
        max_latency_s: how long after its capture a frame may still be detected on
            (``scheduler.max_frame_age_ms``): the rings keep that much more than ``pre_s``, so
            that a trigger handled that late still gets its whole pre-roll.
    """

    def __init__(
        self,
        metrics: Metrics,
        queue_size: int = 16,
        clock: Callable[[], float] = time.monotonic,
        max_latency_s: float = _DEFAULT_MAX_LATENCY_S,
    ) -> None:
        self._metrics = metrics
        self._clock = clock
        self._max_latency_s = max_latency_s
        self._cameras: dict[str, _Camera] = {}
        self._lock = threading.Lock()  # open clips and announcements: result vs writer thread
        self._jobs: queue.Queue[ClipJob] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wants_images = False
        self._late: Callable[[FrameResult], None] | None = None

    def send_late_events(self, submit: Callable[[FrameResult], None]) -> None:
        """Where the clip events go that no later result of their camera can carry (a removed
        camera's last clip, the clips written at shutdown): ``submit`` gets each camera's as
        an events-only result (``events_result``)."""
        self._late = submit

    # ------------------------------------------------------------------ assembly

    def add_camera(self, cam: CameraConfig, class_ids: frozenset[int]) -> PacketRing:
        """Record ``cam``'s clips from now on; returns the ring to install as its packet tap."""
        cfg = cam.clips
        camera_dir = Path(cfg.dir) / cam.name
        removed = clean_temp(camera_dir)
        if removed:
            log.info(
                "camera %s: removed %d unfinished clip file(s) in %s", cam.name, removed, camera_dir
            )
        latency_s = self._max_latency_s + _JITTER_S  # cut from _JITTER_S before trigger - pre_s
        if cam.record_input:
            latency_s += _OFFSET_MARGIN_S
        ring = PacketRing(
            cam.name,
            cfg.pre_s,
            int(cfg.buffer_mb * 1024 * 1024),
            on_overflow=self._metrics.clip_ring_overflow.labels(camera=cam.name).inc,
            on_stream_end=functools.partial(self._stream_ended, cam.name),
            latency_s=latency_s,
        )
        for reason in CLIP_FAILURES:
            self._metrics.clips_failed.labels(camera=cam.name, reason=reason)
        for reason in CLIP_DROPS:
            self._metrics.clips_dropped.labels(camera=cam.name, reason=reason)
        self._metrics.clips_written.labels(camera=cam.name)
        camera = _Camera(cam, class_ids, ring, camera_dir)
        with self._lock:
            self._cameras = {**self._cameras, cam.name: camera}
            self.wants_images = any(
                c.cfg.crop.enabled and not c.crop_from_record for c in self._cameras.values()
            )
        self._retention(camera)
        self._start()
        return ring

    def set_classes(self, classes: dict[str, frozenset[int]]) -> None:
        """The detection classes that trigger each camera's clips, known once its detector
        is open (its cameras record from before that: ``add_camera`` took none)."""
        for name, camera in self._cameras.items():
            camera.class_ids = classes.get(name, frozenset())

    def detect_clock(self, name: str) -> DetectClock | None:
        """The packet tap for the detect input of ``name`` when its record input feeds the
        ring (``add_camera``): it times the detect pictures, for placing triggers."""
        camera = self._cameras.get(name)
        return None if camera is None or camera.inputs is None else camera.inputs.clock

    def remove_camera(self, name: str) -> None:
        """Stop recording ``name``; a clip it has open is written with what the ring holds."""
        with self._lock:
            camera = self._cameras.get(name)
            if camera is None:
                return
            self._cameras = {k: v for k, v in self._cameras.items() if k != name}
            job = self._close(camera, "camera_stopped", self._clock())
        if job is not None:
            self._enqueue(job)

    def camera_dirs(self) -> dict[str, Path]:
        """Each recording camera's clip directory (for the HTTP routes)."""
        return {name: c.dir for name, c in self._cameras.items()}

    # ------------------------------------------------------------------ result thread

    def observe(self, result: FrameResult) -> FrameResult:
        """Check ``result`` for triggers; returns it with the camera's new clip events."""
        camera = self._cameras.get(result.camera)
        if camera is None:
            return result
        hits = trigger_hits(result, camera.cfg.triggers, camera.class_ids)
        with self._lock:
            if hits:
                self._trigger(camera, result, hits)
            if camera.open is not None and camera.cfg.crop.enabled:
                if camera.crop_from_record:
                    self._update_shots(camera.open, result)
                elif result.image is not None:
                    self._update_crops(camera, camera.open, result)
            announce, camera.announce = camera.announce, []
        if announce:
            result = dataclasses.replace(result, events=(*result.events, *announce))
        return result

    def _trigger(self, camera: _Camera, result: FrameResult, hits: list[dict[str, Any]]) -> None:
        cfg = camera.cfg
        clip = camera.open
        if clip is not None and clip.at(result.t_capture) >= clip.t_from + cfg.max_s:
            job = self._close(camera, "max_s", clip.t_from + cfg.max_s)
            if job is not None:
                self._enqueue_nowait(job)
            clip = None
        if clip is None:
            offset = camera.offset()  # one offset a clip: its triggers on one timeline
            t = result.t_capture + (offset or 0.0)
            clip = _OpenClip(t_from=t - cfg.pre_s, t_end=t, seq=result.seq, offset_s=offset)
            camera.open = clip
            camera.ring.hold(clip.t_from - _JITTER_S)
        t = clip.at(result.t_capture)
        clip.t_end = min(max(clip.t_end, t + cfg.post_s), clip.t_from + cfg.max_s)
        clip.seq = result.seq
        for hit in hits:
            clip.triggers_total += 1
            tid = hit.get("tracker_id")
            key = (str(hit.get("event")) + str(hit.get("label")), -1 if tid is None else tid)
            if hit["event"] == "detection" and key in clip.seen:
                continue
            clip.seen.add(key)
            if len(clip.triggers) < _MAX_TRIGGERS:
                clip.triggers.append(hit)
                clip.trigger_times.append(t)
            if hit["label"] not in clip.classes:
                clip.classes.append(hit["label"])
            if tid is not None and tid not in clip.tracker_ids:
                clip.tracker_ids.append(tid)

    def _update_crops(self, camera: _Camera, clip: _OpenClip, result: FrameResult) -> None:
        det = result.detections
        if result.image is None:
            return
        better = better_tracks(det, clip.crops)
        if not better:
            return
        frame = host_image(result.image)  # a GPU picture is downloaded only for a better crop
        h, w = frame.shape[:2]
        for i, tid in better:
            box = padded_box(det.xyxy[i].tolist(), camera.cfg.crop.padding, w, h)
            if box is None:
                continue
            left, top, right, bottom = box
            label = result.labels.name(int(det.class_id[i]))
            crop = frame[top:bottom, left:right].copy()
            clip.crops[tid] = Crop(tid, label, float(det.score[i]), crop)

    def _update_shots(self, clip: _OpenClip, result: FrameResult) -> None:
        """As ``_update_crops``, keeping each track's best box and time, not its picture."""
        det = result.detections
        for i, tid in better_tracks(det, clip.shots):
            x1, y1, x2, y2 = det.xyxy[i].tolist()
            label = result.labels.name(int(det.class_id[i]))
            box = (x1, y1, x2, y2)
            shot = Shot(tid, label, float(det.score[i]), box, result.width, result.height,
                        clip.at(result.t_capture))  # fmt: skip
            clip.shots[tid] = shot

    # ------------------------------------------------------------------ closing clips

    def _close(self, camera: _Camera, closed_by: str, t_to: float) -> ClipJob | None:
        """The job of ``camera``'s open clip up to ``t_to`` (under ``_lock``); the clip ends."""
        clip = camera.open
        if clip is None:
            return None
        camera.open = None
        segment = camera.ring.segment(clip.t_from - _JITTER_S, t_to + _JITTER_S)
        camera.ring.hold(None)
        return self._job(camera, clip, segment, closed_by)

    def _job(
        self, camera: _Camera, clip: _OpenClip, segment: Segment | None, closed_by: str
    ) -> ClipJob | None:
        if (
            camera.inputs is not None
            and segment is not None
            and segment.t_end < clip.t_from - _JITTER_S
        ):
            # the record input was down all along: its ring holds only what came before
            segment = None
        if segment is None or not segment.packets:
            self._metrics.clips_failed.labels(camera=camera.name, reason="no_keyframe").inc()
            return None
        wall_offset = time.time() - self._clock()

        def best_first(c: Crop | Shot) -> tuple[bool, float]:
            return c.tracker_id not in clip.tracker_ids, -c.score

        most = camera.cfg.crop.max_per_clip
        crops = sorted(clip.crops.values(), key=best_first)[:most]
        shots = sorted(clip.shots.values(), key=best_first)[:most]
        return ClipJob(
            camera=camera.name,
            camera_dir=camera.dir,
            clip_id=camera.new_id(segment.t_start + wall_offset),
            segment=segment,
            wall_offset=wall_offset,
            triggers=clip.triggers,
            trigger_times=clip.trigger_times,
            triggers_total=clip.triggers_total,
            classes=clip.classes,
            tracker_ids=clip.tracker_ids,
            seq=clip.seq,
            closed_by=closed_by,
            crops=crops,
            shots=shots,
            padding=camera.cfg.crop.padding,
            jpeg_quality=camera.cfg.crop.jpeg_quality,
            source=camera.source(clip),
        )

    def _stream_ended(self, name: str, segment: Segment) -> None:
        """A camera reconnected while a clip was open (its reader thread): write what it had."""
        with self._lock:
            camera = self._cameras.get(name)
            clip = camera.open if camera is not None else None
            if camera is None or clip is None:
                return
            camera.open = None
            job = self._job(camera, clip, segment, "stream_end")
        if job is not None:
            self._enqueue_nowait(job)

    def _due(self, now: float) -> list[ClipJob]:
        jobs = []
        with self._lock:
            for camera in self._cameras.values():
                clip = camera.open
                if clip is not None and now >= clip.t_end + _JITTER_S:
                    capped = clip.t_end >= clip.t_from + camera.cfg.max_s
                    job = self._close(camera, "max_s" if capped else "post_s", clip.t_end)
                    if job is not None:
                        jobs.append(job)
                self._metrics.clip_ring_bytes.labels(camera=camera.name).set(camera.ring.nbytes)
        return jobs

    def _enqueue_nowait(self, job: ClipJob) -> None:
        job.t_queued = time.monotonic()
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            self._metrics.clips_dropped.labels(camera=job.camera, reason="queue_full").inc()
            log.warning(
                "camera %s: clip %s dropped: the clip writer is behind", job.camera, job.clip_id
            )

    _enqueue = _enqueue_nowait

    # ------------------------------------------------------------------ writer thread

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="clip-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for job in self._due(self._clock()):
                self._write(job)
            try:
                job = self._jobs.get(timeout=_TICK_S)
            except queue.Empty:
                continue
            self._write(job)

    def _write(self, job: ClipJob) -> None:
        t0 = time.monotonic()
        try:
            event = write_clip(job)
        except ClipWriteError as exc:
            self._failed(job, exc)
            return
        self._metrics.clip_write_seconds.observe(time.monotonic() - t0)
        self._metrics.clips_written.labels(camera=job.camera).inc()
        log.info(
            "camera %s: clip %s written (%.1f s, %d bytes, %s)",
            job.camera,
            job.clip_id,
            event.end - event.start,
            event.size,
            job.closed_by,
        )
        with self._lock:
            camera = self._cameras.get(job.camera)
            if camera is not None:
                camera.announce.append(event)
        if camera is not None:
            self._retention(camera)
        else:  # a removed camera: no result of it will come
            self._send_late(job.camera, [event])

    def _send_late(self, camera: str, events: list[ClipEvent]) -> None:
        if self._late is not None:
            self._late(events_result(camera, events))

    def _failed(self, job: ClipJob, exc: ClipWriteError) -> None:
        self._metrics.clips_failed.labels(camera=job.camera, reason=exc.reason).inc()
        camera = self._cameras.get(job.camera)
        now = time.monotonic()
        if camera is None or now - camera.last_error_log >= _ERROR_LOG_INTERVAL_S:
            if camera is not None:
                camera.last_error_log = now
            log.error(
                "camera %s: clip %s not written (%s); the camera keeps running "
                "(one line per %.0f s)",
                job.camera,
                job.clip_id,
                exc,
                _ERROR_LOG_INTERVAL_S,
            )

    def _retention(self, camera: _Camera) -> None:
        cfg = camera.cfg
        try:
            deleted, left = enforce(camera.dir, cfg.max_total_gb * 1e9, cfg.max_age_days * 86400.0)
        except OSError as exc:
            log.warning("camera %s: clip retention failed: %s", camera.name, exc)
            return
        for cid, reason in deleted:
            self._metrics.clips_deleted.labels(camera=camera.name, reason=reason).inc()
            log.info("camera %s: clip %s deleted (%s)", camera.name, cid, reason)
        self._metrics.clips_disk_bytes.labels(camera=camera.name).set(left)

    # ------------------------------------------------------------------ shutdown

    def close(self, timeout_s: float) -> None:
        """Write every open clip with what its ring holds, stop the writer thread, then send
        the clip events still waiting for a result (``send_late_events``)."""
        now = self._clock()
        with self._lock:
            jobs = [self._close(c, "shutdown", now) for c in self._cameras.values()]
        for job in jobs:
            if job is not None:
                self._enqueue_nowait(job)
        deadline = time.monotonic() + timeout_s
        while not self._jobs.empty() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(max(0.1, deadline - time.monotonic()))
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            self._metrics.clips_dropped.labels(camera=job.camera, reason="shutdown").inc()
        with self._lock:
            late = [(c.name, c.announce) for c in self._cameras.values() if c.announce]
            for camera in self._cameras.values():
                camera.announce = []
        for name, events in late:
            self._send_late(name, events)
