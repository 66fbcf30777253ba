"""NVDEC cameras through the real capture worker, with a fake PyNvVideoCodec (no GPU here).

The worker, its mailbox, backoff, watchdog and metrics are the production ones; only the
decoder library is faked (``tests/unit/test_nvdec_fake_gpu.py``'s fake: packet ``k`` decodes
to frame ``k``). A "device" frame is a numpy NV12 array whose every byte is ``k``. The real
decoder runs in tests/gpu/test_nvdec_gpu.py and tests/gpu/test_nvdec_daemon_gpu.py on the H200.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import cv2
import numpy as np
import pytest

from tests.component.capture_rig import until
from tests.component.test_nvdec_config_fake_gpu import _config
from tests.unit.test_nvdec_fake_gpu import FakeCodec, FakeDecodeError, FakeDemuxer
from vidpipe.capture import CaptureWorker
from vidpipe.capture.decoders import CaptureContext, decoder_kind
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource, nv12_to_bgr
from vidpipe.capture.open_gate import OpenGate, Permit
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import CameraState, DeviceImage, Frame

W, H = 8, 6  # NV12: (H * 3 / 2, W)

FAST = CaptureConfig(
    decoder="nvdec",
    backoff_initial_s=0.05,
    backoff_max_s=0.1,
    stall_timeout_s=0.5,
    open_timeout_ms=500,
    read_timeout_ms=500,
)


def _surface(k: int) -> np.ndarray:
    return np.full((H * 3 // 2, W), k % 256, np.uint8)


class Rig:
    """A worker over one fake-NVDEC camera, its mailbox drained by a consumer thread."""

    def __init__(
        self,
        codec: FakeCodec,
        policy: str = "block",
        defaults: CaptureConfig = FAST,
        context: CaptureContext | None = None,
        **camera: Any,
    ) -> None:
        self.codec = codec
        self.context = CaptureContext() if context is None else context
        self.cam = CameraConfig(name="gpu-cam", url="file:///clips/a.mp4", **camera)
        self.metrics = Metrics()
        self.hub = FrameHub()
        self.frames: list[Frame] = []
        self.states: list[CameraState] = []
        self.box = self.hub.add(self.cam.name, policy, lambda f: None)  # type: ignore[arg-type]
        self._stop = threading.Event()
        self._consumer = threading.Thread(target=self._consume, daemon=True)
        self.worker = CaptureWorker(
            self.cam,
            defaults,
            self.box,
            self.metrics.camera(self.cam.name),
            on_state=lambda _n, s: self.states.append(s),
            context=self.context,
        )

    def _consume(self) -> None:
        while not self._stop.is_set():
            frame = self.hub.take(0.02)
            if frame is not None:
                self.frames.append(frame)

    def __enter__(self) -> Rig:
        self._consumer.start()
        self.worker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        assert self.worker.join(5.0)
        self._stop.set()
        self._consumer.join(2.0)

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, {"camera": self.cam.name, **labels})
        return value or 0.0


@pytest.fixture
def fake_nvdec(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make the ``nvdec`` decoder open its cameras through a fake PyNvVideoCodec (its hooks
    stay the real ones); keyword arguments go to each ``NvdecSource``."""

    def install(codec: FakeCodec, **source: Any) -> None:
        def factory(cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext) -> NvdecSource:
            reader = NvdecReader(cam.url, gpu=cam.gpu or 0, codec=codec, to_tensor=_surface)
            return NvdecSource(
                cam,
                defaults,
                shared=ctx.shared(NvdecShared),
                reader=reader,
                own_copy=lambda s: (np.copy(s), None),
                **source,
            )

        kind = dataclasses.replace(decoder_kind("nvdec"), source=factory)
        monkeypatch.setitem(CAPTURE_DECODERS.factories, "nvdec", kind)

    return install


def _tags(frames: list[Frame]) -> list[int]:
    out = []
    for f in frames:
        assert isinstance(f.image, DeviceImage)
        out.append(int(f.image.nv12[0, 0]))
    return out


@pytest.mark.timeout(20)
def test_file_camera_frames_stay_device_images_in_order_then_eof_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    codec = FakeCodec(packets=12, delay=2)
    fake_nvdec(codec)
    with Rig(codec, gpu=0) as rig:
        until(lambda: rig.worker.state is CameraState.STOPPED)
        until(lambda: len(rig.frames) == 12)
    assert _tags(rig.frames) == list(range(12))
    first = rig.frames[0]
    assert isinstance(first.image, DeviceImage)
    assert (first.width, first.height, first.image.gpu) == (W, H, 0)
    assert rig.sample("vidpipe_frames_captured_total") == 12
    assert CameraState.STREAMING in rig.states
    assert CameraState.BACKOFF not in rig.states, "the end of a file is no error"


@pytest.mark.timeout(20)
def test_looping_file_reopens_with_a_new_epoch_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    codec = FakeCodec(packets=5, delay=1)
    fake_nvdec(codec)
    with Rig(codec, loop=True) as rig:
        until(lambda: len(rig.frames) >= 12)
    assert _tags(rig.frames[:12]) == [0, 1, 2, 3, 4] * 2 + [0, 1]
    epochs = [f.epoch for f in rig.frames[:12]]
    assert epochs[0] != epochs[5] != epochs[10], "each pass is a new epoch (tracks reset)"
    assert len(codec.opened) >= 3
    # Each pass opened the file again, on the one decoder (destroying one holds the GIL).
    assert codec.decoders == 1


@pytest.mark.timeout(20)
def test_open_failure_backs_off_counts_and_recovers_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    codec = FakeCodec(packets=3, delay=0)
    codec.fail_open = RuntimeError("no route to rtsp://admin:s3cret-pw@10.0.0.5/live")
    fake_nvdec(codec)
    with Rig(codec) as rig:
        until(lambda: rig.sample("vidpipe_camera_errors_total", reason="open_failed") >= 2)
        assert CameraState.BACKOFF in rig.states
        assert "s3cret-pw" not in rig.worker.stats()["last_error"]
        codec.fail_open = None
        until(lambda: len(rig.frames) == 3)
    assert _tags(rig.frames) == [0, 1, 2]
    assert rig.sample("vidpipe_camera_reconnects_total") >= 2


@pytest.mark.timeout(20)
def test_a_broken_stream_ends_the_session_and_reconnects_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    # 40 rejected packets in a row exceed the reader's limit (25): read_failed, backoff, reopen
    codec = FakeCodec(packets=60, delay=0, bad=set(range(5, 45)))
    fake_nvdec(codec)
    with Rig(codec, loop=True) as rig:
        until(lambda: rig.sample("vidpipe_camera_errors_total", reason="read_failed") >= 1)
        until(lambda: len(rig.frames) >= 10)
    assert _tags(rig.frames[:10]) == [0, 1, 2, 3, 4] * 2, "reopened from the start"
    assert len(codec.opened) >= 2


class _StallingCodec(FakeCodec):
    """Its demuxer hands out ``packets`` packets, then blocks until released (a frozen camera)."""

    def __init__(self, packets: int) -> None:
        super().__init__(packets=packets, delay=0)
        self.release = threading.Event()

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        demuxer = super().CreateDemuxer(filename)
        release, count = self.release, self.packets

        class Frozen(FakeDemuxer):
            def __iter__(self) -> Iterator[Any]:
                yield from range(count)
                release.wait(10.0)
                return

        frozen = Frozen(count)
        del demuxer
        return frozen


@pytest.mark.timeout(20)
def test_a_frozen_stream_is_caught_by_the_watchdog_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    codec = _StallingCodec(packets=3)
    fake_nvdec(codec)
    with Rig(codec, policy="newest") as rig:
        until(lambda: rig.sample("vidpipe_camera_errors_total", reason="stalled") >= 1)
        assert CameraState.BACKOFF in rig.states
        # the watchdog abandoned the blocked session and opened a new one
        until(lambda: len(codec.opened) >= 2)
        codec.release.set()
    tags = _tags(rig.frames)
    assert tags and set(tags) <= {0, 1, 2} and 2 in tags, "newest policy keeps the last frame"


@pytest.fixture
def context() -> CaptureContext:
    """The capture context of the test's cameras, so the test can reach their gate."""
    return CaptureContext()


def _gate(context: CaptureContext) -> OpenGate:
    return context.shared(NvdecShared).opening


@pytest.fixture
def gate_held_by_another_camera(context: CaptureContext) -> Iterator[Permit]:
    """The test's start-up gate with its one turn taken (limit 1, as ``ONE_AT_ONCE``)."""
    gate = _gate(context)
    held = gate.permit(1)
    assert held.wait()
    yield held
    held.release()
    assert (gate.opening, gate.waiting) == (0, 0), "a turn leaked"


ONE_AT_ONCE = FAST.model_copy(update={"nvdec_open_concurrency": 1})


@pytest.mark.timeout(20)
def test_a_camera_waiting_its_turn_to_open_is_not_taken_for_stalled_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
    context: CaptureContext,
    gate_held_by_another_camera: Permit,
) -> None:
    codec = FakeCodec(packets=5, delay=0)
    fake_nvdec(codec)
    with Rig(codec, defaults=ONE_AT_ONCE, context=context) as rig:
        until(lambda: _gate(context).waiting == 1)
        # Past open_timeout + stall_timeout (0.5 + 0.5 s): a stall, were the wait counted.
        time.sleep(1.5)
        assert rig.worker.stats()["errors"] == 0 and codec.opened == []
        assert rig.worker.state is CameraState.CONNECTING
        gate_held_by_another_camera.release()  # the other camera has its first frame
        until(lambda: len(rig.frames) == 5)
    assert _tags(rig.frames) == list(range(5))
    assert CameraState.BACKOFF not in rig.states, "never abandoned, never reconnected"


@pytest.mark.timeout(20)
def test_stopping_a_camera_that_waits_its_turn_ends_the_wait_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
    context: CaptureContext,
    gate_held_by_another_camera: Permit,
) -> None:
    codec = FakeCodec(packets=5, delay=0)
    fake_nvdec(codec)
    with Rig(codec, defaults=ONE_AT_ONCE, context=context):  # leaving it stops and joins (5 s)
        until(lambda: _gate(context).waiting == 1)
    assert _gate(context).waiting == 0, "the stopped camera left the queue"
    assert codec.opened == [], "and never opened"


def test_each_camera_gets_its_own_decoder_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    fake_nvdec(FakeCodec())
    cpu = CameraConfig(name="cpu", url="a.mp4")
    gpu = CameraConfig(name="gpu", url="a.mp4", decoder="nvdec")
    defaults = CaptureConfig()  # decoder: pyav
    ctx = CaptureContext()
    assert isinstance(ctx.source(cpu, defaults), PyAVSource)
    assert isinstance(ctx.source(gpu, defaults), NvdecSource)
    on_gpu = CaptureConfig(decoder="nvdec")
    assert isinstance(ctx.source(cpu, on_gpu), NvdecSource)
    pinned = CameraConfig(name="cpu2", url="a.mp4", decoder="pyav")
    assert isinstance(ctx.source(pinned, on_gpu), PyAVSource)


def test_a_device_picture_downloads_as_the_cpu_conversion_gives_it_fake_gpu() -> None:
    rng = np.random.default_rng()
    nv12 = rng.integers(16, 236, (H * 3 // 2, W), dtype=np.uint8)
    expected = cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12)
    got = nv12_to_bgr(nv12)
    assert got.shape == (H, W, 3) and np.array_equal(got, expected)


# -- config validation -------------------------------------------------------------------------


@pytest.mark.timeout(20)
def count_rejections(codec: FakeCodec) -> list[int]:
    """Packets the fake's decoders reject, recorded as they are rejected."""
    rejected: list[int] = []
    create = codec.CreateDecoder

    def counting_decoder(**kwargs: Any) -> Any:
        decoder = create(**kwargs)
        decode = decoder.Decode

        def counting(packet: int | None) -> list[int]:
            try:
                return decode(packet)
            except FakeDecodeError:
                rejected.append(packet if packet is not None else -1)
                raise

        decoder.Decode = counting  # type: ignore[method-assign]
        return decoder

    codec.CreateDecoder = counting_decoder  # type: ignore[method-assign]
    return rejected


def test_metrics_sessions_decoder_and_gpu_decode_errors_fake_gpu(
    fake_nvdec: Callable[[FakeCodec], None],
) -> None:
    from prometheus_client import generate_latest

    codec = FakeCodec(packets=20, delay=1, bad={3, 4, 9})
    rejected = count_rejections(codec)
    fake_nvdec(codec)
    cfg = _config(
        inference={"type": "torch"},
        cameras=[{"name": "gpu-cam", "url": "a.mp4", "decoder": "nvdec"}],
    )
    rig = Rig(codec, loop=True)
    rig.context.bind_metrics(rig.metrics, cfg)  # every decoder's hooks, as the pipeline does
    rig.context.bind_camera_metrics(rig.metrics, cfg, cfg.cameras[0])
    with rig:
        until(lambda: len(rig.frames) >= 40)  # two passes or more
        scraped = generate_latest(rig.metrics.registry).decode()
    assert "vidpipe_nvdec_sessions 1.0" in scraped, "one decoder open while streaming"
    assert 'vidpipe_nvdec_opens{state="waiting"} 0.0' in scraped, "no camera waits its turn"
    assert 'vidpipe_camera_decoder{camera="gpu-cam",decoder="nvdec"} 1.0' in scraped
    errors = rig.sample("vidpipe_gpu_decode_errors")
    # The fake's own tally: the worker may stop in the middle of a pass, after some of its
    # 3 bad packets, so the count need not be a multiple of 3.
    assert len(rejected) >= 6, "two passes or more, 3 bad packets each"
    assert errors == len(rejected)
    assert rig.metrics.registry.get_sample_value("vidpipe_nvdec_sessions") == 0, "closed"
    gpu0 = rig.metrics.registry.get_sample_value("vidpipe_gpu_memory_used_bytes", {"gpu": "0"})
    assert gpu0 is not None  # NaN here (no CUDA), bytes on a GPU


def test_frame_pool_reuses_only_buffers_nobody_holds_fake_gpu() -> None:
    """Numpy arrays stand in for device tensors: the pool reasons on references alone."""
    from vidpipe.capture.nvdec_stream import FramePool

    pool = FramePool(keep=3)
    shape = (9, 8)

    def alloc(s: tuple[int, ...]) -> np.ndarray:
        return np.zeros(s, np.uint8)

    held = pool.take(shape, alloc)
    second = pool.take(shape, alloc)
    assert second is not held, "a buffer someone holds is never handed out again"
    del second  # its frame was dropped or its batch ran
    third = pool.take(shape, alloc)
    assert pool.allocated == 2, "the released buffer came back instead of a new one"
    frames = [held, third] + [pool.take(shape, alloc) for _ in range(4)]
    assert len({id(f) for f in frames}) == 6 and pool.allocated == 6
    assert len(pool._buffers) <= 3, "a busy pool keeps at most `keep` buffers"
    other = pool.take((3, 8), alloc)
    assert other.shape == (3, 8), "a new picture size gets its own buffer"
    del frames, held, third, other
    pool.take(shape, alloc)
    assert pool.allocated == 7, "released buffers of the right size are reused"
