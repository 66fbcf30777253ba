"""``NvdecSource.read`` defers the copy out of the decoder to ``NvdecPicture.image``.

No GPU here: PyNvVideoCodec is the fake of ``test_nvdec_fake_gpu.py`` (packet ``k`` decodes
to frame ``k``, whose every byte is ``k``) and the camera's CUDA stream is a fake
``DecoderStream`` that records, for each copy, whether it ran on the camera's stream and
inside the GPU gate, as the eager copy did. The real copy runs in tests/gpu/test_nvdec_gpu.py
and tests/gpu/test_nvdec_daemon_gpu.py on the H200.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.unit.test_nvdec_fake_gpu import FakeCodec
from vidpipe.capture import nvdec_source
from vidpipe.capture.nvdec import NvdecError, NvdecReader
from vidpipe.capture.nvdec_picture import NvdecPicture
from vidpipe.capture.nvdec_source import NvdecSource
from vidpipe.capture.source import SourceError
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.gpu_gate import GPU_GATE
from vidpipe.types import DeviceImage

W, H = 8, 6


class FakeDecoderStream:
    """``DecoderStream``'s interface without CUDA. ``copies``: (frame, on the camera's
    stream, inside the GPU gate) per copy made."""

    context, handle = 11, 22

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu
        self.depth = 0
        self.copies: list[tuple[int, bool, bool]] = []
        self.fail: NvdecError | None = None

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def own_copy(self, surface: np.ndarray) -> tuple[np.ndarray, None]:
        if self.fail is not None:
            raise self.fail
        gated = GPU_GATE._users > 0  # no public view of the gate's users
        self.copies.append((int(surface[0, 0]), self.depth > 0, gated))
        return np.copy(surface), None


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[NvdecSource, FakeDecoderStream]]:
    """An opened live NVDEC source over the fake codec and the fake stream, made as the
    daemon makes it (its reader and copy come from its ``DecoderStream``)."""
    streams: list[FakeDecoderStream] = []

    def make_stream(gpu: int) -> FakeDecoderStream:
        streams.append(FakeDecoderStream(gpu))
        return streams[-1]

    def surface(k: int) -> np.ndarray:
        return np.full((H * 3 // 2, W), k % 256, np.uint8)

    def make_reader(url: str, gpu: int, **cuda: Any) -> NvdecReader:
        return NvdecReader(url, gpu, codec=FakeCodec(packets=5, delay=0), to_tensor=surface)

    monkeypatch.setattr(nvdec_source, "NvdecReader", make_reader)
    cam = CameraConfig(name="cam", url="rtsp://cam/live", decoder="nvdec")
    src = NvdecSource(cam, CaptureConfig(decoder="nvdec"), cuda=make_stream)  # type: ignore[arg-type]
    src.open()
    yield src, streams[0]
    src.close()


def _read(src: NvdecSource) -> NvdecPicture:
    picture = src.read()
    assert picture is not None
    return picture


def test_the_copy_waits_for_the_image_and_runs_as_it_did_fake_gpu(
    source: tuple[NvdecSource, FakeDecoderStream],
) -> None:
    src, stream = source
    picture = _read(src)
    assert (picture.width, picture.height) == (W, H)
    assert picture.luma() is None
    assert stream.copies == [], "decoded, not copied yet"
    image = picture.image()
    assert isinstance(image, DeviceImage) and (image.width, image.height) == (W, H)
    assert stream.copies == [(0, True, True)], "on the camera's stream, inside the gate"
    assert picture.image_for((416, 416)) is image and picture.image() is image
    assert len(stream.copies) == 1, "copied once"


def test_a_picture_left_uncopied_until_the_next_read_refuses_to_copy_fake_gpu(
    source: tuple[NvdecSource, FakeDecoderStream],
) -> None:
    src, stream = source
    skipped = _read(src)
    kept = _read(src)  # the decoder may now reuse the first picture's surface
    with pytest.raises(RuntimeError, match="after the decoder moved on"):
        skipped.image()
    image = kept.image()
    src.close()  # a copied frame outlives its decoder
    assert kept.image() is image and int(image.nv12[0, 0]) == 1
    assert [frame for frame, _, _ in stream.copies] == [1]


def test_a_failed_copy_is_a_read_failure_fake_gpu(
    source: tuple[NvdecSource, FakeDecoderStream],
) -> None:
    src, stream = source
    stream.fail = NvdecError("copying a decoded frame failed: CUDA_ERROR_ILLEGAL_ADDRESS")
    picture = _read(src)
    with pytest.raises(SourceError) as err:
        picture.image()
    assert err.value.reason == "read_failed" and "ILLEGAL_ADDRESS" in err.value.detail
