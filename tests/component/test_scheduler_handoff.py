"""The hand-off between file readers and the scheduler: how far readers decode ahead.

Real threads play the capture readers (``wait_empty`` -> decode -> ``put``) and the scheduler
(``take``), as ``CaptureWorker`` and ``Scheduler`` call them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pytest

from tests.component.test_scheduler import make_engine
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.types import Frame

pytestmark = pytest.mark.timeout(60)

_IMAGE = np.zeros((4, 4, 3), np.uint8)


class Readers:
    """``n`` block-policy readers; counts how many hold a turn (decoding or decoded) at once."""

    def __init__(self, hub: FrameHub, n: int, decode_s: float = 0.002) -> None:
        self.hub = hub
        self.stop = threading.Event()
        self.boxes = [hub.add(f"cam{i}", "block", lambda f: None) for i in range(n)]
        self.decode_s = decode_s
        self.lock = threading.Lock()
        self.holding = 0
        self.most_holding = 0
        self.threads = [
            threading.Thread(target=self._read, args=(box,), daemon=True) for box in self.boxes
        ]

    def _read(self, box: Mailbox) -> None:
        seq = 0
        while box.wait_empty(self.stop):
            with self.lock:
                self.holding += 1
                self.most_holding = max(self.most_holding, self.holding)
            time.sleep(self.decode_s)  # decoding
            if not box.put(Frame(box.camera, seq, time.monotonic(), _IMAGE), self.stop):
                return
            seq += 1

    def taken(self) -> None:
        with self.lock:
            self.holding -= 1

    def __enter__(self) -> Readers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)


def counted_take(hub: FrameHub, readers: Readers, timeout_s: float) -> Frame | None:
    """``hub.take``, with the count lowered before the hub's lock is let go: a reader that
    the take lets in cannot count itself before the taken frame is uncounted."""
    with hub.lock:
        frame = hub._take_locked()
        if frame is None and hub.ready.wait(timeout_s):
            frame = hub._take_locked()
        if frame is not None:
            readers.taken()
        return frame


def consume(readers: Readers, frames: int, infer_s: float = 0.001) -> Counter[str]:
    per_camera: Counter[str] = Counter()
    while sum(per_camera.values()) < frames:
        frame = counted_take(readers.hub, readers, 1.0)
        assert frame is not None, "the scheduler got no frame for 1 s"
        per_camera[frame.camera] += 1
        time.sleep(infer_s)
    return per_camera


def test_ahead_limit_caps_frames_decoded_ahead_and_every_camera_gets_turns() -> None:
    hub = FrameHub()
    hub.set_ahead_limit(2)
    with Readers(hub, 6) as readers:
        per_camera = consume(readers, 300)
    assert readers.most_holding <= 2
    # turns go in the order they were asked for: each camera gets its share (50 each)
    assert set(per_camera) == {f"cam{i}" for i in range(6)}
    assert min(per_camera.values()) >= 40, per_camera


def test_without_a_limit_every_file_camera_decodes_ahead() -> None:
    """The old behaviour, kept for ``set_ahead_limit(None)``; it also shows the test above can
    fail: with a slow consumer all 6 readers hold a decoded frame."""
    hub = FrameHub()
    with Readers(hub, 6) as readers:
        consume(readers, 60, infer_s=0.01)
    assert readers.most_holding == 6


def test_a_turn_that_yields_no_frame_stops_counting_after_a_while() -> None:
    """A reader that got a turn and then failed (or backs off) must not hold the others."""
    hub = FrameHub()
    hub.set_ahead_limit(1)
    stop = threading.Event()
    dead = hub.add("dead", "block", lambda f: None)
    assert dead.wait_empty(stop)  # got the turn, never puts
    live = hub.add("live", "block", lambda f: None)
    t0 = time.monotonic()
    assert live.wait_empty(stop)
    waited = time.monotonic() - t0
    assert 0.5 <= waited <= 3.0, waited
    # asking again before put keeps the same turn: a reopened file does not queue again
    assert live.wait_empty(stop)


def test_a_stopped_reader_leaves_the_queue() -> None:
    hub = FrameHub()
    hub.set_ahead_limit(1)
    stop_a, stop_b = threading.Event(), threading.Event()
    a = hub.add("a", "block", lambda f: None)
    b = hub.add("b", "block", lambda f: None)
    c = hub.add("c", "block", lambda f: None)
    assert a.wait_empty(stop_a)
    stop_b.set()
    assert not b.wait_empty(stop_b)  # queued behind a, then gave up
    a.put(Frame("a", 0, time.monotonic(), _IMAGE), stop_a)
    assert hub.take(1.0) is not None
    assert c.wait_empty(threading.Event())  # b is not in the way


def test_the_hub_times_only_the_waits_for_frames() -> None:
    """``waited_s`` (what the share of groups decoded in full reads, capture/group_budget.py)
    grows while a scheduler waits in ``take`` with no frame, and not when a frame waits."""
    hub = FrameHub()
    box = hub.add("a", "newest", lambda f: None)
    assert box.wait_clock is hub
    stop = threading.Event()
    before = hub.waited_s
    assert hub.take(0.05) is None
    waited = hub.waited_s
    assert waited > before
    box.put(Frame(camera="a", seq=0, t_capture=time.monotonic(), image=_IMAGE), stop)
    assert hub.take(0.05) is not None
    assert hub.waited_s == waited  # a frame was there: no wait


class _LateLock:
    """A lock its holder keeps ``hold_s`` past a frame's hand-over (0: none): the woken
    scheduler waits to run again, as it waits for the GIL behind a hundred busy reader
    threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hold_s = 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        if self.hold_s:
            time.sleep(self.hold_s)
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_wait_ends_when_its_frame_comes_not_when_the_scheduler_runs_again() -> None:
    """``waited_s`` counts the time inference had room: up to the frame's hand-over, not the
    time the woken scheduler then waits to run (the share of groups decoded in full reads it:
    counted, it raised the share exactly while the process fell behind)."""
    hub = FrameHub()
    lock = _LateLock()
    hub.lock, hub.ready = lock, threading.Condition(lock)  # type: ignore[assignment,arg-type]
    box = hub.add("a", "newest", lambda f: None)
    taken: list[Frame | None] = []
    taker = threading.Thread(target=lambda: taken.append(hub.take(5.0)))
    taker.start()
    time.sleep(0.1)  # the scheduler waits
    lock.hold_s = 0.4
    t_put = time.monotonic()
    box.put(Frame(camera="a", seq=0, t_capture=t_put, image=_IMAGE), threading.Event())
    taker.join(5.0)
    assert taken and taken[0] is not None and time.monotonic() - t_put >= 0.4
    assert 0.05 < hub.waited_s < 0.3  # about the 0.1 s before the frame, not 0.5


def test_bad_ahead_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="ahead limit"):
        FrameHub().set_ahead_limit(0)


def test_the_scheduler_limits_file_cameras_decoding_ahead(assets_dir) -> None:
    """With a real OpenVINO request pool: at most ``decode_ahead`` cameras decode ahead."""
    from vidpipe.config import OpenVINOConfig
    from vidpipe.infer.openvino import OpenVINOBackend

    backend = OpenVINOBackend(assets_dir / "models" / "yolox_nano.onnx", OpenVINOConfig())
    hub = FrameHub()
    done: list[str] = []
    engine, _ = make_engine(backend, assets_dir, lambda r: done.append(r.camera))
    assert engine.decode_ahead == max(2, backend.capacity // 2)
    readers = Readers(hub, 6, decode_s=0.0)
    hub.take = lambda timeout_s: counted_take(hub, readers, timeout_s)  # type: ignore[method-assign]
    engine.start(hub)
    with readers:
        deadline = time.monotonic() + 30
        while len(done) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
    engine.close(10)
    assert len(done) >= 60
    assert readers.most_holding <= engine.decode_ahead
    assert len(set(done)) == 6
