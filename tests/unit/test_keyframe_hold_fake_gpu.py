"""Decoding only keyframes while a camera's model loads (``KeyframeHold``), on CPU CI.

The decoder is a fake PyNvVideoCodec whose packets carry PyNvVideoCodec's ``key`` flag and
which, like a real H.264 decoder, cannot decode a predicted frame whose predecessor it never
saw: it records that as a broken frame. The real decoder runs in tests/gpu/test_nvdec_gpu.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.pacing import Pacer
from vidpipe.capture.skipping import KeyframeHold


@dataclass(frozen=True)
class Packet:
    k: int
    key: int  # PyNvVideoCodec's PacketData.key
    bsl: int = 100  # its size; the demuxer's last packet is empty


class GopDemuxer:
    def __init__(self, packets: int, gop: int, on_packet: Any = None) -> None:
        self.packets, self.gop, self.on_packet = packets, gop, on_packet

    def __iter__(self) -> Iterator[Packet]:
        for k in range(self.packets):
            if self.on_packet is not None:
                self.on_packet(k)
            yield Packet(k, int(k % self.gop == 0))
        yield Packet(-1, 0, bsl=0)  # flushes the decoder

    def GetNvCodecId(self) -> str:
        return "H264"

    def FrameRate(self) -> float:
        return 25.0

    def Width(self) -> int:
        return 8

    def Height(self) -> int:
        return 6


class GopDecoder:
    """Frame ``k`` for packet ``k``, ``delay`` packets later (NVDEC's display latency); a
    predicted frame after a gap is recorded as broken."""

    def __init__(self, broken: list[int], delay: int) -> None:
        self.last: int | None = None
        self.broken, self.delay = broken, delay
        self.pending: list[int] = []
        self.flushed = 0
        self.decodes = 0

    def Decode(self, packet: Packet) -> list[int]:
        if packet.bsl == 0:
            self.flushed += 1
            out, self.pending = self.pending, []
            return out
        self.decodes += 1
        if not packet.key and self.last != packet.k - 1:
            self.broken.append(packet.k)
        self.last = packet.k
        self.pending.append(packet.k)
        return [self.pending.pop(0)] if len(self.pending) > self.delay else []


class GopCodec:
    """Stands in for the PyNvVideoCodec module."""

    def __init__(self, packets: int, gop: int, on_packet: Any = None, delay: int = 0) -> None:
        self.packets, self.gop, self.on_packet, self.delay = packets, gop, on_packet, delay
        self.broken: list[int] = []
        self.decoders: list[GopDecoder] = []

    def CreateDemuxer(self, filename: str) -> GopDemuxer:
        return GopDemuxer(self.packets, self.gop, self.on_packet)

    def CreateDecoder(self, **kwargs: Any) -> GopDecoder:
        self.decoders.append(GopDecoder(self.broken, self.delay))
        return self.decoders[-1]


def _reader(codec: GopCodec) -> NvdecReader:
    return NvdecReader("/clips/a.mp4", codec=codec, to_tensor=lambda f: f)


def test_a_hold_decodes_keyframes_then_everything_from_the_next_keyframe_fake_gpu() -> None:
    state = {"holding": True}
    codec = GopCodec(packets=40, gop=10)
    r = _reader(codec)
    r.open()
    r.hold_keyframes(lambda: state["holding"])
    assert [r.read(), r.read(), r.read()] == [0, 10, 20]
    assert r.held == 18
    state["holding"] = False  # the model is open: 21..29 predict from frames never decoded
    rest = []
    while (frame := r.read()) is not None:
        rest.append(frame)
    assert rest == list(range(30, 40))
    assert r.held == 27, "every frame not handed out was counted"
    assert codec.broken == [], "no frame was decoded without its reference"
    assert codec.decoders[0].flushed == 1, "the empty last packet still flushes"


@pytest.mark.parametrize("delay", [1, 3])
def test_frames_of_held_keyframes_that_come_out_after_the_hold_are_not_handed_out_fake_gpu(
    delay: int,
) -> None:
    """With the decoder's latency, a held keyframe's frame may come out after the hold: it is
    seconds old, so it is counted in ``held``, and every later frame keeps its number."""
    state = {"holding": True}
    codec = GopCodec(packets=60, gop=10, delay=delay)
    r = _reader(codec)
    r.open()
    r.hold_keyframes(lambda: state["holding"])
    first = r.read()
    assert first == 0
    state["holding"] = False
    rest = []
    while (frame := r.read()) is not None:
        rest.append(frame)
    resumed = rest[0]
    assert resumed % 10 == 0 and rest == list(range(resumed, 60))
    assert 1 + len(rest) + r.held == 60, "every frame handed out or counted"
    assert codec.broken == []


def test_without_a_hold_every_frame_is_decoded_and_a_reopen_drops_the_hold_fake_gpu() -> None:
    codec = GopCodec(packets=12, gop=4)
    r = _reader(codec)
    r.open()
    r.hold_keyframes(lambda: True)
    assert r.read() == 0 and r.read() == 4
    r.open()  # a reconnect: the worker holds again only if the model still loads
    frames = []
    while (frame := r.read()) is not None:
        frames.append(frame)
    assert frames == list(range(12)) and codec.broken == []
    assert r.held == 3


def test_a_hold_that_ends_on_a_keyframe_resumes_there_fake_gpu() -> None:
    answers = iter([True, True, False])  # asked at packets 0, 1 and 2 (a keyframe)
    hold = KeyframeHold(lambda: next(answers))
    assert [hold.skips(key) for key in (True, False, True, False)] == [False, True, False, False]
    assert hold.done and hold.skipped == 1


def test_pacer_advance_keeps_a_file_at_its_own_rate_when_frames_go_undecoded() -> None:
    pacer = Pacer()
    assert pacer.delay_s(100.0, 10.0) == 0.0  # frame 0, due at once
    pacer.advance(4)  # frames 1-4 left undecoded: the next read is frame 5
    assert abs(pacer.delay_s(100.0, 10.0) - 0.5) < 1e-9
    assert abs(pacer.delay_s(100.5, 10.0) - 0.1) < 1e-9
