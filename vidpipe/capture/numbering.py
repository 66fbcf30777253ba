"""A camera's frame numbers and input rate: every frame it captures gets the next number,
whether it was decoded or left undecoded (``Session.take_skipped``), so that the numbers of
the frames handed on keep their place in the stream."""

from __future__ import annotations

import threading
from collections import deque

from vidpipe.metrics import CameraMetrics

_FPS_WINDOW_S = 2.0


class FrameNumbers:
    """Numbers the frames of one camera and counts them as captured.

    A worker's reader threads (a session's, and a stale one's until it sees it is stale) may
    number frames at once: the lock keeps the numbers unique.
    """

    def __init__(self, metrics: CameraMetrics) -> None:
        self._metrics = metrics
        self._next = 0
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=256)

    @property
    def count(self) -> int:
        """Frames numbered so far."""
        return self._next

    def made(self, now: float) -> int:
        """A decoded frame: its number."""
        with self._lock:
            seq = self._next
            self._next = seq + 1
        self._times.append(now)
        self._metrics.captured.inc()
        return seq

    def undecoded(self, undecoded: tuple[int, ...], now: float) -> None:
        """Frames a source left undecoded, by reason (``session.Undecoded``): numbered and
        counted as captured and dropped. Before each frame made, and after the last one of
        a pass or a session (a group of pictures shed at its end)."""
        left = sum(undecoded)
        if not left:  # most frames: no list built, no counter call
            return
        with self._lock:
            self._next += left
        self._times.extend([now] * left)
        self._metrics.captured.inc(left)
        self._metrics.undecoded(*undecoded)

    def fps(self, now: float) -> float:
        """Frames captured a second over the last two seconds (0 with fewer than two)."""
        recent = [t for t in list(self._times) if now - t <= _FPS_WINDOW_S]
        span = recent[-1] - recent[0] if len(recent) >= 2 else 0.0
        return (len(recent) - 1) / span if span > 0 else 0.0
