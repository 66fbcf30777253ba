"""Every Prometheus metric of vidpipe, defined once.

A ``Metrics`` instance owns its own ``CollectorRegistry`` so that several pipelines (tests, the
benchmark harness) can live in one process. Hot paths use the per-camera children from
``Metrics.camera(name)``, which resolve label values once instead of per frame.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vidpipe.overload import OVERLOAD_SHARE, OVERLOAD_WINDOW_S, SHED_REASONS, LoadWindow
from vidpipe.types import CameraState, Frame

# Latency buckets in seconds: inference on a CPU is 5-100 ms, end to end up to seconds.
_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10)
# frames per batch: the stream set batches up to max_batch (at most 256)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256)

DROP_REASONS = (
    "overwritten",  # capture mailbox replaced a frame preprocessing had not taken yet
    "mailbox_full",  # live camera: left unmade, the frame before it still waited in its mailbox
    "decimated",  # detect_fps: decoded but not sent to inference
    "no_motion",  # motion gate: nothing moved since the last inferred frame
    "too_old",  # older than scheduler.max_frame_age_ms when a slot was free
    "inference_error",  # the request failed
    "shutdown",  # still queued when the shutdown timeout ran out
    "starting",  # live camera: decoded before its detector's inference started
    "gop_shed",  # live camera past what inference takes: left undecoded with its group of pictures
)

__all__ = ["OVERLOAD_SHARE", "OVERLOAD_WINDOW_S", "SHED_REASONS", "LoadWindow", "Metrics"]

CLIP_FAILURES = ("disk_full", "dir_missing", "write_error", "no_keyframe")
CLIP_DROPS = ("queue_full", "shutdown")
EVENT_DROPS = (
    "queue_full",  # the event store's writer was behind (its queue holds events.queue_size)
    "shutdown",  # still queued, or not yet committed, when the store closed
    "rejected",  # SQLite refused the batch for a reason other than the disk (never retried)
)


@dataclass(frozen=True, slots=True)
class CameraMetrics:
    """Metric children bound to one camera's label value."""

    captured: Counter
    inferred: Counter
    reconnects: Counter
    e2e_latency: Histogram
    motion_ratio: Gauge
    lag: Gauge
    dropped: dict[str, Counter]
    metrics: Metrics
    name: str

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason].inc(n)
        if reason in SHED_REASONS:
            self.metrics.load.shed += n

    def undecoded(self, unused: int, unread: int, shed: int) -> None:
        """Frames the source left undecoded: unused by detection (``decimated``), replacing an
        untaken frame (``mailbox_full``), or shed with their group of pictures (``gop_shed``)."""
        if unused:
            self.drop("decimated", unused)
        if unread:
            self.drop("mailbox_full", unread)
        if shed:
            self.drop("gop_shed", shed)

    def infer_done(self) -> None:
        """One frame completed inference (counted for ``vidpipe_overloaded`` too)."""
        self.inferred.inc()
        self.metrics.load.inferred += 1

    def overwritten(self, _frame: Frame) -> None:
        """A capture mailbox's ``on_drop``: its frame was replaced before it was taken."""
        self.drop("overwritten")

    def error(self, reason: str) -> None:
        self.metrics.camera_errors.labels(camera=self.name, reason=reason).inc()

    def set_state(self, state: CameraState) -> None:
        for s in CameraState:
            self.metrics.camera_state.labels(camera=self.name, state=s.value).set(
                1 if s is state else 0
            )
        # looked up here, not bound once: the gauges exist only while the camera runs (a
        # removed camera's in-flight frames must not bring back a stale "down" series)
        self.metrics.camera_up.labels(camera=self.name).set(
            1 if state is CameraState.STREAMING else 0
        )

    def detections(self, class_name: str, n: int) -> None:
        self.metrics.detections.labels(camera=self.name, **{"class": class_name}).inc(n)


@dataclass(frozen=True)
class ModelMetrics:
    """Metric children bound to one model's label value (``vidpipe_*{model=...}``)."""

    inflight: Gauge
    pool_size: Gauge
    errors: Counter
    latency: Histogram
    batch_size: Histogram


class Metrics:
    """The metric registry of one pipeline."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # Registration order is the order of the /metrics exposition: keep these calls in order.
        self._define_frame_metrics(r)
        self._define_capture_metrics(r)
        self._define_latency_metrics(r)
        self._define_decoder_metrics(r)
        self._define_inference_metrics(r)
        self._define_sink_queue_metrics(r)
        self._define_tracking_metrics(r)
        self._define_sink_delivery_metrics(r)
        self._define_live_view_metrics(r)
        self._define_clip_metrics(r)
        self._define_event_metrics(r)
        self._cameras: dict[str, CameraMetrics] = {}
        self._lock = threading.Lock()

    def _define_frame_metrics(self, r: CollectorRegistry) -> None:
        """Per-camera frame counts: decoded, inferred and dropped by reason (``DROP_REASONS``)."""
        self.frames_captured = Counter(
            "vidpipe_frames_captured", "Frames decoded from the camera", ["camera"], registry=r
        )
        self.frames_inferred = Counter(
            "vidpipe_frames_inferred", "Frames that completed inference", ["camera"], registry=r
        )
        self.frames_dropped = Counter(
            "vidpipe_frames_dropped",
            "Frames decoded but not inferred, by reason",
            ["camera", "reason"],
            registry=r,
        )

    def _define_capture_metrics(self, r: CollectorRegistry) -> None:
        """Capture worker health: state, lag, motion gate, reconnects and errors."""
        self.camera_up = Gauge("vidpipe_camera_up", "1 while streaming", ["camera"], registry=r)
        self.camera_state = Gauge(
            "vidpipe_camera_state",
            "1 for the worker's current state",
            ["camera", "state"],
            registry=r,
        )
        self.motion_ratio = Gauge(
            "vidpipe_motion_ratio",
            "Fraction of the last 100 due frames in which the motion gate saw motion "
            "(cameras with the gate on)",
            ["camera"],
            registry=r,
        )
        self.camera_lag = Gauge(
            "vidpipe_camera_lag_seconds",
            "How far a live camera's reader is behind its stream: wall time minus stream time "
            "of the last frame read, above the least seen on this connection",
            ["camera"],
            registry=r,
        )
        self.camera_reconnects = Counter(
            "vidpipe_camera_reconnects", "Reopen attempts after a failure", ["camera"], registry=r
        )
        self.camera_errors = Counter(
            "vidpipe_camera_errors", "Capture errors by reason", ["camera", "reason"], registry=r
        )
        # cameras with inputs: only; the series above stay the detect input's (the camera's)
        self.camera_input_up = Gauge(
            "vidpipe_camera_input_up",
            "1 while the camera's input streams (cameras with inputs:, by role: detect, record)",
            ["camera", "input"],
            registry=r,
        )
        self.camera_input_reconnects = Counter(
            "vidpipe_camera_input_reconnects",
            "Reopen attempts of the camera's input after a failure (cameras with inputs:)",
            ["camera", "input"],
            registry=r,
        )

    def _define_latency_metrics(self, r: CollectorRegistry) -> None:
        """Latency and batch size histograms of the inference path."""
        self.inference_latency = Histogram(
            "vidpipe_inference_latency_seconds",
            "Submit to completion of one inference request",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e_latency = Histogram(
            "vidpipe_end_to_end_latency_seconds",
            "Capture to postprocessed result",
            ["camera"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "vidpipe_batch_size",
            "Frames per batch sent to the inference device (OpenVINO: 1 per request)",
            ["model"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )

    def _define_decoder_metrics(self, r: CollectorRegistry) -> None:
        """Decoders (pyav or NVDEC) and GPU memory."""
        self.camera_decoder = Gauge(
            "vidpipe_camera_decoder",
            "1 for the camera's decoder (pyav: CPU, nvdec: GPU); with vidpipe_frames_captured "
            "it gives the decode rate on the GPU",
            ["camera", "decoder"],
            registry=r,
        )
        self.gpu_decode_errors = Gauge(
            "vidpipe_gpu_decode_errors",
            "Packets the GPU decoder (NVDEC) rejected and skipped, since the process started",
            ["camera"],
            registry=r,
        )
        self.nvdec_sessions = Gauge(
            "vidpipe_nvdec_sessions", "NVDEC decoders open in this process", registry=r
        )
        self.nvdec_decode_processes = Gauge(
            "vidpipe_nvdec_decode_processes",
            "decode processes of this process's nvdec cameras running (capture.nvdec_processes)",
            registry=r,
        )
        self.nvdec_opens = Gauge(
            "vidpipe_nvdec_opens",
            "NVDEC cameras of this process starting (opening: open to first frame) or waiting "
            "for their turn (waiting; capture.nvdec_open_concurrency)",
            ["state"],
            registry=r,
        )
        self.gpu_memory_used = Gauge(
            "vidpipe_gpu_memory_used_bytes",
            "Device memory in use on an inference GPU (all processes)",
            ["gpu"],
            registry=r,
        )

    def _define_inference_metrics(self, r: CollectorRegistry) -> None:
        """The inference backend: request slots, errors, identity and the detections it reports."""
        self.inflight = Gauge(
            "vidpipe_inflight_requests", "Requests in flight", ["model"], registry=r
        )
        self.pool_size = Gauge(
            "vidpipe_pool_size", "Inference request slots", ["model"], registry=r
        )
        self.inference_errors = Counter(
            "vidpipe_inference_errors",
            "Failed inference requests or callbacks",
            ["model"],
            registry=r,
        )
        self.load = LoadWindow()
        self.gop_share = Gauge(
            "vidpipe_gop_share",
            "share of groups of pictures the live cameras decode in full (capture.shed_gops): "
            "below 1 while inference cannot take their frames",
            registry=r,
        )
        self.overloaded = Gauge(
            "vidpipe_overloaded",
            "1 while this process sheds frames because it cannot infer them all: more than "
            f"{OVERLOAD_SHARE:.0%} of the frames reaching inference dropped as overwritten, "
            f"mailbox_full or too_old over the last {OVERLOAD_WINDOW_S:g} s (decimation and "
            "the motion gate do not count)",
            registry=r,
        )
        self.overloaded.set_function(lambda: 1.0 if self.load.overloaded() else 0.0)
        self.inference_info = Gauge(
            "vidpipe_inference_info",
            "Inference backend in use (value 1)",
            ["backend", "device", "precision", "hint", "model"],
            registry=r,
        )
        self.detections = Counter(
            "vidpipe_detections", "Detections reported", ["camera", "class"], registry=r
        )

    def _define_sink_queue_metrics(self, r: CollectorRegistry) -> None:
        """Sink queues: depth, drops, failures and items handled."""
        self.sink_queue_depth = Gauge(
            "vidpipe_sink_queue_depth", "Items waiting in a sink's queue", ["sink"], registry=r
        )
        self.sink_dropped = Counter(
            "vidpipe_sink_dropped",
            "Items a sink dropped, by reason",
            ["sink", "reason"],
            registry=r,
        )
        self.sink_errors = Counter(
            "vidpipe_sink_errors", "Failed sink writes", ["sink"], registry=r
        )
        self.sink_written = Counter(
            "vidpipe_sink_written", "Items a sink handled", ["sink"], registry=r
        )

    def _define_tracking_metrics(self, r: CollectorRegistry) -> None:
        """Tracking, zones and line crossings."""
        self.zone_objects = Gauge(
            "vidpipe_zone_objects",
            "Tracked objects inside a zone now",
            ["camera", "zone", "class"],
            registry=r,
        )
        self.line_crossings = Counter(
            "vidpipe_line_crossings",
            "Tracked objects that crossed a line, by direction (in: right to left of the line)",
            ["camera", "line", "class", "direction"],
            registry=r,
        )
        self.tracking_errors = Counter(
            "vidpipe_tracking_errors",
            "Frames passed on without tracking because the tracking step failed",
            ["camera"],
            registry=r,
        )
        self.tracker_resets = Counter(
            "vidpipe_tracker_resets",
            "Times a camera's tracks were dropped because its stream restarted",
            ["camera"],
            registry=r,
        )

    def _define_sink_delivery_metrics(self, r: CollectorRegistry) -> None:
        """Sink delivery: delay, deliberate skips and the MQTT connection."""
        self.sink_delay = Histogram(
            "vidpipe_sink_delay_seconds",
            "From a result's completion to its sink having handled it",
            ["sink"],
            buckets=(*_LATENCY_BUCKETS, 30, 60),
            registry=r,
        )
        self.sink_skipped = Counter(
            "vidpipe_sink_skipped",
            "Results a sink left out on purpose (filters, cool-down), by reason",
            ["sink", "reason"],
            registry=r,
        )
        self.mqtt_connected = Gauge(
            "vidpipe_mqtt_connected", "1 while the MQTT sink is connected", ["sink"], registry=r
        )

    def _define_live_view_metrics(self, r: CollectorRegistry) -> None:
        """The MJPEG live view."""
        self.live_viewers = Gauge(
            "vidpipe_live_viewers", "Open MJPEG streams of the live view", ["camera"], registry=r
        )
        self.live_jpeg_encoded = Counter(
            "vidpipe_live_jpeg_encoded",
            "Annotated JPEGs encoded for the live view (only while someone watches)",
            ["camera"],
            registry=r,
        )

    def _define_clip_metrics(self, r: CollectorRegistry) -> None:
        """Event clips (``vidpipe.clips``); reasons are listed in ``CLIP_FAILURES`` and
        ``CLIP_DROPS``."""
        self.clips_written = Counter(
            "vidpipe_clips_written", "Event clips written", ["camera"], registry=r
        )
        self.clips_failed = Counter(
            "vidpipe_clips_failed",
            "Event clips not written because writing failed (disk_full, dir_missing, "
            "write_error, no_keyframe)",
            ["camera", "reason"],
            registry=r,
        )
        self.clips_dropped = Counter(
            "vidpipe_clips_dropped",
            "Event clips dropped before writing (queue_full: the writer was behind; shutdown)",
            ["camera", "reason"],
            registry=r,
        )
        self.clips_deleted = Counter(
            "vidpipe_clips_deleted",
            "Event clips deleted by retention (size: max_total_gb, age: max_age_days)",
            ["camera", "reason"],
            registry=r,
        )
        self.clips_disk_bytes = Gauge(
            "vidpipe_clips_disk_bytes",
            "Bytes of a camera's clips and crops on disk",
            ["camera"],
            registry=r,
        )
        self.clip_ring_bytes = Gauge(
            "vidpipe_clip_ring_bytes",
            "Compressed packets held in a camera's clip ring buffer",
            ["camera"],
            registry=r,
        )
        self.clip_ring_overflow = Counter(
            "vidpipe_clip_ring_overflow",
            "Oldest packet groups dropped because a camera's ring buffer reached buffer_mb",
            ["camera"],
            registry=r,
        )
        self.clip_write_seconds = Histogram(
            "vidpipe_clip_write_seconds",
            "Time to remux and write one clip with its crops and sidecar",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )

    def _define_event_metrics(self, r: CollectorRegistry) -> None:
        """The event store (``vidpipe.events``); drop reasons are listed in ``EVENT_DROPS``."""
        self.events_stored = Counter(
            "vidpipe_events_stored",
            "Events committed to the event store (acknowledged: they survive a crash)",
            ["kind"],
            registry=r,
        )
        self.events_dropped = Counter(
            "vidpipe_events_dropped",
            "Events the event store did not keep (queue_full, shutdown, rejected)",
            ["reason"],
            registry=r,
        )
        self.events_write_failures = Counter(
            "vidpipe_events_write_failures",
            "Failed event store transactions (disk full, I/O error); the batch is retried",
            registry=r,
        )
        self.events_queue_depth = Gauge(
            "vidpipe_events_queue_depth", "Events waiting for the event store's writer", registry=r
        )
        self.events_deleted = Counter(
            "vidpipe_events_deleted",
            "Events deleted by retention (events.max_age_days)",
            registry=r,
        )

    def camera(self, name: str) -> CameraMetrics:
        """Bound children for one camera (created once, then cached)."""
        cm = self._cameras.get(name)  # hot path: a plain dict read, no lock
        if cm is not None:
            return cm
        with self._lock:
            cm = self._cameras.get(name)
            if cm is None:
                cm = CameraMetrics(
                    captured=self.frames_captured.labels(camera=name),
                    inferred=self.frames_inferred.labels(camera=name),
                    reconnects=self.camera_reconnects.labels(camera=name),
                    e2e_latency=self.e2e_latency.labels(camera=name),
                    motion_ratio=self.motion_ratio.labels(camera=name),
                    lag=self.camera_lag.labels(camera=name),
                    dropped={
                        r: self.frames_dropped.labels(camera=name, reason=r) for r in DROP_REASONS
                    },
                    metrics=self,
                    name=name,
                )
                self._cameras[name] = cm
            return cm

    def model(self, name: str) -> ModelMetrics:
        """Children for one model's ``model`` label (its name in ``models:``, or the file
        name of the one ``model:``)."""
        return ModelMetrics(
            inflight=self.inflight.labels(model=name),
            pool_size=self.pool_size.labels(model=name),
            errors=self.inference_errors.labels(model=name),
            latency=self.inference_latency.labels(model=name),
            batch_size=self.batch_size.labels(model=name),
        )

    def forget_model(self, name: str) -> None:
        """Remove a model's gauges (its scheduler was replaced or closed); counters stay."""
        for gauge in (self.inflight, self.pool_size):
            with contextlib.suppress(KeyError):
                gauge.remove(name)
        for labels in list(self.inference_info._metrics):
            if labels[-1] == name:
                self.inference_info.remove(*labels)

    def forget_inputs(self, name: str) -> None:
        """Remove a removed camera's ``vidpipe_camera_input_up`` series; counters stay."""
        for role in ("detect", "record"):
            with contextlib.suppress(KeyError):  # never set, or already removed
                self.camera_input_up.remove(name, role)

    def forget_camera(self, name: str) -> None:
        """Remove a removed camera's gauges (no stale "down" series); counters stay."""
        with self._lock:
            self._cameras.pop(name, None)
        for series, labels in [
            (self.camera_up, (name,)),
            (self.gpu_decode_errors, (name,)),
            *((self.camera_decoder, (name, d)) for d in ("pyav", "nvdec")),
            (self.motion_ratio, (name,)),
            (self.camera_lag, (name,)),
            *((self.camera_state, (name, s.value)) for s in CameraState),
        ]:
            with contextlib.suppress(KeyError):  # never set, or already removed
                series.remove(*labels)
