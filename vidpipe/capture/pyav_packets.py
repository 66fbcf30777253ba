"""PyAV packets as the packet tap takes them, with the camera's own capture time.

Shared by the decoding source (``pyav_source``) and the record input, which only demuxes
(``record_input``).
"""

from __future__ import annotations

import struct
import time
from fractions import Fraction
from typing import Any

from vidpipe.capture.source import TapPacket

_PRFT = struct.Struct("<qi")  # AVProducerReferenceTime: wallclock (us), flags
_PRFT_CAPTURE = 24


def tap_packet(packet: Any) -> TapPacket:
    return TapPacket(
        data=bytes(packet),
        pts=packet.pts,
        dts=packet.dts,
        duration=packet.duration or 0,
        time_base=Fraction(packet.time_base),
        keyframe=bool(packet.is_keyframe),
        t_capture=time.monotonic(),
        t_sender=sender_time(packet),
    )


def sender_time(packet: Any) -> float | None:
    """The camera's capture time of ``packet`` (seconds since the epoch), or None.

    FFmpeg's RTP demuxer maps each packet's RTP timestamp through the stream's last RTCP sender
    report to the sender's NTP clock and attaches it as producer reference time side data
    (``AVProducerReferenceTime``: int64 microseconds, int flags), flagged 24: the capture time
    (ISO/IEC 14496-12's ``prft`` flag values).
    """
    if not packet.has_sidedata("prft"):
        return None
    raw = bytes(packet.get_sidedata("prft"))
    if len(raw) < _PRFT.size:
        return None
    wallclock_us, flags = _PRFT.unpack_from(raw)
    return wallclock_us / 1e6 if flags == _PRFT_CAPTURE else None
