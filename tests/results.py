"""Real ``FrameResult`` objects for sink tests."""

from __future__ import annotations

import time

import numpy as np

from vidpipe.types import Detections, FrameResult

LABELS = ("person", "bicycle", "car", "motorcycle")


def frame_result(
    camera: str,
    seq: int,
    dets: list[tuple[str, float]] = (),  # type: ignore[assignment]
    *,
    t_capture: float | None = None,
) -> FrameResult:
    """A result of ``camera`` with one box per ``(label, score)`` in ``dets``."""
    now = time.monotonic() if t_capture is None else t_capture
    n = len(dets)
    xyxy = np.array([[10 + 20 * i, 10, 50 + 20 * i, 80] for i in range(n)], np.float32)
    det = Detections(
        xyxy.reshape(n, 4),
        np.array([s for _, s in dets], np.float32),
        np.array([LABELS.index(label) for label, _ in dets], np.int32),
    )
    return FrameResult(
        camera=camera,
        seq=seq,
        t_capture=now,
        t_done=now + 0.03,
        wall_time=time.time(),
        width=640,
        height=360,
        detections=det,
        labels=LABELS,
    )
