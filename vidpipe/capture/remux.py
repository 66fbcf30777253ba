"""Tapped packets to an MP4 file by stream copy: no decoding, no re-encoding.

The writer for whatever keeps a camera's recent packets (see ``source.PacketTap``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import av

from vidpipe.capture.source import StreamParams, TapPacket


def write_mp4(path: str | Path, params: StreamParams, packets: Iterable[TapPacket]) -> int:
    """Write ``packets`` of one stream to ``path``, from their first keyframe on.

    Timestamps are shifted so that the clip starts at 0. Out-of-band parameter sets
    (``params.extradata``) go in front of the first keyframe, where the muxer looks for them.

    Returns:
        How many packets were written (0: no keyframe, and no file is written).
    """
    it = iter(packets)
    first = next((p for p in it if p.keyframe), None)
    if first is None:
        return 0
    t0 = first.dts if first.dts is not None else (first.pts or 0)
    written = 0
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_mux_stream(
            params.codec, rate=params.rate, width=params.width, height=params.height
        )
        stream.time_base = params.time_base
        for tapped in _chain(first, it):
            data = tapped.data
            if written == 0 and params.extradata:
                data = params.extradata + data
            packet = av.Packet(data)
            packet.time_base = tapped.time_base
            packet.pts = None if tapped.pts is None else tapped.pts - t0
            packet.dts = None if tapped.dts is None else tapped.dts - t0
            packet.duration = tapped.duration
            packet.is_keyframe = tapped.keyframe
            packet.stream = stream
            out.mux(packet)
            written += 1
    return written


def _chain(first: TapPacket, rest: Iterable[TapPacket]) -> Iterable[TapPacket]:
    yield first
    yield from rest
