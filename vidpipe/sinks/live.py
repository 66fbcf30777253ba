"""Live-view sink: the latest result (and frame) of every camera, drawn and encoded on demand.

``handle`` only keeps a reference to the newest result of its camera and updates small
rolling figures (output fps, latency percentile, last detections): no drawing, no JPEG. The
annotated JPEG is made by ``jpeg()`` when a viewer asks for it, at most once per frame however
many viewers there are (the bytes are cached until a newer frame arrives). With nobody
watching, the live view therefore costs one pointer swap per frame.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from vidpipe.metrics import Metrics
from vidpipe.quantiles import quantile_of
from vidpipe.sinks.record import detection_dicts
from vidpipe.sinks.snapshot import DrawFn
from vidpipe.types import FrameResult, host_image

#: Output fps and latency percentiles are computed over this many recent seconds.
WINDOW_S = 5.0


@dataclass(frozen=True, slots=True)
class LiveJpeg:
    """One encoded frame: the result's sequence number and the JPEG bytes."""

    seq: int
    version: int
    data: bytes


class _CameraLive:
    """The latest state of one camera; guarded by its own lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.encode_lock = threading.Lock()  # one encoder per camera; viewers share its output
        self.latest: FrameResult | None = None
        self.version = 0
        self.jpeg: LiveJpeg | None = None
        self.done: deque[tuple[float, float]] = deque(maxlen=1024)  # (t_done, latency_s)
        self.last_with_detections: FrameResult | None = None  # turned into dicts on demand


class LiveView:
    """Latest results per camera, with lazily drawn and encoded annotated JPEGs.

    Also a ``Sink`` (``name``, ``wants_images``, ``queue_size``, ``handle``, ``close``): the
    daemon adds it to the ``SinkPool``.

    Args:
        draw: ``draw(image, detections, labels)`` returning an annotated copy.
        metrics: where JPEG encodes are counted (``vidpipe_live_jpeg_encoded_total``).
        jpeg_quality: 1-100.
        overlay: ``overlay(camera, image)`` drawing more onto the annotated copy (the daemon
            passes a camera's zones and lines, ``CameraScene.draw``), or None.
        name: the sink name (metric label).
        queue_size: the ``Sink`` protocol's; unused, the live view is ``inline``.
    """

    wants_images = True
    inline = True  # ``handle`` is a reference swap: run on the submitting thread (``SinkPool``)

    def __init__(
        self,
        draw: DrawFn,
        metrics: Metrics,
        *,
        jpeg_quality: int = 75,
        overlay: Callable[[str, np.ndarray], np.ndarray] | None = None,
        name: str = "live",
        queue_size: int = 4,
    ) -> None:
        self.name = name
        self.queue_size = queue_size
        self._draw = draw
        self._overlay = overlay
        self._metrics = metrics
        self._encode_params = [int(cv2.IMWRITE_JPEG_QUALITY), int(jpeg_quality)]
        self._cameras: dict[str, _CameraLive] = {}
        self._lock = threading.Lock()

    # -- Sink --------------------------------------------------------------------------------

    def handle(self, result: FrameResult) -> None:
        """Keep ``result`` as its camera's latest; update the rolling figures. No encoding."""
        if result.events_only:  # no frame to show
            return
        cam = self._camera(result.camera)
        # kept without its frame: the latest frame is held anyway, an older one need not be
        bare = dataclasses.replace(result, image=None) if len(result.detections) else None
        with cam.lock:
            cam.latest = result
            cam.version += 1
            cam.done.append((result.t_done, result.t_done - result.t_capture))
            if bare is not None:
                cam.last_with_detections = bare

    def close(self) -> None:
        """Drop the kept frames. Idempotent."""
        with self._lock:
            cameras = list(self._cameras.values())
        for cam in cameras:
            with cam.lock:
                cam.latest = None
                cam.last_with_detections = None
                cam.jpeg = None

    # -- viewers -----------------------------------------------------------------------------

    def version(self, camera: str) -> int:
        """How many results of ``camera`` arrived so far (0: none yet)."""
        cam = self._cameras.get(camera)
        return 0 if cam is None else cam.version

    def jpeg(self, camera: str) -> LiveJpeg | None:
        """The annotated JPEG of ``camera``'s latest frame, or None before its first image.

        Encodes at most once per frame: concurrent and later callers get the cached bytes
        until a newer result arrives. Blocking (drawing and encoding take milliseconds): call it
        from a worker thread, not from an event loop.

        Raises:
            RuntimeError: JPEG encoding failed.
        """
        cam = self._cameras.get(camera)
        if cam is None:
            return None
        with cam.encode_lock:
            with cam.lock:
                latest, version, cached = cam.latest, cam.version, cam.jpeg
            if cached is not None and cached.version == version:
                return cached
            if latest is None or latest.image is None:
                return cached
            data = self._encode(latest)
            encoded = LiveJpeg(latest.seq, version, data)
            with cam.lock:
                cam.jpeg = encoded
            return encoded

    def stats(self, camera: str, now: float | None = None) -> dict[str, Any]:
        """Rolling figures of ``camera``: fps out, p95 latency, last detections, last frame."""
        now = time.monotonic() if now is None else now
        cam = self._cameras.get(camera)
        if cam is None:
            return {
                "fps_out": 0.0,
                "latency_p95_ms": None,
                "last_detections": [],
                "last_detection_time": None,
                "last_result_age_s": None,
                "frame": None,
            }
        with cam.lock:
            recent = [(t, lat) for t, lat in cam.done if now - t <= WINDOW_S]
            latest = cam.latest
            with_detections = cam.last_with_detections
        fps = 0.0
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            fps = (len(recent) - 1) / (recent[-1][0] - recent[0][0])
        p95 = quantile_of((lat for _, lat in recent), 0.95)
        return {
            "fps_out": round(fps, 2),
            "latency_p95_ms": None if p95 is None else round(p95 * 1000.0, 1),
            "last_detections": [] if with_detections is None else detection_dicts(with_detections),
            "last_detection_time": None if with_detections is None else with_detections.wall_time,
            "last_result_age_s": None if latest is None else round(now - latest.t_done, 3),
            "frame": None if latest is None else latest.seq,
        }

    # -- internals ---------------------------------------------------------------------------

    def _camera(self, camera: str) -> _CameraLive:
        cam = self._cameras.get(camera)  # hot path: a plain dict read
        if cam is not None:
            return cam
        with self._lock:
            return self._cameras.setdefault(camera, _CameraLive())

    def _encode(self, result: FrameResult) -> bytes:
        assert result.image is not None
        # draw_detections draws on its own copy: the shared frame stays untouched
        drawn = self._draw(host_image(result.image), result.detections, result.labels)
        if self._overlay is not None:
            drawn = self._overlay(result.camera, drawn)
        ok, buf = cv2.imencode(".jpg", drawn, self._encode_params)
        if not ok:
            raise RuntimeError(f"JPEG encoding failed for {result.camera}#{result.seq}")
        self._metrics.live_jpeg_encoded.labels(camera=result.camera).inc()
        return bytes(buf.tobytes())
