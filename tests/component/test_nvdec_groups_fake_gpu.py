"""Read groups through the real capture worker: realtime NVDEC file cameras read by shared
threads (``capture.nvdec_group_size``), over a fake PyNvVideoCodec (no GPU here).

The worker, mailbox, backoff, watchdog and metrics are the production ones; the decoder
library is the fake of ``tests/unit/test_nvdec_fake_gpu.py`` (packet ``k`` decodes to frame
``k``, 25 fps). Each test's cameras share a capture context of their own, so the groups'
thread names and counts are the test's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.component.capture_rig import until
from tests.unit.test_nvdec_fake_gpu import FakeCodec
from vidpipe.capture import CaptureWorker
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.group import ReadGroups
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import CameraState, DeviceImage, Frame

W, H = 8, 6

GROUPED = CaptureConfig(
    decoder="nvdec",
    nvdec_group_size=3,
    backoff_initial_s=0.05,
    backoff_max_s=0.1,
    stall_timeout_s=2.0,
    open_timeout_ms=500,
    read_timeout_ms=500,
)


class Cameras:
    """Workers over realtime looping fake-NVDEC file cameras, one codec each, their frames
    taken by a consumer thread that can be paused (its mailboxes then overwrite frames)."""

    def __init__(
        self, codecs: dict[str, FakeCodec], context: CaptureContext, **camera: Any
    ) -> None:
        self.codecs = codecs
        self.metrics = Metrics()
        self.hub = FrameHub()
        self.frames: list[Frame] = []
        self.read_threads: set[str] = set()
        self.reads: dict[str, list[int]] = {name: [] for name in codecs}  # decoded, in order
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._consumer = threading.Thread(target=self._consume, daemon=True)
        self.boxes, self.workers = {}, {}
        for name in codecs:
            cam = CameraConfig(
                name=name, url=f"file:///clips/{name}.mp4", realtime=True, loop=True, **camera
            )
            cm = self.metrics.camera(name)
            box = self.hub.add(name, "newest", lambda _f, cm=cm: cm.drop("overwritten"))
            self.boxes[name] = box
            self.workers[name] = CaptureWorker(cam, GROUPED, box, cm, context=context)

    def source(
        self, cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext
    ) -> NvdecSource:
        def surface(k: int) -> np.ndarray:
            self.read_threads.add(threading.current_thread().name)
            self.reads[cam.name].append(k)
            return np.full((H * 3 // 2, W), k % 256, np.uint8)

        codec = self.codecs[cam.name]
        reader = NvdecReader(cam.url, codec=codec, to_tensor=surface)
        return NvdecSource(
            cam,
            defaults,
            shared=ctx.shared(NvdecShared),
            reader=reader,
            own_copy=lambda s: (np.copy(s), None),
        )

    def _consume(self) -> None:
        while not self._stop.is_set():
            if self.paused.is_set():
                time.sleep(0.01)
                continue
            frame = self.hub.take(0.02)
            if frame is not None:
                self.frames.append(frame)

    def __enter__(self) -> Cameras:
        self._consumer.start()
        for w in self.workers.values():
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers.values():
            w.stop()
        for w in self.workers.values():
            assert w.join(5.0), f"camera {w.name}: a reader never came back from its group"
        self._stop.set()
        self._consumer.join(2.0)

    def of(self, name: str) -> list[int]:
        return [_tag(f) for f in list(self.frames) if f.camera == name]

    def sample(self, metric: str, camera: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(metric, {"camera": camera, **labels})
        return value or 0.0


def _tag(frame: Frame) -> int:
    assert isinstance(frame.image, DeviceImage)
    return int(frame.image.nv12[0, 0])


@pytest.fixture
def context() -> CaptureContext:
    return CaptureContext()


@pytest.fixture
def groups(context: CaptureContext) -> Iterator[ReadGroups]:
    yield context.groups


def _install(monkeypatch: pytest.MonkeyPatch, cams: Cameras) -> None:
    monkeypatch.setitem(CAPTURE_DECODERS.factories, "nvdec", DecoderKind(cams.source))


def _group_threads_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("capture-group-")]


@pytest.mark.timeout(30)
def test_five_cameras_are_read_by_two_group_threads_in_order_fake_gpu(
    groups: ReadGroups, context: CaptureContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    cams = Cameras({f"cam{i}": FakeCodec(packets=6, delay=1) for i in range(5)}, context)
    _install(monkeypatch, cams)
    with cams:
        until(lambda: all(len(cams.of(n)) >= 8 for n in cams.codecs))
        assert sorted(groups.members()) == [2, 3], "3 cameras per group at most"
        assert all(w.state is CameraState.STREAMING for w in cams.workers.values())
    assert cams.read_threads <= {"capture-group-0", "capture-group-1"}, cams.read_threads
    for name, codec in cams.codecs.items():
        assert cams.reads[name][:8] == [0, 1, 2, 3, 4, 5, 0, 1], f"{name}: each pass in order"
        taken = cams.of(name)  # a busy machine may overwrite one in the mailbox, never reorder
        assert taken[:3] == sorted(taken[:3]) and len(set(taken)) == 6, name
        assert codec.decoders == 1, "each pass on the camera's one decoder (rewind)"
    until(lambda: not _group_threads_alive())  # every member left: the threads end
    assert groups.members() == [0, 0]


@pytest.mark.timeout(30)
def test_a_broken_camera_reconnects_while_its_group_keeps_reading_fake_gpu(
    groups: ReadGroups, context: CaptureContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    codecs = {
        # 40 rejected packets in a row exceed the reader's limit: read_failed, backoff, reopen
        "broken": FakeCodec(packets=60, delay=0, bad=set(range(3, 43))),
        "fine1": FakeCodec(packets=5, delay=0),
        "fine2": FakeCodec(packets=5, delay=0),
    }
    cams = Cameras(codecs, context)
    _install(monkeypatch, cams)
    with cams:
        until(
            lambda: cams.sample("vidpipe_camera_errors_total", "broken", reason="read_failed") >= 2
        )
        until(lambda: cams.sample("vidpipe_camera_reconnects_total", "broken") >= 2)
        before = {n: len(cams.of(n)) for n in ("fine1", "fine2")}
        until(lambda: all(len(cams.of(n)) >= before[n] + 10 for n in before))
    assert len(groups.groups) == 1, "the reconnecting camera came back to its group"
    assert cams.reads["broken"][:6] == [0, 1, 2, 0, 1, 2], "each session reads from the start"
    assert len(codecs["broken"].opened) >= 2
    for name in ("fine1", "fine2"):
        assert cams.sample("vidpipe_camera_errors_total", name, reason="read_failed") == 0
        assert cams.reads[name][:10] == [0, 1, 2, 3, 4] * 2
    until(lambda: not _group_threads_alive())


@pytest.mark.timeout(30)
def test_open_failures_back_off_without_a_group_slot_fake_gpu(
    groups: ReadGroups, context: CaptureContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    codecs = {"down": FakeCodec(packets=4, delay=0), "up": FakeCodec(packets=4, delay=0)}
    codecs["down"].fail_open = RuntimeError("no such file")
    cams = Cameras(codecs, context)
    _install(monkeypatch, cams)
    with cams:
        until(lambda: cams.sample("vidpipe_camera_errors_total", "down", reason="open_failed") >= 2)
        assert groups.members() == [1], "a camera that cannot open holds no place in a group"
        codecs["down"].fail_open = None
        until(lambda: len(cams.reads["down"]) >= 4)
        until(lambda: groups.members() == [2])
    assert cams.reads["down"][:4] == [0, 1, 2, 3]
    up = cams.reads["up"]
    assert len(up) >= 4 and up == ([0, 1, 2, 3] * len(up))[: len(up)], "never held up"


@pytest.mark.timeout(30)
def test_drop_accounting_adds_up_in_a_group_fake_gpu(
    groups: ReadGroups, context: CaptureContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every frame a grouped camera decodes is taken, overwritten in its mailbox, left
    unmade while its last frame waited (``mailbox_full``), decimated, or still waiting at the
    end: the same accounting as a camera with a thread of its own."""
    cams = Cameras(
        {f"cam{i}": FakeCodec(packets=7, delay=1) for i in range(4)}, context, detect_fps=10
    )
    _install(monkeypatch, cams)
    with cams:
        until(lambda: all(len(cams.of(n)) >= 3 for n in cams.codecs))
        cams.paused.set()  # the consumer stops taking: mailboxes overwrite
        until(
            lambda: all(
                cams.sample("vidpipe_frames_dropped_total", n, reason="overwritten") >= 3
                for n in cams.codecs
            )
        )
        cams.paused.clear()
        until(lambda: all(len(cams.of(n)) >= 8 for n in cams.codecs))
    assert cams.read_threads <= {"capture-group-0", "capture-group-1"}, cams.read_threads
    for name in cams.codecs:
        captured = cams.sample("vidpipe_frames_captured_total", name)
        decimated = cams.sample("vidpipe_frames_dropped_total", name, reason="decimated")
        overwritten = cams.sample("vidpipe_frames_dropped_total", name, reason="overwritten")
        unmade = cams.sample("vidpipe_frames_dropped_total", name, reason="mailbox_full")
        waiting = 1 if cams.boxes[name].clear() is not None else 0
        assert decimated > 0 and overwritten > 0 and unmade > 0
        shed = overwritten + unmade
        assert captured == len(cams.of(name)) + decimated + shed + waiting, name
