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
same clock, so a trigger at a frame's ``t_capture`` finds its packets here. It also finds the
frame's own timestamp (``on_frame``): where the frame is in a clip is taken from that, not
from demux times, which run ahead of the pictures by the decoder's delay (0.1-0.45 s on a
10 fps camera with B-frames).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from vidpipe.capture.remux import timestamps
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips.align import StreamDelay

#: (monotonic time a decoded picture left the source, its pts)
FrameStamp = tuple[float, int | None]


@dataclass(slots=True)
class _Gop:
    packets: list[TapPacket]
    nbytes: int
    frames: list[FrameStamp] = field(default_factory=list)  # pictures decoded meanwhile

    @property
    def t_start(self) -> float:
        return self.packets[0].t_capture


@dataclass(frozen=True, slots=True)
class Segment:
    """Packets of one stream, from a keyframe on, and the parameters to remux them.

    ``frames`` are the pictures decoded while these packets came (see ``PacketRing.on_frame``).
    """

    params: StreamParams
    packets: tuple[TapPacket, ...]
    frames: tuple[FrameStamp, ...] = ()

    @property
    def t_start(self) -> float:
        return self.packets[0].t_capture if self.packets else 0.0

    @property
    def t_end(self) -> float:
        return self.packets[-1].t_capture if self.packets else 0.0

    def media_offsets(self, times: list[float]) -> list[float]:
        """Where the frames captured at ``times`` (``Frame.t_capture``) are in the clip, in
        seconds, rounded up to the millisecond: a player seeking there shows that frame.

        The clip's time is its first packet's pts and on (``remux.write_mp4``); a frame's is
        its own pts. A frame the source did not report is placed at the last packet demuxed
        before it.
        """
        if not self.packets:
            return [0.0 for _ in times]
        stamps = [pts for pts, _ in timestamps(self.packets, self.params)]
        unstamped = next(
            (s for s, p in zip(stamps, self.packets, strict=True) if p.pts is None), None
        )
        demuxed = [p.t_capture for p in self.packets]
        decoded = [t for t, _ in self.frames]
        out = []
        for t in times:
            i = bisect.bisect_right(decoded, t) - 1
            pts = self.frames[i][1] if i >= 0 else None
            if pts is None and i >= 0:  # decoded without pts: the packet demuxed without one
                pts = unstamped
            if pts is None:  # its source reports no pictures: the last packet demuxed before it
                pts = stamps[max(bisect.bisect_right(demuxed, t) - 1, 0)]
            seconds = (pts - stamps[0]) * self.params.time_base
            out.append(max(0.0, math.ceil(seconds * 1000) / 1000))
        return out

    @property
    def duration(self) -> float:
        """Seconds from the earliest to the end of the latest picture (by timestamps)."""
        if not self.packets:
            return 0.0
        stamps = [pts for pts, _ in timestamps(self.packets, self.params)]
        last = max(range(len(stamps)), key=stamps.__getitem__)
        end = stamps[last] + self.packets[last].duration
        return float((end - min(stamps)) * self.params.time_base)


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
        # arrival minus the camera's time of its packets (``align.py``): a record input's
        # offset against the camera's detect input
        self.sender_delay = StreamDelay()

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
        self.sender_delay.clear()
        if ended is not None and ended.packets:
            self._on_stream_end(ended)

    def on_packet(self, camera: str, packet: TapPacket) -> None:
        if packet.t_sender is not None:
            self.sender_delay.add(packet.t_capture, packet.t_sender)
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

    def on_frame(self, camera: str, pts: int | None, t_decoded: float) -> None:
        with self._lock:
            if self._gops:
                self._gops[-1].frames.append((t_decoded, pts))

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
        return Segment(seg.params, packets, tuple(f for f in seg.frames if f[0] <= t_to))

    def _segment_from(self, t_from: float) -> Segment | None:
        if self._params is None:
            return None
        gops = list(self._gops)
        start = 0
        for i, gop in enumerate(gops):
            if gop.t_start <= t_from:
                start = i
        packets = tuple(p for gop in gops[start:] for p in gop.packets)
        frames = tuple(f for gop in gops[start:] for f in gop.frames)
        return Segment(self._params, packets, frames)
