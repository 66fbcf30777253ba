"""PrefetchNvdecReader (PyNvVideoCodec's ThreadedDecoder) on CPU CI, with a fake
PyNvVideoCodec (no GPU, no NVDEC): frames in order, the end of the file as an empty batch,
rewind on the same decoder, errors, and which reader an NVDEC camera gets. The real decoder
runs in tests/gpu/test_nvdec_gpu.py on the H200.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vidpipe.capture.nvdec import NvdecError, NvdecReader
from vidpipe.capture.nvdec_prefetch import PrefetchNvdecReader
from vidpipe.capture.nvdec_source import NvdecSource
from vidpipe.config import CameraConfig, CaptureConfig


class FakeThreadedDecoder:
    """Frames 0..n-1 in batches, then empty batches, as PyNvVideoCodec's ThreadedDecoder."""

    def __init__(self, codec: FakeThreadedCodec, path: str, buffer_size: int, **kwargs: Any):
        self.codec, self.path, self.buffer_size, self.kwargs = codec, path, buffer_size, kwargs
        self.next = 0
        self.ended = False
        self.reconfigured: list[tuple[str, int]] = []

    def get_stream_metadata(self) -> Any:
        width = 0 if self.codec.no_video else 1920
        return SimpleNamespace(width=width, height=1080, average_fps=25.0, num_frames=5)

    def get_batch_frames(self, n: int) -> list[int]:
        if self.ended:
            raise RuntimeError("decoder ended")
        if self.codec.fail_read is not None:
            raise self.codec.fail_read
        out = list(range(self.next, min(self.next + n, self.codec.frames)))
        self.next += len(out)
        return out

    def reconfigure_decoder(self, path: str, start_frame: int) -> None:
        self.reconfigured.append((path, start_frame))
        self.next = start_frame

    def end(self) -> None:
        if self.ended:
            raise RuntimeError("ended twice")
        self.ended = True


class FakeThreadedCodec:
    """Stands in for the PyNvVideoCodec module (only what PrefetchNvdecReader uses)."""

    def __init__(self, frames: int = 5) -> None:
        self.frames = frames
        self.made: list[FakeThreadedDecoder] = []
        self.fail_open: Exception | None = None
        self.fail_read: Exception | None = None
        self.no_video = False

    def ThreadedDecoder(self, path: str, buffer_size: int, **kwargs: Any) -> FakeThreadedDecoder:
        if self.fail_open is not None:
            raise self.fail_open
        decoder = FakeThreadedDecoder(self, path, buffer_size, **kwargs)
        self.made.append(decoder)
        return decoder


def _reader(codec: FakeThreadedCodec, url: str = "file:///clips/a.mp4") -> PrefetchNvdecReader:
    return PrefetchNvdecReader(
        url, 6, gpu=1, codec=codec, to_tensor=lambda f: f, cuda_context=11, cuda_stream=22
    )


def _read_all(reader: PrefetchNvdecReader) -> list[int]:
    frames = []
    while (frame := reader.read()) is not None:
        frames.append(frame)
    return frames


def test_reads_the_file_in_order_then_ends_and_rewinds_on_the_same_decoder() -> None:
    codec = FakeThreadedCodec(frames=5)
    reader = _reader(codec)
    info = reader.open()
    assert (info.width, info.height, info.fps) == (1920, 1080, 25.0)
    decoder = codec.made[0]
    assert decoder.path == "/clips/a.mp4"  # file:// stripped
    assert decoder.buffer_size == 6
    assert decoder.kwargs == {
        "gpu_id": 1,
        "use_device_memory": True,
        "cuda_context": 11,
        "cuda_stream": 22,
    }
    assert _read_all(reader) == [0, 1, 2, 3, 4]
    assert reader.read() is None  # stays at the end until rewound
    assert reader.rewind()
    assert decoder.reconfigured == [("/clips/a.mp4", 0)]
    assert _read_all(reader) == [0, 1, 2, 3, 4]
    assert len(codec.made) == 1, "rewind must not make a new decoder"
    assert reader.frames == 10
    assert reader.decode_errors == 0


def test_rewind_before_the_end_is_refused() -> None:
    reader = _reader(FakeThreadedCodec(frames=5))
    assert not reader.rewind()  # not open
    reader.open()
    reader.read()
    assert not reader.rewind()  # the caller must close and open instead


def test_open_failure_names_the_file_and_the_reason() -> None:
    codec = FakeThreadedCodec()
    codec.fail_open = RuntimeError("no such file")
    with pytest.raises(NvdecError, match=r"cannot open /clips/gone\.mp4 with NVDEC.*no such file"):
        _reader(codec, "/clips/gone.mp4").open()


def test_a_file_without_a_video_stream_is_refused_and_its_decoder_ended() -> None:
    codec = FakeThreadedCodec()
    codec.no_video = True
    reader = _reader(codec)
    with pytest.raises(NvdecError, match=r"cannot open .*a\.mp4 with NVDEC: no video stream"):
        reader.open()
    assert codec.made[0].ended and not reader.is_open


def test_a_failed_decode_ends_the_connection_with_nvdec_error() -> None:
    codec = FakeThreadedCodec()
    reader = _reader(codec)
    reader.open()
    codec.fail_read = RuntimeError("device lost")
    with pytest.raises(NvdecError, match=r"decoding .*a\.mp4 failed: RuntimeError: device lost"):
        reader.read()


def test_close_ends_the_decoder_once_and_reads_after_it_fail() -> None:
    codec = FakeThreadedCodec()
    reader = _reader(codec)
    reader.open()
    reader.close()
    reader.close()  # idempotent: the fake raises on a second end()
    assert codec.made[0].ended
    assert not reader.is_open
    with pytest.raises(NvdecError, match="read before open"):
        reader.read()


def test_reopen_ends_the_old_decoder_first() -> None:
    codec = FakeThreadedCodec()
    reader = _reader(codec)
    reader.open()
    reader.open()
    assert [d.ended for d in codec.made] == [True, False]


def test_prefetch_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="prefetch must be at least 1"):
        PrefetchNvdecReader("/a.mp4", 0, codec=FakeThreadedCodec())


class _FakeDecoderStream:
    """Stands in for DecoderStream (no CUDA here): the handles the reader is given."""

    def __init__(self, gpu: int) -> None:
        self.context, self.handle = 11, 22

    def own_copy(self, surface: Any) -> tuple[Any, Any]:
        return surface, None


@pytest.mark.parametrize(
    ("url", "prefetch", "expected"),
    [
        ("/clips/a.mp4", 4, PrefetchNvdecReader),
        ("file:///clips/a.mp4", 4, PrefetchNvdecReader),
        ("/clips/a.mp4", 0, NvdecReader),
        ("rtsp://cam/stream", 4, NvdecReader),  # live streams keep the camera's thread
    ],
)
def test_which_reader_an_nvdec_camera_gets(url: str, prefetch: int, expected: type) -> None:
    camera = CameraConfig(name="c", url=url, decoder="nvdec")
    source = NvdecSource(
        camera,
        CaptureConfig(nvdec_prefetch=prefetch),
        cuda=_FakeDecoderStream,  # type: ignore[arg-type]
    )
    reader = source._open_reader()
    assert type(reader) is expected
    if expected is PrefetchNvdecReader:
        assert reader.prefetch == prefetch  # type: ignore[union-attr]


def test_capture_config_rejects_a_negative_prefetch() -> None:
    with pytest.raises(ValueError, match="nvdec_prefetch"):
        CaptureConfig(nvdec_prefetch=-1)
