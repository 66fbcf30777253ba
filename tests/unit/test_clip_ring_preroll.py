"""The packet ring keeps ``pre_s`` before a trigger even when the trigger is handled late.

A trigger reaches the recorder only after detection: by then the camera has sent newer
packets. The ring must still hold ``pre_s`` seconds before the trigger (back to the keyframe
before them) for as late as the scheduler lets a frame be (``max_frame_age_ms``).

The packets are made here: 10 fps, a keyframe every second, as the walkway camera sends them.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips.ring import PacketRing

FPS = 10
GOP = 10  # frames: a keyframe every second
TB = Fraction(1, 90000)
STEP = 90000 // FPS
PARAMS = StreamParams("h264", b"", 768, 432, "yuv420p", TB, Fraction(FPS))


def packet(i: int) -> TapPacket:
    """Frame ``i`` of the stream, demuxed at ``i / FPS`` s."""
    return TapPacket(b"\0" * 100, i * STEP, i * STEP, STEP, TB, i % GOP == 0, i / FPS)


def shortest_preroll(ring: PacketRing, late_frames: int, pre_s: float) -> float:
    """The shortest pre-roll over triggers at every frame of 4 s (every place in a GOP), each
    handled ``late_frames`` frames after it was captured."""
    ring.on_stream("cam", PARAMS)
    fed = 0
    shortest = float("inf")
    for trigger in range(100, 140):
        while fed <= trigger + late_frames:  # what has arrived when the trigger is handled
            ring.on_packet("cam", packet(fed))
            fed += 1
        t = trigger / FPS
        seg = ring.segment(t - pre_s, t)
        assert seg is not None and seg.packets[0].keyframe
        shortest = min(shortest, t - seg.t_start)
    return shortest


@pytest.mark.parametrize("late_frames", [0, 1, 2, 5, 10])
def test_preroll_is_at_least_pre_s_however_late_the_trigger_is_handled(late_frames: int) -> None:
    pre_s = 3.0
    # a trigger may be handled up to max_frame_age (1 s, the default) after its frame
    ring = PacketRing("cam", pre_s, 64 * 1024 * 1024, latency_s=1.0)
    assert shortest_preroll(ring, late_frames, pre_s) >= pre_s - 1e-9


def test_ring_keeps_no_more_than_pre_s_plus_latency_and_one_gop() -> None:
    ring = PacketRing("cam", 3.0, 64 * 1024 * 1024, latency_s=1.0)
    ring.on_stream("cam", PARAMS)
    for i in range(200):
        ring.on_packet("cam", packet(i))
    kept = ring.segment(0.0, 1e9)
    assert kept is not None
    newest = 199 / FPS
    # back to the keyframe at or before newest - (pre_s + latency), and no further
    assert newest - 4.0 - 1.0 < kept.t_start <= newest - 4.0
