"""NvdecReader's state machine on CPU CI, with a fake PyNvVideoCodec (no GPU, no NVDEC).

The fake demuxer yields packets; the fake decoder turns packet ``k`` into frame ``k`` after a
configurable delay (NVDEC's display-order latency), raises on the packets it is told to, and
flushes what it holds on the demuxer's last (empty) packet, as PyNvVideoCodec's does. The real
decoder runs in tests/gpu/test_nvdec_gpu.py on the H200.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import pytest

from vidpipe.capture.nvdec import NvdecError, NvdecReader, load_codec


class FakeDecodeError(RuntimeError):
    pass


class Packet(int):
    """A demuxed packet as PyNvVideoCodec's ``PacketData`` describes it: ``key`` (a keyframe),
    ``bsl`` (its size) and ``bsl_data`` (the address of its Annex B bytes: a keyframe's start
    with the parameter sets when ``sets``); the decoder sees the number."""

    key: int
    bsl: int
    bsl_data: int
    sets: bool


SETS = b"\x00\x00\x00\x01\x67\x64\x00\x28" + b"\x00\x00\x00\x01\x68\xee\x3c\x80"  # SPS, PPS
IDR = b"\x00\x00\x00\x01\x65\x88\x84\x00"
SLICE = b"\x00\x00\x00\x01\x41\x9a\x02\x00"


def packet(k: int, gop: int, sets_once: bool = False) -> Packet:
    """Packet ``k`` of a stream with a keyframe every ``gop``; every keyframe brings the
    parameter sets, or only the first (``sets_once``)."""
    p = Packet(k)
    p.key = int(k % gop == 0)
    p.sets = bool(p.key) and (k == 0 or not sets_once)
    data = (SETS if p.sets else b"") + (IDR if p.key else SLICE)
    p._bytes = ctypes.create_string_buffer(data, len(data))  # type: ignore[attr-defined]
    p.bsl, p.bsl_data = len(data), ctypes.addressof(p._bytes)  # type: ignore[attr-defined]
    return p


class FakeDemuxer:
    """Packets ``0 .. packets - 1``: plain numbers, or ``Packet`` s with a keyframe every
    ``gop`` when given."""

    def __init__(self, packets: int, gop: int | None = None, sets_once: bool = False) -> None:
        self.packets, self.gop, self.sets_once = packets, gop, sets_once

    def __iter__(self) -> Any:
        if self.gop is None:
            yield from range(self.packets)
        else:
            yield from (packet(k, self.gop, self.sets_once) for k in range(self.packets))
        yield None  # the demuxer's last packet: empty, it flushes the decoder

    def GetNvCodecId(self) -> str:  # PyNvVideoCodec's names
        return "H264"

    def FrameRate(self) -> float:
        return 25.0

    def Width(self) -> int:
        return 1920

    def Height(self) -> int:
        return 1080


class FakeDecoder:
    """Holds ``delay`` pictures back; a flush (None) gives them out and, as NVDEC's parser,
    forgets the parameter sets: ``Packet`` s are then skipped until one brings them again."""

    def __init__(self, delay: int, bad: set[int]) -> None:
        self.delay, self.bad = delay, bad
        self.held: list[int] = []
        self.sets = False

    def Decode(self, packet: int | None) -> list[int]:
        if packet is None:
            out, self.held, self.sets = self.held, [], False
            return out
        if packet in self.bad:
            raise FakeDecodeError(f"bad packet {packet}")
        if isinstance(packet, Packet):
            self.sets = self.sets or packet.sets
            if not self.sets:
                return []
        self.held.append(packet)
        if len(self.held) > self.delay:
            return [self.held.pop(0)]
        return []


class FakeCodec:
    """Stands in for the PyNvVideoCodec module."""

    def __init__(
        self,
        packets: int = 10,
        delay: int = 2,
        bad: set[int] | None = None,
        gop: int | None = None,
        sets_once: bool = False,
    ) -> None:
        self.packets, self.delay, self.bad, self.gop = packets, delay, bad or set(), gop
        self.sets_once = sets_once
        self.decoded: list[int] = []  # the packets given to a decoder, in order
        self.flushes = 0  # empty packets made to flush a decoder (``PacketData()``)
        self.opened: list[str] = []
        self.decoders = 0
        self.codec_id = "H264"
        self.decoder_args: dict[str, Any] = {}
        self.fail_open: Exception | None = None

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        if self.fail_open is not None:
            raise self.fail_open
        self.opened.append(filename)
        demuxer = FakeDemuxer(self.packets, self.gop, self.sets_once)
        demuxer.GetNvCodecId = lambda: self.codec_id  # type: ignore[method-assign]
        return demuxer

    def PacketData(self) -> None:  # an empty packet: the fake decoder flushes on None
        self.flushes += 1

    def CreateDecoder(self, **kwargs: Any) -> FakeDecoder:
        self.decoders += 1
        self.decoder_args = kwargs
        decoder = FakeDecoder(self.delay, self.bad)
        decode = decoder.Decode

        def counted(packet: int | None) -> list[int]:
            if packet is not None:
                self.decoded.append(int(packet))
            return decode(packet)

        decoder.Decode = counted  # type: ignore[method-assign]
        return decoder


def reader(codec: FakeCodec, url: str = "file:///clips/a.mp4", **kw: Any) -> NvdecReader:
    return NvdecReader(url, 3, codec=codec, to_tensor=lambda f: ("tensor", f), **kw)


def read_all(r: NvdecReader) -> list[Any]:
    frames = []
    while (f := r.read()) is not None:
        frames.append(f)
    return frames


def test_every_frame_in_order_despite_decoder_latency_fake_gpu() -> None:
    codec = FakeCodec(packets=10, delay=3)
    r = reader(codec)
    info = r.open()
    assert (info.width, info.height, info.fps) == (1920, 1080, 25.0)
    assert codec.opened == ["/clips/a.mp4"]  # file:// becomes a path
    assert codec.decoder_args == {"gpuid": 3, "codec": "H264", "usedevicememory": True}
    assert read_all(r) == [("tensor", k) for k in range(10)]
    assert r.read() is None, "the end stays the end"
    assert (r.frames, r.decode_errors) == (10, 0)


def test_reopen_after_the_end_starts_over_fake_gpu() -> None:
    r = reader(FakeCodec(packets=4, delay=1))
    r.open()
    first = read_all(r)
    r.open()
    assert read_all(r) == first and len(first) == 4


def test_rewind_replays_the_file_on_the_same_decoder_fake_gpu() -> None:
    codec = FakeCodec(packets=4, delay=2)
    r = reader(codec)
    r.open()
    assert r.read() is not None
    assert r.rewind() is False, "only at the end of a pass"
    rest = read_all(r)
    assert len(rest) == 3
    assert r.rewind() is True
    assert read_all(r) == [("tensor", k) for k in range(4)]
    assert (codec.decoders, len(codec.opened)) == (1, 2), "a new demuxer, the same decoder"
    assert r.frames == 8


def test_rewind_refuses_a_file_that_now_holds_another_codec_fake_gpu() -> None:
    codec = FakeCodec(packets=3, delay=0)
    r = reader(codec)
    r.open()
    read_all(r)
    codec.codec_id = "HEVC"
    assert r.rewind() is False
    assert r.read() is None, "still at the end: the caller reopens"
    codec.fail_open = RuntimeError("gone")
    assert r.rewind() is False


def test_rejected_packets_are_counted_and_skipped_fake_gpu() -> None:
    r = reader(FakeCodec(packets=10, delay=0, bad={2, 5, 6}))
    r.open()
    assert read_all(r) == [("tensor", k) for k in (0, 1, 3, 4, 7, 8, 9)]
    assert r.decode_errors == 3


def test_too_many_rejected_packets_in_a_row_end_the_connection_fake_gpu() -> None:
    r = reader(FakeCodec(packets=20, delay=0, bad=set(range(5, 20))), max_consecutive_errors=4)
    r.open()
    with pytest.raises(NvdecError, match=r"5 packets in a row failed to decode.*bad packet 9"):
        read_all(r)
    assert r.frames == 5 and r.decode_errors == 5


def test_open_failure_is_clear_and_hides_the_password_fake_gpu() -> None:
    codec = FakeCodec()
    codec.fail_open = RuntimeError("connect rtsp://admin:s3cret-pw@10.0.0.5/live failed")
    r = reader(codec, url="rtsp://admin:s3cret-pw@10.0.0.5/live")
    with pytest.raises(NvdecError) as info:
        r.open()
    message = str(info.value)
    assert "cannot open rtsp://admin:***@10.0.0.5/live with NVDEC" in message
    assert "s3cret-pw" not in message
    assert not r.is_open


def test_read_before_open_and_after_close_fake_gpu() -> None:
    r = reader(FakeCodec())
    with pytest.raises(NvdecError, match="read before open"):
        r.read()
    r.open()
    assert r.read() is not None
    r.close()
    r.close()  # idempotent
    with pytest.raises(NvdecError, match="read before open"):
        r.read()


def test_the_decoder_gets_the_callers_stream_fake_gpu() -> None:
    codec = FakeCodec()
    reader(codec, cuda_context=11, cuda_stream=22).open()
    assert codec.decoder_args["cudacontext"] == 11 and codec.decoder_args["cudastream"] == 22


def test_missing_pynvvideocodec_says_how_to_get_it_fake_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # import fails, as without it
    with pytest.raises(NvdecError, match="pip install pynvvideocodec"):
        load_codec()
    with pytest.raises(NvdecError, match="pip install pynvvideocodec"):
        NvdecReader("/clips/a.mp4").open()


class Budget:
    """A group budget that decodes the groups at the given keyframe numbers in full (by
    order of keyframe, from 0) and records the media times it was asked at."""

    def __init__(self, full: set[int]) -> None:
        self.full = full
        self.asked: list[float | None] = []

    def keyframe(self, media_s: float | None) -> bool:
        self.asked.append(media_s)
        return len(self.asked) - 1 in self.full


def test_a_shed_group_is_demuxed_but_only_its_keyframe_decoded_fake_gpu() -> None:
    codec = FakeCodec(packets=20, delay=1, gop=5)  # keyframes 0, 5, 10, 15
    r = reader(codec)
    r.open()
    budget = Budget(full={1})  # only the group from packet 5 in full
    r.shed_groups(budget)  # type: ignore[arg-type]  # the reader asks only keyframe()
    frames, demuxed = [], []
    while (frame := r.read()) is not None:
        frames.append(frame[1])
        demuxed.append(r._packet_no)
    assert frames == [0, 5, 6, 7, 8, 9, 10, 15]
    assert codec.decoded == frames  # the others never reached the decoder
    assert r.shed == 12
    # a shed group's keyframe leaves the decoder with its own packet (the decoder is
    # flushed), not a group later, once two keyframes showed that each brings the parameter
    # sets that a flush forgets; the first, and a full group's frames, come with the delay
    assert [n for f, n in zip(frames, demuxed, strict=True) if f in (0, 10, 15)] == [6, 11, 16]
    assert codec.flushes == 2
    # media time: the keyframe's place in the stream at the demuxer's 25 fps
    assert budget.asked == [1 / 25, 6 / 25, 11 / 25, 16 / 25]


def test_a_stream_with_its_parameter_sets_sent_once_is_never_flushed_fake_gpu() -> None:
    """A camera that sends its SPS and PPS only at the start: a flush would lose them and
    every later keyframe with them (the fake decoder forgets them, as NVDEC's does), so a
    shed group's keyframe comes out a group late, and every keyframe still comes out."""
    codec = FakeCodec(packets=20, delay=1, gop=5, sets_once=True)
    r = reader(codec)
    r.open()
    r.shed_groups(Budget(full={1}))  # type: ignore[arg-type]
    frames, demuxed = [], []
    while (frame := r.read()) is not None:
        frames.append(frame[1])
        demuxed.append(r._packet_no)
    assert frames == [0, 5, 6, 7, 8, 9, 10, 15]
    assert codec.flushes == 0 and r.shed == 12
    assert [n for f, n in zip(frames, demuxed, strict=True) if f in (0, 10, 15)] == [6, 16, 21]


def test_without_a_budget_or_keyframe_flags_every_packet_is_decoded_fake_gpu() -> None:
    keyed = FakeCodec(packets=12, gop=4)
    r = reader(keyed)
    r.open()
    r.shed_groups(Budget(full={1}))  # type: ignore[arg-type]
    r.shed_groups(None)  # taken back: decode everything
    assert [f for _, f in read_all(r)] == list(range(12)) and r.shed == 0
    # a demuxer whose packets say nothing of keyframes: nothing can be shed
    plain = FakeCodec(packets=12)
    r = reader(plain)
    r.open()
    r.shed_groups(Budget(full=set()))  # type: ignore[arg-type]
    assert [f for _, f in read_all(r)] == list(range(12)) and r.shed == 0
