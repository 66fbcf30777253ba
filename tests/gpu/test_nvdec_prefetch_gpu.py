"""PrefetchNvdecReader (PyNvVideoCodec's ThreadedDecoder) on the GPU, against NvdecReader on
the same 1080p H.264 clip: the same frames, pixel for pixel, even when the decoding thread has
had time to run ahead before a frame is copied; the end of the file; rewind on the same
decoder; a missing file.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vidpipe.capture.nvdec import NvdecError, NvdecReader
from vidpipe.capture.nvdec_prefetch import PrefetchNvdecReader

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

torch = pytest.importorskip("torch")


def _sums(reader: NvdecReader | PrefetchNvdecReader, copy: object, pause_s: float) -> list[int]:
    """Every frame of one pass, copied out as the NVDEC source does (``own_copy``) after
    ``pause_s``, each summed on the GPU."""
    sums = []
    while (surface := reader.read()) is not None:
        if pause_s:
            time.sleep(pause_s)  # the decoding thread fills its buffer meanwhile
        frame, _ = copy(surface)  # type: ignore[operator]
        sums.append(int(frame.to(torch.int64).sum().item()))
    return sums


def test_prefetched_frames_equal_the_decoders_frames_gpu(clip: Path) -> None:
    from vidpipe.capture.nvdec_stream import DecoderStream

    cuda = DecoderStream(0)
    plain = NvdecReader(str(clip), 0, cuda_context=cuda.context, cuda_stream=cuda.handle)
    ahead = PrefetchNvdecReader(str(clip), 4, 0, cuda_context=cuda.context, cuda_stream=cuda.handle)
    with cuda.current():
        info_plain, info_ahead = plain.open(), ahead.open()
        expected = _sums(plain, cuda.own_copy, 0.0)
        got = _sums(ahead, cuda.own_copy, 0.003)
    plain.close()
    ahead.close()
    assert (info_ahead.width, info_ahead.height) == (info_plain.width, info_plain.height)
    assert len(expected) > 100
    assert got == expected


def test_prefetch_rewinds_on_the_same_decoder_gpu(clip: Path) -> None:
    from vidpipe.capture.nvdec_stream import DecoderStream

    cuda = DecoderStream(0)
    reader = PrefetchNvdecReader(
        str(clip), 4, 0, cuda_context=cuda.context, cuda_stream=cuda.handle
    )
    with cuda.current():
        reader.open()
        decoder = reader._decoder
        first = _sums(reader, cuda.own_copy, 0.0)
        assert reader.read() is None
        assert reader.rewind()
        second = _sums(reader, cuda.own_copy, 0.0)
    assert reader._decoder is decoder
    reader.close()
    assert len(first) > 100 and second == first


def test_prefetch_missing_file_is_a_clear_error_gpu(tmp_path: Path) -> None:
    with pytest.raises(NvdecError, match="cannot open"):
        PrefetchNvdecReader(str(tmp_path / "nope.mp4"), 4, 0).open()
