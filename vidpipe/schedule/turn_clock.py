"""When an unpaced file camera should start decoding its next frame: just in time.

File cameras read as fast as inference allows (the ``block`` mailbox policy) decode a frame
only when the hub gives them a turn. A turn given the moment a frame is taken makes the new
frame wait, decoded, until a request frees: at 4 cameras on 2 OpenVINO streams up to 2 frames
waited in the hub on top of the 3 requests in flight and 1 being letterboxed, and by Little's
law each of them adds to every frame's capture-to-result latency. A count limit alone cannot
fix it: one turn at a time starved the streams at 1080p (one decoder is slower than two
streams), two let frames wait. Timed turns took p95 at 4 cameras of 768x432 from 52-53 ms to
37 ms, the naive loop's, at the same fps (``vidpipe bench``, benchmarks/README.md).

``TurnClock`` times the turns instead. It models the backend as ``streams`` servers: a request
starts when it is submitted if a stream is free, else when the oldest running one completes,
and runs for ``service_s`` (a moving average of the runs it saw). From that it forecasts when
each of the next frames will start running: the in-flight cap takes a frame when a place frees
(on each completion), and the frame then starts when a stream frees for it. The turn for that
frame is given ``lead_s`` before its start (or, where a decode is cheap, before the cap
takes it: ``TurnClock._cheap_decode_locked`` says why): the time a decode takes (its moving
average plus one mean deviation) and a letterbox takes, plus a margin. The model's error only
moves when a frame is ready: a late forecast idles a stream for the error, an early one lets
the frame wait.
Each completion calls ``on_moved``, so a reader held back wakes and asks again when a request
ends sooner than forecast. The service time is measured per request, from its start, so a
starved stream does not lengthen the estimate and push the next turn later still.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Callable

# Moving-average weight of a new sample: about the last 8 samples count.
_ALPHA = 0.125
# Ready this much before the place frees: the scheduler's wake-up and hand-off take a few
# hundred microseconds, and a frame that is a little early costs less than an idle stream.
_MARGIN_S = 0.002
# A completion this much before its forecast wakes the reader held back (``completed``).
_EARLY_S = 0.0005
# Requests queued behind the streams from which turns are no longer timed (``TurnClock.due``).
_UNTIMED_QUEUED = 2
# How many mean deviations of the decode time the lead covers (``TurnClock.lead_s``). On the
# 2-core bench at 4 cameras, 1080p (decode 15 +- 4 ms while two streams infer): 0 kept p95 at
# 1.35x the naive loop's but lost 2-5 % of its fps, 2 kept the fps and p95 at 1.45x.
_DEV_K = 1.0
# A decode (mean + deviation) shorter than this share of the device's frame interval
# (service / streams) is cheap: its frame is made ready for the place it takes in the cap,
# not for the stream it then runs on (``TurnClock.due``).
_CHEAP_DECODE_SHARE = 0.5


def _ewma(old: float | None, sample: float) -> float:
    return sample if old is None else old + _ALPHA * (sample - old)


class TurnClock:
    """Forecast of when the backend takes its next frames (see the module docstring).

    Thread-safe: the scheduler reports submissions and letterbox times, the backend's
    callback thread completions, the hub (under its own lock) decode times and asks ``due``.
    Its lock is a leaf: nothing is called while it is held.

    Args:
        streams: requests the device runs at once (OpenVINO's stream count).
        decode_beside: a decode may run while the frame before it is inferred. False where
            one inference takes every core (OpenVINO's latency hint on the CPU): a decode
            beside it slowed it from 7 to 12 ms at one camera of 1080p on 2 cores, which put
            p95 latency at 1.4x the naive loop's; the turn then waits for the inference to
            end (p95 23 -> 14 ms inside the daemon, 79 -> 65 fps, still 1.5x the loop's).
    """

    def __init__(self, streams: int, decode_beside: bool = True) -> None:
        if streams < 1:
            raise ValueError(f"streams must be >= 1, got {streams}")
        self.streams = streams
        self.decode_beside = decode_beside
        self._lock = threading.Lock()
        self._running: dict[int, float] = {}  # request key -> start time
        self._queued: deque[int] = deque()  # submitted while every stream was busy
        self._cap = streams  # the in-flight cap at the last submission
        self._holding = 0  # frames taken from the hub, not yet submitted
        self.service_s: float | None = None
        self.decode_s: float | None = None
        self.decode_dev_s = 0.0  # mean deviation of the decode time
        self.fill_s: float | None = None
        #: called after each completion, without the lock (the hub wakes the reader it holds
        #: back: a completion can bring its turn forward)
        self.on_moved: Callable[[], None] | None = None

    # ------------------------------------------------------------------ reports

    def taken(self) -> None:
        """The scheduler took a frame from the hub."""
        with self._lock:
            self._holding += 1

    def released(self) -> None:
        """A taken frame was dropped before submission: its place is the next turn's."""
        with self._lock:
            self._holding = max(0, self._holding - 1)
        if self.on_moved is not None:
            self.on_moved()

    def filled(self, seconds: float) -> None:
        """The scheduler letterboxed a frame in ``seconds``."""
        with self._lock:
            self.fill_s = _ewma(self.fill_s, seconds)

    def submitted(self, key: int, now: float, cap: int) -> None:
        """A taken frame went to the backend, whose in-flight cap is ``cap``."""
        with self._lock:
            self._holding = max(0, self._holding - 1)
            self._cap = cap
            if len(self._running) < self.streams:
                self._running[key] = now
            else:
                self._queued.append(key)

    def completed(self, key: int, now: float) -> None:
        with self._lock:
            start = self._end_locked(key, now)
            early = True  # sooner than forecast: a turn held back for it is due sooner too
            if start is not None:
                if self.service_s is not None:
                    early = now < start + self.service_s - _EARLY_S
                self.service_s = _ewma(self.service_s, now - start)
        # Only an early completion moves a held turn forward; waking the reader on every one
        # cost the readers 0.3 ms of CPU a frame (4 cameras, 768x432).
        if early and self.on_moved is not None:
            self.on_moved()

    def withdrawn(self, key: int, now: float) -> None:
        """The backend refused a submitted request: it never ran, so no run time to learn."""
        with self._lock:
            self._end_locked(key, now)

    def _end_locked(self, key: int, now: float) -> float | None:
        """Take ``key`` out of the model, start the next queued request; its start or None
        (it was queued, or unknown: it ran before the model started it)."""
        start = self._running.pop(key, None)
        if start is None and key in self._queued:
            self._queued.remove(key)
        while self._queued and len(self._running) < self.streams:
            self._running[self._queued.popleft()] = now
        return start

    def decoded(self, seconds: float) -> None:
        """A camera took ``seconds`` from its turn to its decoded frame."""
        with self._lock:
            if self.decode_s is not None:
                self.decode_dev_s = _ewma(self.decode_dev_s, abs(seconds - self.decode_s))
            self.decode_s = _ewma(self.decode_s, seconds)

    # ------------------------------------------------------------------ forecast

    @property
    def lead_s(self) -> float:
        # A decode that runs late idles a stream (throughput lost, and the frames behind it
        # wait); one that ends early only waits itself: cover most of the spread, as TCP's
        # retransmission timer covers the round trip's (mean + k x mean deviation).
        if not self.decode_beside:
            return 0.0  # the turn comes when the stream frees: decode and inference alternate
        decode = (self.decode_s or 0.0) + _DEV_K * self.decode_dev_s
        return decode + (self.fill_s or 0.0) + _MARGIN_S

    def due(self, outstanding: int, now: float) -> float:
        """When the next turn should be given, with ``outstanding`` turns already out
        (decoding, or decoded and waiting in the hub). At or before ``now``: give it now.

        With two or more requests queued behind the streams (the scheduler queues one more
        per two cameras per stream), turns are not timed: a frame decoded early waits in the
        device's queue, where it keeps the streams busy, and with that many cameras the naive
        loop's own latency is longer than what the queue adds. Timed there, the streams idled
        5 % (0.93x the naive loop's fps at 8 cameras of 768x432 on 2 streams); untimed, 1.05x
        at p95 0.85x its (``vidpipe.schedule.inflight``).
        """
        with self._lock:
            if self.service_s is None or self.decode_s is None:
                return now  # nothing measured yet: the hub's count limit alone
            if self._cap - self.streams >= _UNTIMED_QUEUED:
                return now
            n = self._holding + outstanding + 1
            takes, starts = self._forecast_locked(now, n)
            ready_by = takes[n - 1] if self._cheap_decode_locked() else starts[-1]
            return ready_by - self.lead_s

    def _cheap_decode_locked(self) -> bool:
        """Whether a frame should be ready when the cap takes it rather than when a stream
        frees for it (with one request queued behind the streams, half a service earlier at
        2 streams).

        Ready for its stream, a frame has no slack: a request that ends sooner than forecast,
        or a reader woken late on a busy box, idles a stream. At 4 cameras of 768x432 on 2
        streams (decode 2.3 +- 1.1 ms, a frame every 9 ms) the box idled 4-8 % that way;
        ready for its place, it waits in the device's queue instead, and vidpipe ran 1.05,
        1.05 and 0.98x the naive loop's fps against 1.01, 1.00 and 0.92x, at p95 42-47 ms
        against the loop's 41-47 (``vidpipe bench``, 3 alternated repeats, 2-core EPYC:
        ``benchmarks/results/ab-4cam-2cpu-epyc-take.*``, where ``vidpipe-xtake`` was every
        frame made ready for its place).
        Where the decode is long (1080p: 14 +- 4 ms against a frame every 12 ms) the early
        decodes run beside the inferences and slow them: the box was busier (98 % against
        95) at the same fps, and p95 rose from 60 to 73 ms (the loop's: 50; a one-off run).
        There the frame is made ready for its stream.
        """
        if not self.decode_beside or self.service_s is None or self.decode_s is None:
            return False
        interval = self.service_s / self.streams
        return self.decode_s + self.decode_dev_s < _CHEAP_DECODE_SHARE * interval

    def _forecast_locked(self, now: float, n: int) -> tuple[list[float], list[float]]:
        """When the cap takes each of the next ``n`` frames, and when each starts running.

        The cap takes the next frame when a request completes; with one request queued
        behind the streams (more cameras than streams) that frame then waits in the device's
        queue for the next stream to free, half a service time at 2 streams.
        """
        service = self.service_s or 0.0
        # A request running past the estimate is about to end: now, not in the past.
        ends = [max(now, start + service) for start in self._running.values()]
        free = ends + [now] * (self.streams - len(ends))  # when each stream is next free
        heapq.heapify(free)
        completions = list(ends)
        for _ in self._queued:  # each starts when the first stream frees
            t = heapq.heappop(free) + service
            completions.append(t)
            heapq.heappush(free, t)
        in_flight = len(self._running) + len(self._queued)
        takes = [now] * max(0, self._cap - in_flight) + sorted(completions)
        step = service / self.streams  # beyond the requests in flight: the steady rate
        while len(takes) < n:
            takes.append((takes[-1] if takes else now) + step)
        starts = []
        for take in takes[:n]:  # each taken frame runs on the first stream free after it
            start = max(take, heapq.heappop(free))
            starts.append(start)
            heapq.heappush(free, start + service)
        return takes[:n], starts
