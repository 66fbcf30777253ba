"""Frame pacing for files (``realtime``) and decimation to ``detect_fps``."""

from __future__ import annotations

import math
from collections.abc import Callable


class Pacer:
    """Plays a file at its own frame rate, as a live camera would deliver it.

    Frame ``k`` of a pass is due ``k / fps`` seconds after the pass started. A reader that fell
    more than ``max_lag_s`` behind (a slow disk, a suspended process) starts a new schedule
    instead of bursting to catch up.

    ``aligned``: a schedule starts on the next multiple of ``1 / fps`` of the monotonic clock
    (shared by every process of the machine), so all aligned pacers of one frame rate make
    their frames due at the same instants: cameras in step, the worst burst, the same in every
    run. A benchmark needs that: free schedules start wherever each camera happened to open,
    and the phases between cameras then moved the naive loop's p95 from 19 to 30 ms between
    two runs of 4 cameras.
    """

    def __init__(self, max_lag_s: float = 1.0, *, aligned: bool = False) -> None:
        self._max_lag_s = max_lag_s
        self._aligned = aligned
        self._t0: float | None = None
        self._k = 0
        self._due_s: float | None = None  # the frame asked for by wait_s, not read yet

    def reset(self) -> None:
        self._t0 = None
        self._due_s = None

    def wait_s(self, now_s: float, fps: float | None) -> float:
        """Seconds until the next frame is due, 0 once it is (then the next call schedules
        the frame after it). Unlike ``delay_s`` it may be asked again before the frame is
        read: a reader that shares its thread returns to the others in the meantime."""
        if self._due_s is None:
            self._due_s = now_s + self.delay_s(now_s, fps)
        if now_s < self._due_s:
            return self._due_s - now_s
        self._due_s = None
        return 0.0

    def advance_s(self, frames: int, now_s: float, fps: float | None) -> float:
        """The frame just read came after ``frames`` frames the source left undecoded: it
        takes their places in the schedule. Seconds until it is due (0: now)."""
        self._k += frames
        if not fps or fps <= 0 or self._t0 is None:
            return 0.0
        return max(0.0, self._t0 + (self._k - 1) / fps - now_s)

    def behind(self, now_s: float, fps: float | None) -> int:
        """Frames already due at ``now_s`` after the one ``wait_s`` last let through (0: on
        time): a reader that fell behind may let that many go unread (``advance_s`` then puts
        the frame it reads in their place)."""
        if not fps or fps <= 0 or self._t0 is None:
            return 0
        return max(0, math.floor((now_s - self._t0) * fps) - (self._k - 1))

    def delay_s(self, now_s: float, fps: float | None) -> float:
        """How long to wait before reading the next frame (0 when it is already due)."""
        if not fps or fps <= 0:
            return 0.0
        if self._t0 is None or now_s - (self._t0 + self._k / fps) > self._max_lag_s:
            self._t0 = math.ceil(now_s * fps) / fps if self._aligned else now_s
            self._k = 0
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
        self._last_s: float | None = None  # the time of the last frame judged

    def reset(self) -> None:
        """Start a new schedule (a new connection may use a different time base)."""
        self._next_s = None
        self._last_s = None

    def wanted_after(self, frame_s: float) -> Callable[[float], bool]:
        """For a source that can leave frames undecoded: ``wanted(ahead_s)``, whether a frame
        ``ahead_s`` after the last one judged would pass, even if it were half a frame
        (``frame_s``) later. Timestamps may jitter; skipping a wanted frame would move
        detection to the next one, so the margin keeps the passed frames the same."""

        def wanted(ahead_s: float) -> bool:
            last = self._last_s
            return last is None or self.would_pass(last + ahead_s + frame_s / 2)

        return wanted

    def would_pass(self, t_s: float) -> bool:
        """Whether a frame at ``t_s`` would pass now (nothing changes). The next due time only
        moves forward, so a frame that would not pass now will not pass later either."""
        nxt = self._next_s
        if self._period_s <= 0 or nxt is None or t_s < nxt - self._period_s - self._EPS_S:
            return True
        return t_s >= nxt - self._EPS_S

    def due(self, t_s: float) -> bool:
        """Whether the frame at time ``t_s`` passes."""
        self._last_s = t_s
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
