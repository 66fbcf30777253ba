"""NVDEC cameras check the GPU's free memory before they open (``nvdec_memory.py``).

The decoder library is the fake of ``tests/unit/test_nvdec_fake_gpu.py`` and the GPU's free
memory is a number the test sets (no GPU here); the worker, its backoff and its metrics are
the real ones. tests/gpu/test_nvdec_memory_gpu.py fills a real GPU's memory instead.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.component.capture_rig import until
from tests.component.test_nvdec_source_fake_gpu import (
    FAST,
    Rig,
    _tags,
    fake_nvdec,  # noqa: F401 (a fixture)
)
from tests.unit.test_nvdec_fake_gpu import FakeCodec, FakeDemuxer
from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.nvdec_memory import MIB, RESERVE_BYTES, camera_bytes, shortage
from vidpipe.capture.source import SourceError
from vidpipe.config import CAPTURE_DECODERS, CameraConfig
from vidpipe.types import CameraState


def test_a_1080p_file_camera_with_prefetch_4_needs_36_pictures() -> None:
    picture = 1920 * 1080 * 3 // 2
    assert camera_bytes(1920, 1080, 4) == 36 * picture
    assert camera_bytes(1920, 1080, 0) == 32 * picture, "a live stream reads nothing ahead"
    assert camera_bytes(640, 360, 4) < camera_bytes(1920, 1080, 4)


def test_shortage_names_the_gpu_the_free_and_the_needed_memory() -> None:
    need = camera_bytes(1920, 1080, 4)
    assert shortage(1, (1920, 1080), 4, lambda gpu: need + RESERVE_BYTES) is None
    why = shortage(1, (1920, 1080), 4, lambda gpu: need + RESERVE_BYTES - 1)
    assert why is not None
    assert "GPU 1" in why and f"{(need + RESERVE_BYTES - 1) // MIB} MiB" in why
    assert f"{need // MIB} MiB" in why and "capture.nvdec_prefetch: 4" in why
    assert "1920x1080" in why


def test_cameras_starting_together_are_each_counted_against_the_free_memory() -> None:
    need = camera_bytes(1920, 1080, 4)
    free = 2 * need + RESERVE_BYTES
    assert shortage(0, (1920, 1080), 4, lambda gpu: free, starting=2) is None
    why = shortage(0, (1920, 1080), 4, lambda gpu: free, starting=3)
    assert why is not None and "2 other camera(s) starting" in why


def test_a_gpu_whose_memory_cannot_be_read_is_not_refused() -> None:
    def broken(gpu: int) -> int:
        raise RuntimeError("no driver")

    assert shortage(0, (1920, 1080), 4, broken) is None


class Memory:
    """A GPU's free memory as the test sets it, and the GPUs asked."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.asked: list[int] = []

    def __call__(self, gpu: int) -> int:
        self.asked.append(gpu)
        return self.free


class UhdCodec(FakeCodec):
    """A fake PyNvVideoCodec whose streams are 3840x2160."""

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        demuxer = super().CreateDemuxer(filename)
        demuxer.Width = lambda: 3840  # type: ignore[method-assign]
        demuxer.Height = lambda: 2160  # type: ignore[method-assign]
        return demuxer


@pytest.mark.timeout(20)
def test_a_camera_that_does_not_fit_backs_off_and_opens_once_memory_is_freed_fake_gpu(
    fake_nvdec: Callable[..., None],  # noqa: F811 (the fixture imported above)
) -> None:
    codec = FakeCodec(packets=3, delay=0)
    memory = Memory(free=RESERVE_BYTES)  # nothing left for a decoder
    fake_nvdec(codec, free_memory=memory)
    with Rig(codec, gpu=2) as rig:
        until(lambda: rig.sample("vidpipe_camera_errors_total", reason="open_failed") >= 2)
        assert CameraState.BACKOFF in rig.states
        assert "GPU 2 has 512 MiB of memory free" in rig.worker.stats()["last_error"]
        assert codec.opened == [], "the decoder was never made while memory was short"
        memory.free = 64 * 1024 * MIB
        until(lambda: len(rig.frames) == 3)
    assert _tags(rig.frames) == [0, 1, 2]
    assert set(memory.asked) == {2}, "the camera's own GPU is asked"


def test_a_stream_larger_than_assumed_is_checked_again_and_closed_fake_gpu(
    fake_nvdec: Callable[..., None],  # noqa: F811 (the fixture imported above)
) -> None:
    # Enough for a 1080p camera (the size assumed before the first open), not for 4K.
    memory = Memory(free=camera_bytes(1920, 1080, 4) + RESERVE_BYTES)
    codec = UhdCodec(packets=3, delay=0)
    fake_nvdec(codec, free_memory=memory)
    cam = CameraConfig(name="big", url="file:///clips/4k.mp4")
    source = CAPTURE_DECODERS.factories["nvdec"].source(
        cam, FAST.model_copy(update={"nvdec_prefetch": 4}), CaptureContext()
    )
    with pytest.raises(SourceError) as err:
        source.open()
    assert err.value.reason == "open_failed" and "3840x2160" in str(err.value.detail)
    assert len(memory.asked) == 2, "asked before the open and again with the real size"
    assert codec.opened == ["/clips/4k.mp4"]
    assert not source._reader.is_open, "the opened decoder was released"
