"""Where a detect frame's moment is in a camera's record stream: the offset between its inputs.

A camera with a record input detects on one stream and records another. A trigger happens at
a detect frame's ``t_capture`` (when its picture left the decoder); the clip is cut from record
packets by their arrival time. The two differ for the same moment: the main stream may be
encoded and sent later than the sub-stream, and the detect picture waits in its decoder
(reordering). Placed by arrival alone, a clip is off by that difference.

RTSP cameras say when they took each picture: their RTCP sender reports map RTP timestamps to
their wall clock, and FFmpeg attaches that time to every packet after the first report
(``TapPacket.t_sender``). Each stream's delay is its local time minus the camera's time, for
the same pictures: ``t_capture - t_sender`` of record packets, ``t_decoded - t_sender`` of
detect pictures. The offset is their difference, the median of recent samples of each (the
record packets come in decode order, their timestamps in picture order). Both delays are
taken against the monotonic clock, so the local wall clock does not enter; the camera's
clock does for both streams alike, so its error cancels.

Without sender reports on both streams (files, servers that send none, the first seconds of a
connection), or with an offset beyond ``MAX_OFFSET_S``, clips are placed by arrival.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections import deque
from typing import Any

from vidpipe.capture.source import StreamParams, TapPacket

log = logging.getLogger(__name__)

#: samples of each stream's delay kept (about 10 s of a 10-25 fps stream)
SAMPLES = 200
#: fewer samples than this on either stream: no offset yet
MIN_SAMPLES = 10
#: detect packets whose pts is remembered until their picture is decoded
_PENDING_PTS = 64
#: Two streams of one camera differ by their encoders' and paths' delays: well under this.
#: Beyond it the two sender clocks are not one camera's (a restreamer that sends its own
#: reports per stream, two devices), and the offset means nothing.
MAX_OFFSET_S = 2.0


class StreamDelay:
    """A stream's recent delays (local monotonic time minus the camera's time), thread-safe."""

    def __init__(self) -> None:
        self._samples: deque[float] = deque(maxlen=SAMPLES)
        self._lock = threading.Lock()

    def add(self, t_local: float, t_sender: float) -> None:
        with self._lock:
            self._samples.append(t_local - t_sender)

    def clear(self) -> None:
        with self._lock:
            self._samples.clear()

    def median(self) -> float | None:
        """The median delay, None with fewer than ``MIN_SAMPLES``."""
        with self._lock:
            if len(self._samples) < MIN_SAMPLES:
                return None
            return statistics.median(self._samples)


class DetectClock:
    """The packet tap of a camera's detect input when its record input feeds the clip ring:
    it keeps nothing but when the camera took the pictures that detection sees.

    A packet's sender time is remembered by its pts until the picture of that pts leaves the
    decoder (``on_frame``); the delay of the picture is then ``t_decoded - t_sender``.
    """

    def __init__(self) -> None:
        self.delay = StreamDelay()
        self._sent: dict[int, float] = {}
        self._order: deque[int] = deque()

    def on_stream(self, camera: str, params: StreamParams) -> None:
        self._sent.clear()
        self._order.clear()
        self.delay.clear()  # a new connection: a new path, perhaps a new delay

    def on_packet(self, camera: str, packet: TapPacket) -> None:
        if packet.t_sender is None or packet.pts is None:
            return
        if len(self._order) >= _PENDING_PTS:
            self._sent.pop(self._order.popleft(), None)
        self._sent[packet.pts] = packet.t_sender
        self._order.append(packet.pts)

    def on_frame(self, camera: str, pts: int | None, t_decoded: float) -> None:
        t_sender = None if pts is None else self._sent.get(pts)
        if t_sender is not None:
            self.delay.add(t_decoded, t_sender)


def record_offset(record: StreamDelay, detect: StreamDelay) -> float | None:
    """How much later the record stream's packets of a moment arrive than the detect picture
    of that moment leaves its decoder (seconds, may be negative); None without enough sender
    times on both streams."""
    rec, det = record.median(), detect.median()
    if rec is None or det is None:
        return None
    return rec - det


class InputOffset:
    """A dual camera's two inputs in time: its detect input's ``clock`` (the detect worker's
    packet tap) against its record ring's ``record`` delays."""

    def __init__(self, camera: str, record: StreamDelay) -> None:
        self.camera = camera
        self.clock = DetectClock()
        self._record = record
        self._refused = False  # logged once

    def offset(self) -> float | None:
        """``record_offset`` now; None where unmeasured or implausible (logged once)."""
        offset = record_offset(self._record, self.clock.delay)
        if offset is None or abs(offset) <= MAX_OFFSET_S:
            return offset
        if not self._refused:
            self._refused = True
            log.warning(
                "camera %s: the record input's sender clock is %.1f s off the detect input's, "
                "more than two streams of one camera differ: clips are placed by arrival",
                self.camera,
                offset,
            )
        return None


def clip_source(offset_s: float | None) -> dict[str, Any]:
    """What a clip's sidecar says of its input and how it was placed against detection."""
    if offset_s is None:
        return {"input": "record", "aligned_by": "arrival", "record_offset_s": None}
    return {"input": "record", "aligned_by": "rtcp", "record_offset_s": round(offset_s, 3)}
