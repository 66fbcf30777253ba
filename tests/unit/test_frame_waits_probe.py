"""``--frame-waits``: the probe times frames through a real frame hub, counts the frames
replaced while they waited, and leaves the hub's methods as they were."""

from __future__ import annotations

import threading
import time
import types

import numpy as np

from benchmarks.frame_waits import FrameWaitsProbe
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
