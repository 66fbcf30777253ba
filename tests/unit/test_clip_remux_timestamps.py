"""Placing packets that come without timestamps (``vidpipe.capture.remux.timestamps``).

The packets are those PyAV handed over at the start of a real RTSP session of the walkway
camera (10 fps, time base 1/90000, B-frames): the keyframe with neither pts nor dts, the next
few without dts.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from vidpipe.capture.remux import from_keyframe, timestamps
from vidpipe.capture.source import StreamParams, TapPacket

TB = Fraction(1, 90000)
PARAMS = StreamParams("h264", b"", 768, 432, "yuv420p", TB, Fraction(10))
SESSION_START = [  # (pts, dts, keyframe), in the order they were demuxed
    (None, None, True),
    (45000, None, False),
    (18000, None, False),
    (27000, None, False),
    (36000, None, False),
    (81000, None, False),
    (54000, 54000, False),
    (63000, 63000, False),
    (72000, 72000, False),
    (90000, 81000, False),
    (99000, 90000, True),
    (135000, 99000, False),
    (108000, 108000, False),
]


def packets(
    rows: list[tuple[int | None, int | None, bool]], duration: int = 9000
) -> list[TapPacket]:
    return [TapPacket(b"x", p, d, duration, TB, k, i / 10) for i, (p, d, k) in enumerate(rows)]


def muxable(stamps: list[tuple[int, int]]) -> bool:
    dts = [d for _, d in stamps]
    return all(d <= p for p, d in stamps) and all(a < b for a, b in itertools.pairwise(dts))


def test_session_start_gets_the_timestamps_the_stream_implies() -> None:
    stamps = timestamps(packets(SESSION_START), PARAMS)
    assert muxable(stamps)
    # the keyframe is shown a frame before the earliest picture after it: every frame of the
    # second is there once
    assert sorted(p for p, _ in stamps[:10]) == list(range(9000, 99000, 9000))
    # the camera's own timestamps are kept (the dts it gave are the ones derived)
    assert [p for p, _ in stamps[1:]] == [p for p, _, _ in SESSION_START[1:]]
    assert [d for _, d in stamps[6:]] == [d for _, d, _ in SESSION_START[6:]]


def test_complete_timestamps_are_kept_as_they_are() -> None:
    rows = [(p + 9000, p, k) for p, _, k in ((i * 9000, None, i % 10 == 0) for i in range(30))]
    stamps = timestamps(packets(rows), PARAMS)
    assert stamps == [(p, d) for p, d, _ in rows]


def test_without_durations_the_frame_rate_gives_the_step() -> None:
    stamps = timestamps(packets(SESSION_START, duration=0), PARAMS)
    assert muxable(stamps) and stamps[0][0] == 9000


def test_a_clip_starts_at_its_first_keyframe() -> None:
    assert from_keyframe(packets(SESSION_START[1:10])) == []
    assert from_keyframe(packets(SESSION_START[5:]))[0].pts == 99000


def test_no_dts_at_all_still_gives_muxable_timestamps() -> None:
    rows = [(p, None, k) for p, _, k in SESSION_START]
    stamps = timestamps(packets(rows), PARAMS)
    assert muxable(stamps)
    assert [p for p, _ in stamps[1:]] == [p for p, _, _ in rows[1:]]
