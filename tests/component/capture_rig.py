"""Shared rig for capture tests: real workers, a real FrameHub, real metrics."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from vidpipe.capture import ALLOWED_TRANSITIONS, CaptureWorker
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub, Policy
from vidpipe.types import CameraState, Frame

S = CameraState
CAR = "car-detection"  # 377 frames, 12.5 fps, 768x432, keyframe every 4.8 s
PERSON = "one-by-one-person-detection"  # 10 fps, keyframe every second: quick RTSP joins
CAR_FRAMES = 377

FAST = CaptureConfig(
    open_timeout_ms=1500,
    read_timeout_ms=1500,
    stall_timeout_s=2.0,
    backoff_initial_s=0.2,
    backoff_max_s=1.0,
    decoder_threads=1,
)


# -- helpers ---------------------------------------------------------------------------------


@dataclass
class StateLog:
    """Every state change of a worker, with the time it happened."""

    changes: list[tuple[float, CameraState]] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, _camera: str, state: CameraState) -> None:
        with self.cond:
            self.changes.append((time.monotonic(), state))
            self.cond.notify_all()

    def states(self) -> list[CameraState]:
        with self.cond:
            return [s for _, s in self.changes]

    def wait_for(self, state: CameraState, timeout_s: float, after: int = 0) -> float:
        """Time of the first change to ``state`` at index >= ``after``; fails on timeout."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                for t, s in self.changes[after:]:
                    if s is state:
                        return t
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"no {state.name} within {timeout_s} s; saw {self.states()}")
                self.cond.wait(left)

    def assert_legal(self) -> None:
        states = self.states()
        for old, new in itertools.pairwise(states):
            assert new in ALLOWED_TRANSITIONS[old], f"{old.name} -> {new.name} in {states}"


class Collector:
    """Takes frames from a FrameHub on its own thread, like the preprocessing stage does."""

    def __init__(self, hub: FrameHub, take_interval_s: float = 0.0) -> None:
        self.hub = hub
        self.frames: dict[str, list[Frame]] = {}
        self.take_interval_s = take_interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="test-collector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            frame = self.hub.take(0.05)
            if frame is not None:
                with self._lock:
                    self.frames.setdefault(frame.camera, []).append(frame)
                if self.take_interval_s:
                    self._stop.wait(self.take_interval_s)

    def of(self, camera: str) -> list[Frame]:
        with self._lock:
            return list(self.frames.get(camera, []))

    def wait_count(self, camera: str, n: int, timeout_s: float) -> list[Frame]:
        deadline = time.monotonic() + timeout_s
        while len(got := self.of(camera)) < n:
            if time.monotonic() > deadline:
                pytest.fail(f"{camera}: {len(got)} of {n} frames within {timeout_s} s")
            time.sleep(0.02)
        return got

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


class Rig:
    """Real Metrics, a real FrameHub and the workers under test; cleans up after itself."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.hub = FrameHub()
        self.workers: list[CaptureWorker] = []
        self.collector = Collector(self.hub)

    def worker(
        self,
        name: str,
        url: str,
        policy: Policy,
        capture: CaptureConfig = FAST,
        **camera: object,
    ) -> tuple[CaptureWorker, StateLog]:
        cm = self.metrics.camera(name)
        box = self.hub.add(name, policy, lambda _f: cm.drop("overwritten"))
        states = StateLog()
        cfg = CameraConfig.model_validate({"name": name, "url": url, **camera})
        worker = CaptureWorker(cfg, capture, box, cm, on_state=states)
        self.workers.append(worker)
        return worker, states

    def value(self, metric: str, **labels: str) -> float:
        got = self.metrics.registry.get_sample_value(metric, labels)
        return 0.0 if got is None else float(got)

    def errors(self, camera: str, reason: str) -> float:
        return self.value("vidpipe_camera_errors_total", camera=camera, reason=reason)

    def close(self, join_timeout_s: float = 15.0) -> None:
        for w in self.workers:
            w.stop()
        ended = [w.join(join_timeout_s) for w in self.workers]
        self.collector.close()
        assert all(ended), [w.stats() for w in self.workers]
        for w in self.workers:
            assert w.failure is None, w.failure
            assert w.state is S.STOPPED


def capture_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("capture-")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until ``check()`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
