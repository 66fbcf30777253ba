"""The in-flight cap: one request per stream, then one queued per two cameras per stream.

Real OpenVINO request pool and the real model; frames are fed through ``Scheduler.submit``
(the scheduler thread's path), and the requests in flight are read at every submission.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.component.test_scheduler import make_engine
from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.openvino import OpenVINOBackend
from vidpipe.schedule.scheduler import Scheduler
from vidpipe.types import Frame

pytestmark = pytest.mark.timeout(120)

_IMAGE = np.full((240, 320, 3), 90, np.uint8)


def _engine(assets_dir, cfg: OpenVINOConfig) -> tuple[Scheduler, OpenVINOBackend, list[int]]:
    backend = OpenVINOBackend(assets_dir / "models" / "yolox_nano.onnx", cfg)
    seen: list[int] = []  # requests in flight right after each submission
    submit = backend.submit

    def counting_submit(*args, **kwargs):  # type: ignore[no-untyped-def]
        submit(*args, **kwargs)
        seen.append(backend.in_flight())

    backend.submit = counting_submit  # type: ignore[method-assign]
    done: list[str] = []
    engine, _ = make_engine(backend, assets_dir, lambda r: done.append(r.camera))
    engine.start()
    return engine, backend, seen


def _feed(engine: Scheduler, cameras: int, frames: int) -> None:
    for i in range(frames):
        frame = Frame(f"cam{i % cameras}", i // cameras, time.monotonic(), _IMAGE)
        assert engine.submit(frame)


def test_one_camera_keeps_one_request_per_stream_in_flight(assets_dir) -> None:
    engine, backend, seen = _engine(assets_dir, OpenVINOConfig())
    try:
        floor = backend.in_flight_floor
        assert floor is not None
        assert floor == min(backend.info.streams, backend.capacity)
        assert engine.in_flight_cap("cam0") == floor
        _feed(engine, 1, 40)
        assert engine.stop(30)
    finally:
        engine.close(10)
    assert len(seen) == 40
    assert max(seen) <= floor


def test_more_cameras_than_streams_queue_one_request_behind_them(assets_dir) -> None:
    engine, backend, seen = _engine(assets_dir, OpenVINOConfig())
    try:
        floor = backend.in_flight_floor
        assert floor is not None
        n = floor + 1
        for i in range(n):
            cap = engine.in_flight_cap(f"cam{i}")
        assert cap == min(backend.capacity, floor + 1)  # every camera submitted in the window
        _feed(engine, n, 30 * n)
        assert engine.stop(60)
    finally:
        engine.close(10)
    assert max(seen) == min(backend.capacity, floor + 1)  # reached, never passed


def test_a_camera_gone_quiet_no_longer_counts(assets_dir, monkeypatch) -> None:
    import vidpipe.schedule.inflight as inflight

    engine, backend, _ = _engine(assets_dir, OpenVINOConfig())
    try:
        floor = backend.in_flight_floor or 0
        for i in range(backend.capacity):
            engine.in_flight_cap(f"cam{i}")
        monkeypatch.setattr(inflight, "ACTIVE_WINDOW_S", 0.0)
        time.sleep(0.01)
        assert engine.in_flight_cap("cam0") == floor
    finally:
        engine.close(10)


def test_an_explicit_request_count_is_not_capped(assets_dir) -> None:
    engine, backend, seen = _engine(
        assets_dir, OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=3))
    )
    try:
        assert backend.in_flight_floor is None
        assert engine.in_flight_cap("cam0") == 3
        _feed(engine, 1, 60)
        assert engine.stop(30)
    finally:
        engine.close(10)
    assert max(seen) == 3


def test_the_latency_hint_keeps_one_request_in_flight_and_letterboxes_into_a_second(
    assets_dir,
) -> None:
    """One stream on every core: a pool of 2 (one in flight, one being filled), and file
    cameras' decodes wait for the inference instead of running beside it."""
    engine, backend, seen = _engine(assets_dir, OpenVINOConfig(hint="latency"))
    try:
        assert backend.info.streams == 1 and backend.capacity == 2
        assert backend.hints.uses_every_core
        assert engine.turn_clock is not None and not engine.turn_clock.decode_beside
        assert engine.in_flight_cap("cam0") == 1
        _feed(engine, 1, 20)
        assert engine.stop(30)
    finally:
        engine.close(10)
    assert len(seen) == 20 and max(seen) == 1


def test_the_throughput_hint_decodes_beside_inference(assets_dir) -> None:
    engine, backend, _ = _engine(assets_dir, OpenVINOConfig(hint="throughput"))
    try:
        streams = backend.info.streams
        assert backend.hints.uses_every_core == (streams == 1)  # a 1-core machine has one stream
        assert engine.turn_clock is not None
        assert engine.turn_clock.decode_beside == (streams > 1)
    finally:
        engine.close(10)
