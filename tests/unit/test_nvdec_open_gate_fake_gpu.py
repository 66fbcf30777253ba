"""The NVDEC start-up gate (``capture.nvdec_open_concurrency``) on CPU, with fake readers.

Each camera is a real ``NvdecSource`` over a fake reader (no GPU, no PyNvVideoCodec): its
``open`` starts the camera, and its first ``read`` waits until the test lets it decode frame
0. The fakes record which cameras are between open and their first frame, so the tests see
how many start at once. Every test's cameras share a gate of their own (one ``NvdecShared``,
as the cameras of one pipeline do), so a turn leaked by another test cannot hide or cause a
failure here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from vidpipe.capture.nvdec import NvdecError, NvdecInfo, NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.capture.open_gate import OpenGate
from vidpipe.capture.source import SourceError
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.types import DeviceImage

W, H = 8, 6


def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


class Starts:
    """Which fake cameras are between the start of their open and their first frame."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now: set[str] = set()
        self.peak = 0

    def begin(self, name: str) -> None:
        with self._lock:
            self.now.add(name)
            self.peak = max(self.peak, len(self.now))

    def end(self, name: str) -> None:
        with self._lock:
            self.now.discard(name)


class FakeStartingReader(NvdecReader):
    """Stands in for a camera's NVDEC reader: ``open`` starts it (or fails as told), the first
    ``read`` waits for ``go`` and then decodes frame 0."""

    def __init__(self, name: str, starts: Starts, fail: str | None = None) -> None:
        super().__init__(f"file:///clips/{name}.mp4", codec=object())
        self.name, self.starts, self.fail = name, starts, fail
        self.go = threading.Event()

    def open(self) -> NvdecInfo:
        self.starts.begin(self.name)
        if self.fail == "error":
            self.starts.end(self.name)
            raise NvdecError("fake: the decoder could not be created")
        return NvdecInfo(0 if self.fail == "no video" else W, H, 25.0)

    def read(self) -> Any:
        assert self.go.wait(10.0), "the test never let this camera decode"
        self.starts.end(self.name)
        return np.zeros((H * 3 // 2, W), np.uint8)

    def close(self) -> None:
        self.starts.end(self.name)


@pytest.fixture
def shared() -> NvdecShared:
    return NvdecShared()


@pytest.fixture
def gate(shared: NvdecShared) -> Iterator[OpenGate]:
    yield shared.opening


def _camera(
    name: str, starts: Starts, limit: int, shared: NvdecShared, fail: str | None = None
) -> tuple[NvdecSource, FakeStartingReader]:
    reader = FakeStartingReader(name, starts, fail)
    cam = CameraConfig(name=name, url=reader.url, decoder="nvdec")
    defaults = CaptureConfig(decoder="nvdec", nvdec_open_concurrency=limit)
    source = NvdecSource(
        cam, defaults, shared=shared, reader=reader, own_copy=lambda s: (np.copy(s), None)
    )
    return source, reader


def _start_in_thread(source: NvdecSource, out: dict[str, Any], name: str) -> threading.Thread:
    """Open and read the first frame on a thread of its own; the frame or error in ``out``."""

    def start() -> None:
        try:
            source.open()
            picture = source.read()
            out[name] = None if picture is None else picture.image()  # copied, as the worker
        except SourceError as exc:
            out[name] = exc

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(20)
def test_two_of_five_fake_cameras_start_at_once_and_all_five_get_a_first_frame_fake_gpu(
    gate: OpenGate, shared: NvdecShared
) -> None:
    starts = Starts()
    cameras = [_camera(f"cam{i}", starts, limit=2, shared=shared) for i in range(5)]
    frames: dict[str, Any] = {}
    threads = [_start_in_thread(src, frames, reader.name) for src, reader in cameras]
    _until(lambda: gate.opening == 2 and gate.waiting == 3)
    assert len(starts.now) == 2, "two cameras started, three wait their turn"
    for _, reader in cameras:
        reader.go.set()
    for thread in threads:
        thread.join(5.0)
        assert not thread.is_alive()
    assert sorted(frames) == [f"cam{i}" for i in range(5)]
    assert all(isinstance(f, DeviceImage) for f in frames.values()), frames
    assert starts.peak == 2, "never more than the limit between open and first frame"
    assert (gate.opening, gate.waiting) == (0, 0), "every turn given back"
    for src, _ in cameras:
        src.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("fail", "reason"), [("error", "open_failed"), ("no video", "no_frames")])
def test_a_failed_open_gives_its_turn_to_the_next_fake_camera_fake_gpu(
    gate: OpenGate, shared: NvdecShared, fail: str, reason: str
) -> None:
    starts = Starts()
    bad, _ = _camera("bad", starts, limit=1, shared=shared, fail=fail)
    good, good_reader = _camera("good", starts, limit=1, shared=shared)
    with pytest.raises(SourceError) as raised:
        bad.open()
    assert raised.value.reason == reason
    assert (gate.opening, gate.waiting) == (0, 0), "the failed open kept its turn"
    good_reader.go.set()
    out: dict[str, Any] = {}
    _start_in_thread(good, out, "good").join(5.0)
    assert isinstance(out.get("good"), DeviceImage), out
    good.close()


@pytest.mark.timeout(20)
def test_closing_fake_cameras_that_wait_or_hold_their_turn_frees_every_turn_fake_gpu(
    gate: OpenGate, shared: NvdecShared
) -> None:
    starts = Starts()
    holder, _ = _camera("holder", starts, limit=1, shared=shared)
    holder.open()  # holds the one turn until its first read, or its close
    waiter, _ = _camera("waiter", starts, limit=1, shared=shared)
    out: dict[str, Any] = {}
    thread = _start_in_thread(waiter, out, "waiter")
    _until(lambda: gate.waiting == 1)
    waiter.close()  # from another thread, while its open waits
    thread.join(5.0)
    assert not thread.is_alive(), "a closed camera stops waiting"
    assert isinstance(out["waiter"], SourceError) and "waiting" in out["waiter"].detail
    assert (gate.opening, gate.waiting) == (1, 0)
    holder.close()  # never got a frame
    assert (gate.opening, gate.waiting) == (0, 0), "no turn leaked"
    fresh, fresh_reader = _camera("fresh", starts, limit=1, shared=shared)
    fresh_reader.go.set()
    _start_in_thread(fresh, out, "fresh").join(5.0)
    assert isinstance(out.get("fresh"), DeviceImage), "the next camera starts at once"
    fresh.close()


@pytest.mark.timeout(20)
def test_a_cancelled_wait_ends_and_an_abandoned_holder_stops_counting_fake_gpu(
    gate: OpenGate, shared: NvdecShared
) -> None:
    starts = Starts()
    (a, _), (b, _), (c, _) = (_camera(n, starts, limit=1, shared=shared) for n in "abc")
    cancel_a, cancel_b, cancel_c = threading.Event(), threading.Event(), threading.Event()
    assert a.wait_turn(cancel_a)
    result: dict[str, bool] = {}

    def wait(name: str, source: NvdecSource, cancel: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=lambda: result.update({name: source.wait_turn(cancel)}))
        thread.start()
        return thread

    waiting_b = wait("b", b, cancel_b)
    _until(lambda: gate.waiting == 1)
    cancel_b.set()  # the worker stopped while b waited
    waiting_b.join(2.0)
    assert result == {"b": False} and gate.waiting == 0
    waiting_c = wait("c", c, cancel_c)
    _until(lambda: gate.waiting == 1)
    cancel_a.set()  # the watchdog abandoned a, whose reader may be stuck in the driver
    waiting_c.join(2.0)
    assert result["c"] is True, "an abandoned holder no longer holds up the others"
    for source in (a, b, c):
        source.close()
    assert (gate.opening, gate.waiting) == (0, 0)


@pytest.mark.timeout(20)
def test_turns_go_in_arrival_order() -> None:
    gate = OpenGate()
    first = gate.permit(1)
    assert first.wait()
    order: list[str] = []
    threads = []
    for name in ("second", "third"):
        permit = gate.permit(1)
        thread = threading.Thread(target=lambda p=permit, n=name: p.wait() and order.append(n))
        thread.start()
        threads.append((thread, permit))
        queued = len(threads)  # one at a time: the order they arrive in is known
        _until(lambda n=queued: gate.waiting == n)
    first.release()
    _until(lambda: order == ["second"])
    assert gate.waiting == 1, "the third waits for the second"
    threads[0][1].release()
    _until(lambda: order == ["second", "third"])
    threads[1][1].release()
    first.release()  # twice: idempotent
    assert (gate.opening, gate.waiting) == (0, 0)


def test_a_gate_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        OpenGate().permit(0)
    with pytest.raises(ValueError, match="nvdec_open_concurrency"):
        CaptureConfig(nvdec_open_concurrency=0)


def test_cameras_share_a_gate_only_within_one_capture_context() -> None:
    from vidpipe.capture.decoders import CaptureContext

    one, two = CaptureContext(), CaptureContext()
    assert one.shared(NvdecShared) is one.shared(NvdecShared), "one pipeline: one gate"
    assert one.shared(NvdecShared).opening is not two.shared(NvdecShared).opening
    assert one.groups is not two.groups
    cam = CameraConfig(name="a", url="file:///clips/a.mp4", decoder="nvdec")
    alone = NvdecSource(cam, CaptureConfig(decoder="nvdec"))
    assert alone._shared is not NvdecSource(cam, CaptureConfig(decoder="nvdec"))._shared
