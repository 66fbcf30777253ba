"""Tapped packets to an MP4 file by stream copy: no decoding, no re-encoding.

The writer for whatever keeps a camera's recent packets (see ``source.PacketTap``).

An RTSP session's first packets come without some timestamps: FFmpeg hands over the first
keyframe with neither pts nor dts (it has no RTP timestamp mapping yet) and the next few
without dts (it has not yet seen the stream's reordering). An MP4 muxer needs both on every
packet: given none it makes up a pts, then rejects the next packet ("non monotonically
increasing dts"), and the whole clip is lost. ``timestamps`` places such packets among their
neighbours, so that a clip that reaches back to a session's start is written whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path

import av

from vidpipe.capture.source import StreamParams, TapPacket


def write_mp4(path: str | Path, params: StreamParams, packets: Iterable[TapPacket]) -> int:
    """Write ``packets`` of one stream to ``path``, from their first keyframe on.

    Timestamps are shifted so that the first keyframe is shown at 0, and missing ones are
    filled in (``timestamps``). Out-of-band parameter sets (``params.extradata``) go in front of the
    first keyframe, where the muxer looks for them.

    Returns:
        How many packets were written (0: no keyframe, and no file is written).
    """
    clip = from_keyframe(packets)
    if not clip:
        return 0
    stamps = timestamps(clip, params)
    # The keyframe is shown at 0 (its dts may go negative: the muxer writes an edit list),
    # so that a time in the file is a pts relative to the keyframe's, as players seek by it.
    t0 = stamps[0][0]
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_mux_stream(
            params.codec, rate=params.rate, width=params.width, height=params.height
        )
        stream.time_base = params.time_base
        for i, (tapped, (pts, dts)) in enumerate(zip(clip, stamps, strict=True)):
            data = tapped.data
            if i == 0 and params.extradata:
                data = params.extradata + data
            packet = av.Packet(data)
            packet.time_base = tapped.time_base
            packet.pts = pts - t0
            packet.dts = dts - t0
            packet.duration = tapped.duration
            packet.is_keyframe = tapped.keyframe
            packet.stream = stream
            out.mux(packet)
    return len(clip)


def from_keyframe(packets: Iterable[TapPacket]) -> list[TapPacket]:
    """``packets`` from the first keyframe on (empty: there is none)."""
    out: list[TapPacket] = []
    for p in packets:
        if out or p.keyframe:
            out.append(p)
    return out


def timestamps(packets: Sequence[TapPacket], params: StreamParams) -> list[tuple[int, int]]:
    """Each packet's ``(pts, dts)`` in decoding order, the missing ones filled in.

    A packet without pts is shown before every later packet (a keyframe that starts a closed
    group of pictures, as a session's first packet is): one frame before the earliest of
    them. A packet without dts is decoded a frame before the next packet, or when it is
    shown if that is earlier. Timestamps the camera gave are kept. Should that still leave
    something the muxer refuses, every dts is derived from the pts instead: the n-th packet
    is decoded at the n-th earliest pts, all moved back by the stream's reordering delay
    (FFmpeg's own rule once it knows the delay).
    """
    step = _frame_step(packets, params)
    pts = _fill_pts([p.pts for p in packets], [p.dts for p in packets], step)
    dts = _fill_dts([p.dts for p in packets], pts, step)
    if _decodable(pts, dts):
        return list(zip(pts, dts, strict=True))
    ordered = sorted(pts)
    delay = max(0, *(o - p for o, p in zip(ordered, pts, strict=True)))
    return [(p, o - delay) for p, o in zip(pts, ordered, strict=True)]


def _fill_pts(pts: list[int | None], dts: list[int | None], step: int) -> list[int]:
    out = list(pts)
    earliest_later: int | None = None
    for i in reversed(range(len(out))):
        value = out[i]
        if value is None and earliest_later is not None:
            value = out[i] = earliest_later - step
        if value is not None:
            earliest_later = value if earliest_later is None else min(earliest_later, value)
    filled: list[int] = []
    latest = -step
    for value, d in zip(out, dts, strict=True):
        if value is None:  # nothing is stamped after it: its dts, else a frame after the latest
            value = d if d is not None else latest + step
        filled.append(value)
        latest = max(latest, value)
    return filled


def _fill_dts(dts: list[int | None], pts: list[int], step: int) -> list[int]:
    out = list(dts)
    after: int | None = None
    for i in reversed(range(len(out))):
        value = out[i]
        if value is None and after is not None:
            value = out[i] = min(after - step, pts[i])
        after = value if value is not None else after
    filled: list[int] = []
    for value, shown in zip(out, pts, strict=True):  # none known after it: after the one before
        filled.append(value if value is not None else (filled[-1] + step if filled else shown))
    return filled


def _decodable(pts: list[int], dts: list[int]) -> bool:
    """What the MP4 muxer accepts: dts strictly increasing, no packet shown before decoded."""
    return all(d <= p for p, d in zip(pts, dts, strict=True)) and all(
        a < b for a, b in itertools.pairwise(dts)
    )


def _frame_step(packets: Sequence[TapPacket], params: StreamParams) -> int:
    """One frame's duration in ``time_base`` units: a packet's own, else the nominal rate's."""
    for p in packets:
        if p.duration > 0:
            return p.duration
    if params.rate:
        return max(1, round(1 / (Fraction(params.rate) * params.time_base)))
    return 1
