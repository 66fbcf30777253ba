"""The RTSP test server's ``--stagger``: looped mounts start at different points of the clip.

The density bench relies on it to play cameras that are not in step. Each mount's first
decoded picture is matched against the file's own pictures: camera k must start at the
keyframe at (or just before) ``frac(k x 0.618)`` of the clip, and its timestamps must start
near zero, so that the server sends it at once and in real time.
"""

from __future__ import annotations

import time
from pathlib import Path

import av
import numpy as np

from tests.rtsp import RtspServer

WALK = "one-by-one-person-detection.mp4"  # 10 fps, a keyframe every second
GOLDEN = 0.6180339887498949


def _grey(frame: av.VideoFrame) -> np.ndarray:
    return frame.to_ndarray(format="gray").astype(np.float32)


def _clip_pictures(path: Path) -> tuple[list[np.ndarray], float]:
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        pictures = [_grey(f) for f in c.decode(stream)]
        return pictures, float(stream.average_rate)


def _first_picture(url: str) -> tuple[np.ndarray, float, int]:
    """The first decoded picture of ``url``, its time in the stream and frames in 2 s."""
    with av.open(url, options={"rtsp_transport": "tcp"}, timeout=15) as c:
        first = None
        t0 = 0.0
        count = 0
        for frame in c.decode(video=0):
            if first is None:
                first, t_first = _grey(frame), float(frame.time or 0.0)
                t0 = time.monotonic()
            count += 1
            if time.monotonic() - t0 > 2.0:
                break
        assert first is not None
        return first, t_first, count


def test_staggered_mounts_start_spread_over_the_clip(
    rtsp_ok: None, videos: Path, tmp_path: Path
) -> None:
    for k in range(3):
        (tmp_path / f"cam{k}.mp4").symlink_to(videos / WALK)
    pictures, fps = _clip_pictures(videos / WALK)
    duration_s = len(pictures) / fps
    with RtspServer(tmp_path, loop=True, stagger=True) as server:
        for k in range(3):
            first, t_first, frames_in_2s = _first_picture(server.url(f"cam{k}"))
            index = int(np.argmin([np.abs(first - p).mean() for p in pictures]))
            start_s = ((k * GOLDEN) % 1.0) * duration_s
            # the keyframe at or just before the start point (one every second)
            assert start_s - 1.0 <= index / fps <= start_s + 1e-6, (k, index, start_s)
            assert np.abs(first - pictures[index]).mean() < 1.0  # the very same picture
            assert t_first < 1.0, f"cam{k}: stream time starts at {t_first} s, not near 0"
            # sent in real time from the start, not held back until its clip time comes
            assert frames_in_2s >= 10, f"cam{k}: {frames_in_2s} frames in 2 s at {fps} fps"


def test_unstaggered_mounts_all_start_at_the_first_frame(
    rtsp_ok: None, videos: Path, tmp_path: Path
) -> None:
    for k in range(2):
        (tmp_path / f"cam{k}.mp4").symlink_to(videos / WALK)
    pictures, _ = _clip_pictures(videos / WALK)
    with RtspServer(tmp_path, loop=True) as server:
        for k in range(2):
            first, _, _ = _first_picture(server.url(f"cam{k}"))
            assert np.abs(first - pictures[0]).mean() < 1.0
