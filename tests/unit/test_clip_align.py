"""The offset between a camera's record and detect inputs, from the camera's sender times."""

from __future__ import annotations

import struct
from fractions import Fraction

import pytest

from vidpipe.capture.pyav_packets import sender_time
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips.align import (
    MAX_OFFSET_S,
    MIN_SAMPLES,
    DetectClock,
    InputOffset,
    StreamDelay,
    record_offset,
)

PARAMS = StreamParams("h264", b"", 768, 432, "yuv420p", Fraction(1, 90000), None)


def packet(pts: int, t_sender: float | None) -> TapPacket:
    return TapPacket(b"\x00", pts, pts, 9000, Fraction(1, 90000), False, 0.0, t_sender)


class FakePrftPacket:
    """What ``sender_time`` reads of a PyAV packet (a test can attach no side data to a real
    one: PyAV's side data of a packet is read-only)."""

    def __init__(self, raw: bytes | None) -> None:
        self._raw = raw

    def has_sidedata(self, dtype: str) -> bool:
        return dtype == "prft" and self._raw is not None

    def get_sidedata(self, dtype: str) -> bytes:
        assert dtype == "prft" and self._raw is not None
        return self._raw


def test_thesender_time_is_the_capture_time_of_the_producer_reference_time() -> None:
    capture = struct.pack("<qi", 1_800_000_000_250_000, 24)
    assert sender_time(FakePrftPacket(capture)) == pytest.approx(1_800_000_000.25)
    assert sender_time(FakePrftPacket(None)) is None
    # another kind of reference time (e.g. when the encoder wrote it) is not the capture time
    assert sender_time(FakePrftPacket(struct.pack("<qi", 1_800_000_000_250_000, 0))) is None
    assert sender_time(FakePrftPacket(b"\x01\x02")) is None  # too short to be one


def test_a_delay_needs_enough_samples_and_is_their_median() -> None:
    delay = StreamDelay()
    for i in range(MIN_SAMPLES - 1):
        delay.add(100.0 + i, 90.0 + i)
    assert delay.median() is None
    delay.add(200.0, 100.0)  # one late outlier among tens
    assert delay.median() == 10.0
    delay.clear()
    assert delay.median() is None


def test_the_detect_clock_times_pictures_by_their_packetssender_time() -> None:
    clock = DetectClock()
    clock.on_stream("c", PARAMS)
    for k in range(MIN_SAMPLES):
        clock.on_packet("c", packet(k, 1000.0 + 0.1 * k))
        clock.on_packet("c", packet(10_000 + k, None))  # before a sender report: no time
    for k in range(MIN_SAMPLES):
        clock.on_frame("c", k, 50.0 + 0.1 * k + 0.25)
        clock.on_frame("c", 10_000 + k, 99.0)  # pictures without a sender time: not counted
        clock.on_frame("c", None, 99.0)
    assert clock.delay.median() == pytest.approx(50.25 - 1000.0)
    clock.on_stream("c", PARAMS)  # a new connection: a new path
    assert clock.delay.median() is None


def test_only_recent_packets_wait_for_their_picture() -> None:
    clock = DetectClock()
    for k in range(200):
        clock.on_packet("c", packet(k, 1000.0 + k))
    clock.on_frame("c", 0, 5.0)  # its packet was forgotten long ago
    assert len(clock._sent) <= 64 and 0 not in clock._sent


def test_the_offset_is_the_record_delay_less_the_detect_delay_once_both_are_measured() -> None:
    record, detect = StreamDelay(), StreamDelay()
    for k in range(MIN_SAMPLES):
        record.add(10.0 + k + 0.7, 1000.0 + k)
    assert record_offset(record, detect) is None
    for k in range(MIN_SAMPLES):
        detect.add(10.0 + k + 0.2, 1000.0 + k)
    assert record_offset(record, detect) == pytest.approx(0.5)


def test_an_offset_no_two_streams_of_one_camera_have_is_not_applied_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = StreamDelay()
    inputs = InputOffset("hall", record)
    for k in range(MIN_SAMPLES):
        inputs.clock.delay.add(10.0 + k, 1000.0 + k)
        record.add(10.0 + k + MAX_OFFSET_S - 0.5, 1000.0 + k)
    assert inputs.offset() == pytest.approx(MAX_OFFSET_S - 0.5)
    for k in range(3 * MIN_SAMPLES):  # e.g. a restreamer stamping each stream its own way
        record.add(10.0 + k + 40.0, 1000.0 + k)
    with caplog.at_level("WARNING"):
        assert inputs.offset() is None
        assert inputs.offset() is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert "camera hall" in line and "40.0 s off" in line and "by arrival" in line
