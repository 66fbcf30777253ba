"""The motion gate: skip inference on frames in which nothing moved.

A camera that watches an empty scene spends almost all of its inference on frames identical to
the last one the detector saw. The gate compares each due frame (after ``detect_fps``) with
that last inferred frame, on a small blurred grey copy, and lets it through only if enough of
it changed. It runs on the capture reader thread, at about 0.14 ms per frame at 768x432 and
0.46 ms at 1080p from a BGR frame (``scripts/motion_cost.py``; resizing with ``INTER_AREA``
instead would add about 1 ms).

Where the decoder left a YUV picture (``Picture.luma``), the grey copy is made from its luma
plane instead, before any BGR conversion: a frame the gate skips is never converted. The luma
is what the BGR-to-grey conversion computes back (BT.601 weights), once stretched from video
range (16-235) to 0-255 as the BGR conversion does, so ``threshold`` means the same grey
levels either way (``tests/component/test_lazy_frames.py`` compares the two on the walkway
clip).

Two things keep the detector's view of the scene right while frames are skipped:

* the reference is the last *inferred* frame, so slow changes add up until they pass the gate;
* a frame is inferred at least every ``max_skip_s`` (media time for files), so that objects
  standing still stay known and keep their tracks.

Cameras that start together and watch still scenes would force their frames at the same
moments, every ``max_skip_s``: a burst of one inference per camera that the box must absorb at
once, while between the bursts it idles. So each camera has its own phase (from its name):
its first forced frame comes that fraction of ``max_skip_s`` early, and the later ones keep
the spacing.

Skipped frames are gaps in ``Frame.seq``, which the tracker bridges like decimated frames; the
admitted frame carries how many were skipped (``Frame.still_frames``), so that a track that had
already gone missing ends after as many due frames as without the gate.
"""

from __future__ import annotations

import zlib
from collections import deque

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.capture.source import Luma, Picture
from vidpipe.config import CameraConfig, MotionConfig
from vidpipe.metrics import CameraMetrics

__all__ = [
    "SMALL_WIDTH",
    "MotionGate",
    "camera_phase",
    "changed_fraction",
    "grey_copy",
    "grey_copy_of_luma",
    "picture_grey_copy",
]

#: Width of the grey copy that is compared, in pixels (the height keeps the aspect).
SMALL_WIDTH = 160
_BLUR = (5, 5)  # smooths compression noise and the aliasing of the cheap resize
_RATIO_WINDOW = 100  # due frames over which the motion ratio is reported
# video range (16-235) to full range (0-255), as swscale stretches it for BGR output
_VIDEO_TO_FULL = np.clip(np.round((np.arange(256) - 16) * 255.0 / 219.0), 0, 255).astype(np.uint8)


class MotionGate:
    """Decides, frame by frame, whether a due frame goes to inference (one thread only).

    Args:
        cfg: the camera's motion settings.
        metrics: the camera's metrics: ``no_motion`` drops and the motion ratio gauge.
        phase: 0 <= phase < 1; after a reset the first frame forced by ``max_skip_s`` comes
            ``phase x max_skip_s`` early (``camera_phase``), so cameras are not in step.
    """

    def __init__(
        self, cfg: MotionConfig, metrics: CameraMetrics | None = None, phase: float = 0.0
    ) -> None:
        if not 0.0 <= phase < 1.0:
            raise ValueError(f"motion gate phase must be in [0, 1), got {phase}")
        self.cfg = cfg
        self.phase = phase
        self._metrics = metrics
        self._recent: deque[bool] = deque(maxlen=_RATIO_WINDOW)
        self._moving_recent = 0
        self.reset()

    @classmethod
    def for_camera(
        cls, camera: CameraConfig, default: MotionConfig, metrics: CameraMetrics | None = None
    ) -> MotionGate | None:
        """The camera's gate (its own ``motion``, else ``default``); None if it is off."""
        cfg = camera.motion or default
        return cls(cfg, metrics, camera_phase(camera.name)) if cfg.enabled else None

    def reset(self) -> None:
        """Forget the reference: the next frame is inferred (a new stream)."""
        self._reference: npt.NDArray[np.uint8] | None = None
        self._last_inferred_s = 0.0
        self._skipped = 0

    @property
    def motion_ratio(self) -> float:
        """Fraction of the last due frames (up to 100) that had motion."""
        return self._moving_recent / len(self._recent) if self._recent else 0.0

    def admit(self, image: npt.NDArray[np.uint8] | Picture, t_s: float) -> int | None:
        """Whether a due frame must be inferred.

        Args:
            image: ``(H, W, 3)`` uint8 BGR frame, or a decoded ``Picture`` (its luma plane is
                used when it has one: no conversion).
            t_s: the frame's time in seconds (media time for files, else monotonic).

        Returns:
            None if the frame can be skipped (nothing moved; counted as ``no_motion``), else
            the number of frames skipped since the last inferred one.
        """
        small = grey_copy(image) if isinstance(image, np.ndarray) else picture_grey_copy(image)
        reference = self._reference
        moving = reference is None or (
            changed_fraction(small, reference, self.cfg.threshold) >= self.cfg.min_area
        )
        self._record(moving)
        if not moving and t_s - self._last_inferred_s < self.cfg.max_skip_s:
            self._skipped += 1
            if self._metrics is not None:
                self._metrics.drop("no_motion")
            return None
        skipped, self._skipped = self._skipped, 0
        # the first frame of a stream: the next forced one comes early by this camera's phase
        early = self.phase * self.cfg.max_skip_s if reference is None else 0.0
        self._reference = small
        self._last_inferred_s = t_s - early
        return skipped

    def _record(self, moving: bool) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._moving_recent -= self._recent[0]
        self._recent.append(moving)
        self._moving_recent += moving
        if self._metrics is not None:
            self._metrics.motion_ratio.set(self.motion_ratio)


def camera_phase(name: str) -> float:
    """A fraction in [0, 1) that is the same for a camera name on every run, and spread
    evenly over many names (CRC-32)."""
    return zlib.crc32(name.encode()) / 2**32


def grey_copy(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A blurred grey ``(h, 160)`` copy of a ``(H, W, 3)`` BGR frame, keeping the aspect."""
    height, width = image.shape[:2]
    small_h = max(1, round(height * SMALL_WIDTH / width))
    # INTER_LINEAR reads a few source pixels per output pixel: 25x cheaper than INTER_AREA at
    # these ratios; the blur takes out its aliasing.
    small = cv2.resize(image, (SMALL_WIDTH, small_h), interpolation=cv2.INTER_LINEAR)
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
    return np.asarray(cv2.GaussianBlur(grey, _BLUR, 0), dtype=np.uint8)


def grey_copy_of_luma(luma: Luma) -> npt.NDArray[np.uint8]:
    """What ``grey_copy`` gives for the BGR conversion of this luma plane's picture, from the
    plane itself (rows may be padded: OpenCV reads the view's row stride)."""
    height, width = luma.pixels.shape
    small_h = max(1, round(height * SMALL_WIDTH / width))
    small = cv2.resize(luma.pixels, (SMALL_WIDTH, small_h), interpolation=cv2.INTER_LINEAR)
    if not luma.full_range:
        small = cv2.LUT(small, _VIDEO_TO_FULL)
    return np.asarray(cv2.GaussianBlur(small, _BLUR, 0), dtype=np.uint8)


def picture_grey_copy(picture: Picture) -> npt.NDArray[np.uint8]:
    """The gate's grey copy of a decoded picture: from its luma plane if it has one, else
    from its BGR image (converting it)."""
    luma = picture.luma()
    if luma is not None:
        return grey_copy_of_luma(luma)
    image = picture.image()
    if not isinstance(image, np.ndarray):
        raise TypeError("the motion gate needs host pictures (config keeps it off nvdec)")
    return grey_copy(image)


def changed_fraction(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8], threshold: int) -> float:
    """Fraction of pixels whose grey level differs by more than ``threshold`` (0-255)."""
    if a.shape != b.shape:
        return 1.0  # the stream changed size: everything changed
    diff = cv2.absdiff(a, b)
    _, mask = cv2.threshold(diff, threshold, 255, cv2.THRESH_BINARY)
    return float(cv2.countNonZero(mask)) / mask.size
