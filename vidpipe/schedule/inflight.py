"""How many requests the scheduler keeps in flight, by the cameras that have frames.

Requests in flight are capped by the cameras that have frames: one per OpenVINO stream (the
backend's ``SchedulingHints.in_flight_floor``), and, once more cameras than streams have
frames, one more queued behind them per ``CAMERAS_PER_QUEUED`` cameras per stream (at least
one; a camera is active if it submitted within ``ACTIVE_WINDOW_S``).

Extra requests only queue frames in front of each other: by Little's law every frame in the
system adds a frame interval to every frame's latency (p95 at 1 camera was about twice the
naive loop's with the whole pool in flight; at 4 cameras, a second queued request took p95
from 24-28 to 52 ms against the naive loop's 31). The queued one keeps both streams busy
while the next frame is letterboxed and submitted: without it the CPU idled 6 % and fps fell
to 0.95x the naive loop's.

With more cameras the naive loop's own latency grows with them (every camera's frame waits
behind the others), and one queued request still left the CPU 5 % idle at 8 cameras of
768x432 on 2 streams (0.93x its fps). There a second queued request, with decodes no longer
timed to the streams (``turn_clock.TurnClock.due``: two or more queued), gave 1.05x its fps
at p95 52-53 against its 62 ms, and at 8 cameras of 1080p 1.07x at 64-70 against 77-79 ms
(``vidpipe bench``, one run, 2-core Xeon; benchmarks/README.md).
"""

from __future__ import annotations

#: A camera that submitted a frame this recently counts as one with frames.
ACTIVE_WINDOW_S = 1.0
#: Active cameras per stream for each request queued behind the streams (at least one is
#: queued once more cameras than streams have frames).
CAMERAS_PER_QUEUED = 2


def in_flight_cap(active: int, streams: int, pool: int) -> int:
    """Requests that may be in flight with ``active`` cameras that have frames, ``streams``
    requests running at once and a pool of ``pool``: one per stream, then one queued per
    ``CAMERAS_PER_QUEUED`` cameras per stream (at least one), never more than the cameras nor
    the pool (the module docstring says why)."""
    queued = max(1, active // (CAMERAS_PER_QUEUED * streams))
    return min(pool, max(streams, min(active, streams + queued)))
