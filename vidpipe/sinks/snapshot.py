"""Snapshot sink: annotated JPEGs of frames with detections, rate-limited per camera.

Layout: ``<dir>/<safe camera>/<safe camera>-<seq>.jpg`` plus ``<dir>/<safe camera>/latest.jpg``,
each written atomically (``vidpipe.fileio.write_atomic``), so a reader never sees half a JPEG.
Only the newest ``keep_last`` numbered files of a camera are kept.
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from vidpipe.fileio import write_atomic
from vidpipe.labels import Labels
from vidpipe.sinks.paths import safe_join, safe_name
from vidpipe.types import ClipEvent, Detections, FrameResult, host_image

#: ``draw(image, detections, labels) -> annotated image`` (postprocess.draw.draw_detections).
DrawFn = Callable[[np.ndarray, Detections, Labels], np.ndarray]

LATEST_NAME = "latest.jpg"


@dataclass
class _CameraFiles:
    """Where one camera's snapshots go and which numbered files exist, oldest first."""

    safe: str
    directory: Path
    files: deque[Path] = field(default_factory=deque)


class SnapshotSink:
    """Writes annotated JPEGs of frames with at least one detection.

    The rate limit uses the frames' capture times: a camera's next snapshot is written for the
    first frame captured ``min_interval_s`` or more after the last written one. Drawing and
    encoding happen only for frames that are written.

    Args:
        name: the sink's unique name.
        directory: the output directory; one subdirectory per camera is created in it.
        draw: ``draw(image, detections, labels)`` returning the annotated image; it is given a
            private copy of the frame.
        min_interval_s: per-camera minimum time between snapshots.
        jpeg_quality: 1-100.
        keep_last: numbered files kept per camera (``latest.jpg`` not counted).
        queue_size: capacity of the sink's queue in the pool.
        crop: also copy each clip event's best-shot crop, as ``<camera>-clip-<id>.jpg``.
    """

    wants_images = True

    def __init__(
        self,
        name: str,
        directory: Path,
        *,
        draw: DrawFn,
        min_interval_s: float = 5.0,
        jpeg_quality: int = 85,
        keep_last: int = 100,
        queue_size: int = 8,
        crop: bool = False,
    ) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        self.name = name
        self.queue_size = queue_size
        self._directory = Path(directory)
        self._draw = draw
        self._min_interval_s = min_interval_s
        self._encode_params = [int(cv2.IMWRITE_JPEG_QUALITY), int(jpeg_quality)]
        self._keep_last = keep_last
        self._cameras: dict[str, _CameraFiles] = {}
        self._last_t: dict[str, float] = {}
        self._crop = crop

    def handle(self, result: FrameResult) -> None:
        """Write a snapshot of ``result`` if it has detections and its camera is due.

        Raises:
            ValueError: the result carries no image.
            OSError: the files cannot be written.
            RuntimeError: JPEG encoding failed.
        """
        if self._crop:
            self._write_crops(result)
        if len(result.detections) == 0:
            return
        last = self._last_t.get(result.camera)
        if last is not None and result.t_capture - last < self._min_interval_s:
            return
        if result.image is None:
            raise ValueError(
                f"result {result.camera}#{result.seq} has no image: the daemon must attach "
                "images when SinkPool.wants_images is true"
            )
        cam = self._camera(result.camera)
        data = self._encode(host_image(result.image), result)
        cam.directory.mkdir(parents=True, exist_ok=True)
        path = cam.directory / f"{cam.safe}-{result.seq}.jpg"
        write_atomic(path, data)
        write_atomic(cam.directory / LATEST_NAME, data)
        self._last_t[result.camera] = result.t_capture
        self._prune(cam, path)

    def _write_crops(self, result: FrameResult) -> None:
        for event in result.events:
            if isinstance(event, ClipEvent) and event.crop_file is not None:
                cam = self._camera(result.camera)
                cam.directory.mkdir(parents=True, exist_ok=True)
                data = Path(event.crop_file).read_bytes()
                path = cam.directory / f"{cam.safe}-clip-{event.clip_id}.jpg"
                write_atomic(path, data)
                self._prune(cam, path)  # keep_last counts crops too

    def close(self) -> None:
        """Nothing is buffered; present for the Sink protocol. Idempotent."""

    def _encode(self, image: np.ndarray, result: FrameResult) -> bytes:
        drawn = self._draw(image.copy(), result.detections, result.labels)
        ok, buf = cv2.imencode(".jpg", drawn, self._encode_params)
        if not ok:
            raise RuntimeError(f"JPEG encoding failed for {result.camera}#{result.seq}")
        return bytes(buf.tobytes())

    def _camera(self, camera: str) -> _CameraFiles:
        """The camera's files, found on disk the first time (so a restart keeps pruning)."""
        cam = self._cameras.get(camera)
        if cam is None:
            safe = safe_name(camera)
            cam = _CameraFiles(safe, safe_join(self._directory, safe))
            pattern = re.compile(re.escape(safe) + r"-(?:\d+|clip-[\d-]+)\.jpg")
            with contextlib.suppress(FileNotFoundError):
                found = [p for p in cam.directory.iterdir() if pattern.fullmatch(p.name)]
                cam.files.extend(sorted(found, key=_mtime))
            self._cameras[camera] = cam
        return cam

    def _prune(self, cam: _CameraFiles, written: Path) -> None:
        with contextlib.suppress(ValueError):
            cam.files.remove(written)  # the same seq again (e.g. after a restart)
        cam.files.append(written)
        while len(cam.files) > self._keep_last:
            cam.files.popleft().unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
