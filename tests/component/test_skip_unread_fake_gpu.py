"""A live camera whose last frame still waits leaves its next one unmade, and counts it.

On the H200 about 100 NVDEC camera threads each took the GIL many times per frame, mostly after
the decode (the copy out of the decoder, the DeviceImage, the Frame), for frames that were only
to overwrite an unread one in their ``newest`` mailbox: the scheduler starved. Now the copy is
made only when the worker passes a frame on (``NvdecPicture``), and a live camera whose last
due frame still waits drops the new one unmade, once in a row (``CaptureWorker._emit``).

Real capture workers, mailboxes, hub, metrics, scheduler and stream set. Faked: the GPU
(``tests/fake_gpu.py``) and PyNvVideoCodec (``tests/unit/test_nvdec_fake_gpu.py``: packet
``k`` decodes to frame ``k``, whose every byte is ``k``). Copies are counted by the frame they
copied, frames by the daemon's own counters; nothing here asserts a timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from tests.component.capture_rig import until
from tests.component.test_nvdec_source_fake_gpu import FAST
from tests.component.test_streamset_fake_gpu import echo_decoder, make_backend
from tests.unit.test_nvdec_fake_gpu import FakeCodec, FakeDemuxer
from vidpipe.capture import CaptureWorker
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.nvdec import NvdecError, NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.labels import Labels
from vidpipe.metrics import DROP_REASONS, Metrics
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.types import CameraState, DeviceImage, Frame

W, H = 16, 12  # the fake GPU's picture size: NV12 (18, 16)


class Cameras:
    """Fake-NVDEC cameras on real workers, wired as the daemon wires them (``newest`` for
    live cameras, ``block`` for files; ``cm.overwritten`` counts replaced frames); what each
    camera's decoder copied out, by frame, is in ``copied``."""

    def __init__(
        self,
        codecs: dict[str, FakeCodec],
        policy: str = "newest",
        capture: CaptureConfig = FAST,
        **camera: Any,
    ) -> None:
        self.codecs = codecs
        self.metrics = Metrics()
        self.hub = FrameHub()
        self.copied: dict[str, list[int]] = {name: [] for name in codecs}
        self.boxes: dict[str, Mailbox] = {}
        self.workers: list[CaptureWorker] = []
        self.fail_copy_of: int | None = None  # the frame whose copy fails
        self.context = context = CaptureContext()
        for name in codecs:
            cam = CameraConfig(name=name, url=f"file:///clips/{name}.mp4", **camera)
            cm = self.metrics.camera(name)
            self.boxes[name] = self.hub.add(name, policy, cm.overwritten)  # type: ignore[arg-type]
            self.workers.append(CaptureWorker(cam, capture, self.boxes[name], cm, context=context))

    def source(self, cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext) -> Any:
        def own_copy(surface: np.ndarray) -> tuple[np.ndarray, None]:
            if int(surface[0, 0]) == self.fail_copy_of:
                raise NvdecError("copying a decoded frame failed: CUDA_ERROR_ILLEGAL_ADDRESS")
            self.copied[cam.name].append(int(surface[0, 0]))
            return np.copy(surface), None

        reader = NvdecReader(cam.url, codec=self.codecs[cam.name], to_tensor=_surface)
        shared = ctx.shared(NvdecShared)
        return NvdecSource(cam, defaults, shared=shared, reader=reader, own_copy=own_copy)

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        for w in self.workers:
            assert w.join(5.0), w.name

    def count(self, metric: str, camera: str, **labels: str) -> int:
        value = self.metrics.registry.get_sample_value(metric, {"camera": camera, **labels})
        return int(value or 0)

    def dropped(self, camera: str, reason: str) -> int:
        return self.count("vidpipe_frames_dropped_total", camera, reason=reason)


def _surface(k: int) -> np.ndarray:
    return np.full((H * 3 // 2, W), k % 256, np.uint8)


def _tag(frame: Frame) -> int:
    assert isinstance(frame.image, DeviceImage)
    return int(frame.image.nv12[0, 0])


def _take(cams: Cameras, n: int, then: Callable[[], object] = lambda: None) -> list[int]:
    """The next ``n`` frames the hub hands out, by tag, as the scheduler takes them (``then``
    after each)."""
    taken: list[int] = []
    while len(taken) < n:
        frame = cams.hub.take(5.0)
        assert frame is not None, f"frame {len(taken) + 1} of {n} never came"
        taken.append(_tag(frame))
        then()
    return taken


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make ``nvdec`` open the cameras of a ``Cameras`` through their fake decoders."""

    def use(cams: Cameras) -> Cameras:
        monkeypatch.setitem(CAPTURE_DECODERS.factories, "nvdec", DecoderKind(cams.source))
        return cams

    yield use


@pytest.mark.timeout(20)
def test_a_fake_nvdec_camera_whose_frame_waits_unread_makes_no_copy_for_the_next_fake_gpu(
    install: Any,
) -> None:
    # Nothing takes: every frame finds its predecessor waiting. Frame 1 is dropped unmade
    # (0 waits); frame 2 is made and replaces 0 (dropping twice in a row is not allowed: the
    # frame waiting would grow older than one frame); and so on.
    cams = install(Cameras({"live": FakeCodec(packets=9, delay=0)}))
    cams.start()
    until(lambda: cams.workers[0].state is CameraState.STOPPED)  # the file ended
    cams.stop()
    assert cams.copied["live"] == [0, 2, 4, 6, 8]
    assert cams.dropped("live", "mailbox_full") == 4  # 1, 3, 5, 7: never copied
    assert cams.dropped("live", "overwritten") == 4  # 0, 2, 4, 6: replaced by the next made
    waiting = cams.boxes["live"].clear()
    assert waiting is not None and _tag(waiting) == 8, "the newest frame is the one kept"
    assert cams.count("vidpipe_frames_captured_total", "live") == 9


@pytest.mark.timeout(20)
def test_a_failed_fake_nvdec_copy_ends_the_session_as_a_read_failure_fake_gpu(
    install: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The copy now runs when the worker asks for the image, after the read: its failure
    # still ends the session as a read failure (backoff, reconnect), not as a reader bug.
    cams = install(Cameras({"live": FakeCodec(packets=9, delay=0)}))
    cams.fail_copy_of = 2
    cams.start()
    until(lambda: cams.count("vidpipe_camera_errors_total", "live", reason="read_failed") >= 2)
    cams.stop()
    assert cams.copied["live"][:2] == [0, 0], "frame 0, then frame 0 again after reconnecting"
    assert "reader failed" not in caplog.text


class _LockstepDemuxer(FakeDemuxer):
    """Hands out packet ``k + 1`` only once frame ``k`` was taken from the mailbox."""

    def __init__(self, packets: int, taken: threading.Semaphore) -> None:
        super().__init__(packets)
        self._taken = taken

    def __iter__(self) -> Any:
        for k in range(self.packets):
            if k:
                assert self._taken.acquire(timeout=5.0), f"frame {k - 1} was never taken"
            yield k
        yield None


class _LockstepCodec(FakeCodec):
    def __init__(self, packets: int) -> None:
        super().__init__(packets=packets, delay=0)
        self.taken = threading.Semaphore(0)

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        self.opened.append(filename)
        return _LockstepDemuxer(self.packets, self.taken)


@pytest.mark.timeout(20)
def test_a_fake_nvdec_camera_whose_frame_was_taken_copies_the_next_as_before_fake_gpu(
    install: Any,
) -> None:
    codec = _LockstepCodec(packets=8)
    cams = install(Cameras({"live": codec}))
    cams.start()
    taken = _take(cams, 8, then=codec.taken.release)
    cams.stop()
    assert taken == list(range(8))
    assert cams.copied["live"] == list(range(8)), "each frame copied once, none skipped"
    assert cams.dropped("live", "mailbox_full") == 0
    assert cams.dropped("live", "overwritten") == 0


@pytest.mark.timeout(20)
def test_decimated_fake_nvdec_frames_make_no_copy_fake_gpu(install: Any) -> None:
    # 25 fps (the fake demuxer's rate) at detect_fps 5: frames 0, 5, 10, 15 are due. A file
    # camera (block) decodes the next frame only once the last one was taken.
    cams = install(Cameras({"file": FakeCodec(packets=20, delay=0)}, "block", detect_fps=5))
    cams.start()
    taken = _take(cams, 4)
    until(lambda: cams.workers[0].state is CameraState.STOPPED)
    cams.stop()
    assert taken == [0, 5, 10, 15]
    assert cams.copied["file"] == [0, 5, 10, 15], "only the frames passed on were copied"
    assert cams.dropped("file", "decimated") == 16


STREAMS, MAX_BATCH, KERNEL_S = 1, 4, 0.05  # 80 frames a second
CAMERAS = 6  # at 25 fps: 150 frames a second offered, about twice the device


@pytest.mark.timeout(30)
def test_every_frame_of_overloaded_fake_nvdec_cameras_is_inferred_or_counted_fake_gpu(
    install: Any,
) -> None:
    """Over a run of twice the cameras the fake device can infer: frames captured = inferred
    + dropped, by reason, + still waiting at the end; both live sheds happen."""
    codecs = {f"cam{i}": FakeCodec(packets=40, delay=2) for i in range(CAMERAS)}
    cams = install(Cameras(codecs, realtime=True, loop=True))
    backend, _, _ = make_backend(streams=STREAMS, max_batch=MAX_BATCH, kernel_s=(KERNEL_S,))
    engine = Scheduler(
        backend,
        echo_decoder,
        Labels.of([str(i) for i in range(16)]),
        cams.metrics,
        lambda _r: None,
        default_rules=CameraRules(DecodeParams(8, 8, 0.0), None),
        iou_threshold=0.5,
        max_frame_age_s=60.0,
    )
    engine.start(cams.hub)
    cams.start()
    try:
        until(lambda: all(cams.dropped(n, "mailbox_full") >= 5 for n in codecs), 20.0)
    finally:
        cams.stop()  # no frame is captured after this
        assert engine.close(10.0)
    waiting = {f.camera for f in cams.hub.clear_all()}
    for name in codecs:
        captured = cams.count("vidpipe_frames_captured_total", name)
        inferred = cams.count("vidpipe_frames_inferred_total", name)
        drops = {r: cams.dropped(name, r) for r in DROP_REASONS}
        assert inferred > 0 and drops["mailbox_full"] > 0 and drops["overwritten"] > 0, drops
        accounted = inferred + sum(drops.values()) + (name in waiting)
        assert captured == accounted, f"{name}: {captured} captured, {inferred} inferred, {drops}"
