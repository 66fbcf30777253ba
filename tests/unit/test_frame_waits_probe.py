"""``--frame-waits``: the probe times frames through a real frame hub, counts the frames
replaced while they waited, and leaves the hub's methods as they were."""

from __future__ import annotations

import threading
import time
import types

import numpy as np

from benchmarks.frame_waits import FrameWaitsProbe, coincidence
from vidpipe.bench.common import PointResult
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.types import Frame


def _frame(camera: str, seq: int, age_s: float) -> Frame:
    image = np.zeros((4, 4, 3), np.uint8)
    return Frame(camera=camera, seq=seq, t_capture=time.monotonic() - age_s, image=image)


def test_frame_waits_times_the_reader_and_the_mailbox() -> None:
    put, take = Mailbox.put, FrameHub.take
    hub = FrameHub()
    dropped: list[Frame] = []
    box = hub.add("a", "newest", dropped.append)
    scheduler = types.SimpleNamespace(_in_backend=0, _cap=2)
    contender = types.SimpleNamespace(daemon=types.SimpleNamespace(scheduler=scheduler))
    probe = FrameWaitsProbe()
    probe.before(contender)
    stop = threading.Event()
    box.put(_frame("a", 0, age_s=0.010), stop)
    box.put(_frame("a", 1, age_s=0.020), stop)  # replaces frame 0 before it was taken
    time.sleep(0.05)
    taken = hub.take(0.1)
    result = PointResult(spec={})
    probe.after(contender, result)
    assert taken is not None and taken.seq == 1 and [f.seq for f in dropped] == [0]
    waits = result.info["frame_waits"]
    assert waits["frames"] == 1 and waits["overwritten_waiting"] == 1
    assert 15.0 <= waits["reader_ms"]["p50"] < 1000.0  # captured 20 ms before it was put
    assert 45.0 <= waits["mailbox_ms"]["p50"] < 1000.0  # waited the 50 ms sleep
    assert sum(waits["samples"].values()) > 0.99  # the sampler ran over the window
    assert (Mailbox.put, FrameHub.take) == (put, take)


def test_frame_waits_leaves_other_contenders_alone() -> None:
    put = Mailbox.put
    probe = FrameWaitsProbe()
    probe.before(types.SimpleNamespace())  # not vidpipe: no daemon
    assert Mailbox.put is put
    result = PointResult(spec={})
    probe.after(types.SimpleNamespace(), result)
    assert "frame_waits" not in result.info


def test_coincidence_tells_cameras_in_step_from_independent_ones() -> None:
    """Ten cameras at 5 fps for 10 s: in step, every frame has the nine others within 10 ms;
    spread evenly over the 200 ms period (20 ms apart), none; the independent figure is the
    rate-based expectation, about the same for both (it knows only the rates and the span)."""
    period, cameras = 0.2, 10
    in_step = [(k * period + 1e-4 * c, f"c{c}") for k in range(50) for c in range(cameras)]
    spread = [(k * period + 0.02 * c, f"c{c}") for k in range(50) for c in range(cameras)]
    together, apart = coincidence(in_step, 0.010), coincidence(spread, 0.010)
    assert together is not None and apart is not None
    assert together["mean"] == 9.0 and together["p95"] == 9.0
    assert apart["mean"] == 0.0
    for figures in (together, apart):  # 9 other cameras x 5 fps x 20 ms = 0.9
        assert 0.85 < figures["independent_mean"] < 0.95
    assert coincidence([(0.0, "a")], 0.010) is None
