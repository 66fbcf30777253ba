"""One camera's recent compressed packets: the pre-roll of a clip, and the clip while it is open.

``PacketRing`` is the camera's packet tap (``vidpipe.capture.source.PacketTap``). It keeps
whole groups of pictures (a keyframe and the packets up to the next one), so that whatever it
hands out starts on a keyframe: the last ``pre_s + latency_s`` seconds back to the keyframe
before them, and, while a clip is open (``hold``), everything from the clip's start on. Its
memory is bounded by ``max_bytes``; reaching it drops the oldest group and is counted.

A trigger is handled after detection, when newer packets have arrived: keeping only ``pre_s``
back from the newest packet shortened the pre-roll by that delay (2.0 s of a 3 s ``pre_s`` at
10 frames late). ``latency_s`` is how late a trigger may come.

Times are ``time.monotonic()``: a packet's demux time and a frame's capture time are on the
same clock, so a trigger at a frame's ``t_capture`` finds its packets here.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from vidpipe.capture.source import StreamParams, TapPacket


@dataclass(slots=True)
class _Gop:
    packets: list[TapPacket]
    nbytes: int

    @property
    def t_start(self) -> float:
        return self.packets[0].t_capture


@dataclass(frozen=True, slots=True)
class Segment:
    """Packets of one stream, from a keyframe on, and the parameters to remux them."""

    params: StreamParams
    packets: tuple[TapPacket, ...]

    @property
    def t_start(self) -> float:
        return self.packets[0].t_capture if self.packets else 0.0

    @property
    def t_end(self) -> float:
        return self.packets[-1].t_capture if self.packets else 0.0

    def media_offset(self, t: float) -> float:
        """Seconds into the clip (its timestamps) of the last packet demuxed at or before
        ``t``: where a frame captured at ``t`` is in the file.

        Demux times jitter with the reader thread's scheduling; the stream's own timestamps do
        not, so positions in the file are taken from them.
        """
        if not self.packets:
            return 0.0
        i = bisect.bisect_right([p.t_capture for p in self.packets], t) - 1
        return self._seconds(self.packets[max(i, 0)])

    @property
    def duration(self) -> float:
        """Seconds from the earliest to the end of the latest picture (by timestamps)."""
        stamped = [p for p in self.packets if p.pts is not None]
        if not stamped:
            return self.t_end - self.t_start
        first = min(stamped, key=lambda p: p.pts or 0)
        last = max(stamped, key=lambda p: p.pts or 0)
        return float(((last.pts or 0) + last.duration - (first.pts or 0)) * last.time_base)

    def _seconds(self, packet: TapPacket) -> float:
        first = self.packets[0]
        ts, t0 = packet.pts, first.pts
        if ts is None or t0 is None:  # no timestamps: fall back on demux times
            return packet.t_capture - first.t_capture
        return float((ts - t0) * packet.time_base)


class PacketRing:
    """The packet tap of one camera (reader thread) that the clip recorder reads (its thread).

    Args:
        camera: the camera's name.
        pre_s: seconds of pre-roll a clip starts with (back to the keyframe before them).
        max_bytes: memory limit of the packets held.
        on_overflow: called (under the ring's lock, so: quickly) each time the limit drops a group.
        on_stream_end: called with the old stream's held segment when a new stream starts while
            a clip holds packets (a reconnect ends the clip there).
        latency_s: how long after its frame was captured a trigger may reach the recorder;
            ``pre_s + latency_s`` seconds are kept before the newest packet.
    """

    def __init__(
        self,
        camera: str,
        pre_s: float,
        max_bytes: int,
        on_overflow: Callable[[], None] = lambda: None,
        on_stream_end: Callable[[Segment], None] = lambda _s: None,
        latency_s: float = 0.0,
    ) -> None:
        self.camera = camera
        self.pre_s = pre_s
        self.keep_s = pre_s + latency_s
        self.max_bytes = max_bytes
        self._on_overflow = on_overflow
        self._on_stream_end = on_stream_end
        self._lock = threading.Lock()
        self._gops: deque[_Gop] = deque()
        self._params: StreamParams | None = None
        self._bytes = 0
        self._hold_from: float | None = None
        self.overflows = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    # ------------------------------------------------------------------ PacketTap (reader thread)

    def on_stream(self, camera: str, params: StreamParams) -> None:
        with self._lock:
            ended = self._segment_from(self._hold_from) if self._hold_from is not None else None
            self._gops.clear()
            self._bytes = 0
            self._params = params
            self._hold_from = None
        if ended is not None and ended.packets:
            self._on_stream_end(ended)

    def on_packet(self, camera: str, packet: TapPacket) -> None:
        size = len(packet.data)
        with self._lock:
            if packet.keyframe:
                self._gops.append(_Gop([packet], size))
            elif self._gops:
                gop = self._gops[-1]
                gop.packets.append(packet)
                gop.nbytes += size
            else:
                return  # before the stream's first keyframe: nothing can start here
            self._bytes += size
            self._trim(packet.t_capture)

    def _trim(self, now: float) -> None:
        horizon = now - self.keep_s
        if self._hold_from is not None:
            horizon = min(horizon, self._hold_from)
        gops = self._gops
        # drop a group only when the next one starts early enough to be the pre-roll's start
        while len(gops) > 1 and gops[1].t_start <= horizon:
            self._bytes -= gops.popleft().nbytes
        while self._bytes > self.max_bytes and len(gops) > 1:
            self._bytes -= gops.popleft().nbytes
            self.overflows += 1
            self._on_overflow()

    # ------------------------------------------------------------------ recorder side

    def hold(self, t_from: float | None) -> None:
        """Keep every packet from the keyframe at or before ``t_from`` (None: only the pre-roll)."""
        with self._lock:
            self._hold_from = t_from

    def segment(self, t_from: float, t_to: float) -> Segment | None:
        """The packets from the keyframe at or before ``t_from`` (else the oldest one) up to
        ``t_to``; None before the stream's parameters are known."""
        with self._lock:
            seg = self._segment_from(t_from)
        if seg is None:
            return None
        packets = tuple(p for p in seg.packets if p.t_capture <= t_to)
        return Segment(seg.params, packets)

    def _segment_from(self, t_from: float) -> Segment | None:
        if self._params is None:
            return None
        gops = list(self._gops)
        start = 0
        for i, gop in enumerate(gops):
            if gop.t_start <= t_from:
                start = i
        packets = tuple(p for gop in gops[start:] for p in gop.packets)
        return Segment(self._params, packets)
