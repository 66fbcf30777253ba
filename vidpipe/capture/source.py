"""Opening a camera with OpenCV's FFmpeg backend.

Everything that touches ``cv2.VideoCapture`` construction lives here: the FFmpeg environment,
the open parameters (timeouts, decoder threads) and ``file://`` URLs. Reading frames is the
worker's job.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

import cv2

from vidpipe.config import CameraConfig, CaptureConfig

log = logging.getLogger(__name__)

FFMPEG_OPTIONS_ENV = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
"""OpenCV reads FFmpeg demuxer options from this variable at every open."""

FFMPEG_LOGLEVEL_ENV = "OPENCV_FFMPEG_LOGLEVEL"
"""FFmpeg's log level (an AV_LOG_* number), read by OpenCV when its FFmpeg backend starts."""

_MAX_PLAUSIBLE_FPS = 1000.0  # above this a reported rate is a time base, not a frame rate
_env_lock = threading.Lock()


def configure_ffmpeg_env(analyze_duration_ms: int = 500) -> None:
    """Make OpenCV's FFmpeg backend use RTSP over TCP and probe streams briefly. Idempotent.

    Setting ``OPENCV_FFMPEG_CAPTURE_OPTIONS`` at all drops OpenCV's implicit prefer-TCP flag
    (measured with OpenCV 5.0.0), so the variable must always carry ``rtsp_transport``.
    Options already set are kept; ``rtsp_transport;tcp`` and ``analyzeduration`` are added
    only when missing.

    Why ``analyzeduration``: OpenCV opens captures one at a time (a process-wide lock around
    FFmpeg's open), and FFmpeg's default probing took 2.8 s per RTSP camera here, so eight
    cameras needed 22 s to come up and every reconnect waited behind the others. 0.5 s gave
    0.5 s per open with the same stream parameters. Call it before any capture opens.
    """
    with _env_lock:
        # OpenCV's own WARN lines repeat FFmpeg's reason once more per failed open; errors stay.
        # Never raise it to INFO: at INFO OpenCV prints full URLs, credentials included.
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
        # FFmpeg's own log goes straight to stderr, unattributed to a camera: one line per
        # failed open, and a flood of "error while decoding MB" for a corrupt stream. The
        # worker logs one line per failure with the probed reason instead. OpenCV reads this
        # once, when its FFmpeg backend first initialises. 8 = AV_LOG_FATAL.
        os.environ.setdefault(FFMPEG_LOGLEVEL_ENV, "8")
        current = os.environ.get(FFMPEG_OPTIONS_ENV, "")
        options = [opt for opt in current.split("|") if opt]
        names = {opt.split(";", 1)[0] for opt in options}
        if "rtsp_transport" not in names:
            options.insert(0, "rtsp_transport;tcp")
        if "analyzeduration" not in names and analyze_duration_ms > 0:
            options.append(f"analyzeduration;{analyze_duration_ms * 1000}")
        value = "|".join(options)
        if value != current:
            os.environ[FFMPEG_OPTIONS_ENV] = value
            log.debug("%s=%s", FFMPEG_OPTIONS_ENV, value)


def source_for(url: str) -> str:
    """What to hand to ``cv2.VideoCapture``: ``file://`` URLs become plain paths.

    Examples:
        ``file:///data/a%20b.mp4`` -> ``/data/a b.mp4``; ``rtsp://...`` and plain paths are
        returned unchanged.
    """
    if not url.lower().startswith("file://"):
        return url
    parsed = urllib.parse.urlparse(url)
    host = "" if parsed.netloc in ("", "localhost") else parsed.netloc
    return urllib.parse.unquote(host + parsed.path)


def open_params(defaults: CaptureConfig) -> list[int]:
    """``cv2.VideoCapture`` open parameters: timeouts and (if > 0) FFmpeg decoder threads.

    ``CAP_PROP_N_THREADS`` is honoured as an open parameter by OpenCV 5.0 (``get`` reports
    it back); 0 leaves OpenCV's default.
    """
    params = [
        cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
        defaults.open_timeout_ms,
        cv2.CAP_PROP_READ_TIMEOUT_MSEC,
        defaults.read_timeout_ms,
    ]
    if defaults.decoder_threads > 0:
        params += [cv2.CAP_PROP_N_THREADS, defaults.decoder_threads]
    return params


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What an opened capture reports about its video.

    Attributes:
        width: frame width in pixels (0: no decodable video).
        height: frame height in pixels.
        fps: nominal frame rate, or None if unknown or implausible.
    """

    width: int
    height: int
    fps: float | None


def open_capture(camera: CameraConfig, defaults: CaptureConfig) -> Any:
    """Open ``camera`` with the FFmpeg backend. May block up to about the open timeout.

    Returns:
        The ``cv2.VideoCapture``; check ``isOpened()``.
    """
    return cv2.VideoCapture(source_for(camera.url), cv2.CAP_FFMPEG, open_params(defaults))


def describe(cap: Any) -> SourceInfo:
    """Width, height and nominal fps of an opened capture."""
    fps = float(cap.get(cv2.CAP_PROP_FPS))
    plausible = math.isfinite(fps) and 0 < fps <= _MAX_PLAUSIBLE_FPS
    return SourceInfo(
        width=int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
        height=int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        fps=fps if plausible else None,
    )


class Pacer:
    """Plays a file at its own frame rate, as a live camera would deliver it.

    Frame ``k`` of a pass is due ``k / fps`` seconds after the pass started. A reader that fell
    more than ``max_lag_s`` behind (a slow disk, a suspended process) starts a new schedule
    instead of bursting to catch up.
    """

    def __init__(self, max_lag_s: float = 1.0) -> None:
        self._max_lag_s = max_lag_s
        self._t0: float | None = None
        self._k = 0

    def reset(self) -> None:
        self._t0 = None

    def delay_s(self, now_s: float, fps: float | None) -> float:
        """How long to wait before reading the next frame (0 when it is already due)."""
        if not fps or fps <= 0:
            return 0.0
        if self._t0 is None or now_s - (self._t0 + self._k / fps) > self._max_lag_s:
            self._t0, self._k = now_s, 0
        due = self._t0 + self._k / fps
        self._k += 1
        return max(0.0, due - now_s)


class Decimator:
    """Picks the frames that go to detection when ``detect_fps`` is set.

    Frames are kept on a fixed grid of ``1 / max_fps`` seconds, so a 12.5 fps source with
    ``max_fps`` 5 keeps exactly 2 of every 5 frames. Time is media time (frame index / nominal
    fps) when the caller knows the fps, so an unpaced file decimates like the live camera it
    stands for; otherwise wall-clock time.

    Args:
        max_fps: at most this many frames per second pass; None passes every frame.
    """

    _EPS_S = 1e-6  # float slack: 0.4 must count as reached when the grid says 0.4

    def __init__(self, max_fps: float | None) -> None:
        self._period_s = 1.0 / max_fps if max_fps else 0.0
        self._next_s: float | None = None

    def reset(self) -> None:
        """Start a new schedule (a new connection may use a different time base)."""
        self._next_s = None

    def due(self, t_s: float) -> bool:
        """Whether the frame at time ``t_s`` passes."""
        if self._period_s <= 0:
            return True
        nxt = self._next_s
        if nxt is None or t_s < nxt - self._period_s - self._EPS_S:
            self._next_s = t_s + self._period_s  # first frame, or time went backwards
            return True
        if t_s < nxt - self._EPS_S:
            return False
        # Stay on the grid (no drift to a lower rate); re-anchor only after a gap.
        self._next_s = nxt + self._period_s if t_s < nxt + self._period_s else t_s + self._period_s
        return True
