"""Whether the process is overloaded: frames shed for lack of capacity against frames
inferred, over a sliding window (``vidpipe_overloaded``, the status page's banner)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

#: Drops that mean the process could not keep up: a live camera's frame replaced before
#: inference took it, or left unmade because the one before it still waited
#: (``mailbox_full``), or left undecoded with its group of pictures (``gop_shed``), or a frame
#: too old once a slot was free. Decimation and the motion gate shed frames by design and are
#: not among them.
SHED_REASONS = frozenset({"overwritten", "mailbox_full", "gop_shed", "too_old"})
#: ``vidpipe_overloaded`` looks back this far, and is 1 when more than ``OVERLOAD_SHARE`` of
#: the frames that reached the scheduler's hand-off were shed there: the share that
#: ``vidpipe bench --mode density`` allows a camera count that holds (99 % inferred).
OVERLOAD_WINDOW_S = 10.0
OVERLOAD_SHARE = 0.01


class LoadWindow:
    """Frames shed for lack of capacity (``SHED_REASONS``) against frames inferred, over
    the last ``window_s`` seconds: whether the process is overloaded.

    The two counts are plain integers bumped without a lock on the hot paths (many camera
    threads overwrite frames at once; a contended lock there costs each of them a trip
    through the GIL). A lost increment only moves a share by a frame. Each ``overloaded``
    call keeps a sample, and compares against the newest sample at least ``window_s`` old
    (or the oldest kept, if none is that old yet): a scrape every 15 s and a status page
    polled every second both see the last window.
    """

    def __init__(
        self,
        window_s: float = OVERLOAD_WINDOW_S,
        share: float = OVERLOAD_SHARE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shed = 0
        self.inferred = 0
        self._window_s = window_s
        self._share = share
        self._clock = clock
        self._samples: deque[tuple[float, int, int]] = deque([(clock(), 0, 0)])
        self._lock = threading.Lock()  # only between readers of the gauge

    def overloaded(self) -> bool:
        """True if more than the share of frames was shed over the last window."""
        now, shed, inferred = self._clock(), self.shed, self.inferred
        with self._lock:
            samples = self._samples
            while len(samples) > 1 and now - samples[1][0] >= self._window_s:
                samples.popleft()  # the next one is old enough to be the base
            _, shed0, inferred0 = samples[0]
            samples.append((now, shed, inferred))
        shed_n, inferred_n = shed - shed0, inferred - inferred0
        return shed_n > self._share * (shed_n + inferred_n)
