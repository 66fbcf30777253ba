"""NVDEC cameras decoded in decode processes (``capture.nvdec_processes``) on the real GPU:
PyNvVideoCodec in a spawned process, the picture copied into a CUDA ring that comes back to
this process by CUDA IPC. The daemon with a decode process is
``tests/gpu/test_nvdec_daemon_gpu.py``; the protocol on CPU CI is
``tests/component/test_nvdec_decode_process_fake_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_child import RING_SLOTS
from vidpipe.capture.nvdec_remote import DecodeProcesses, RemoteNvdecReader
from vidpipe.capture.nvdec_stream import DecoderStream

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]

torch = pytest.importorskip("torch")

FRAMES = 3 * RING_SLOTS  # past one ring, frames held and let go


@pytest.fixture
def decoding() -> Iterator[DecodeProcesses]:
    processes = DecodeProcesses()  # PyNvVideoCodec and a CUDA ring: the daemon's own
    yield processes
    processes.close()


def _in_process(clip: Path, n: int) -> list[object]:
    cuda = DecoderStream(0)
    reader = NvdecReader(str(clip), 0, cuda_context=cuda.context, cuda_stream=cuda.handle)
    frames = []
    with cuda.current():
        reader.open()
        for _ in range(n):
            surface = reader.read()
            assert surface is not None
            frames.append(cuda.own_copy(surface)[0])
    reader.close()
    return frames


def test_a_decode_process_gives_the_pictures_the_camera_thread_decodes_gpu(
    clip: Path, decoding: DecodeProcesses
) -> None:
    reader = RemoteNvdecReader(str(clip), 0, lambda: decoding.connect(1))
    info = reader.open()
    held, rings = [], set()
    for i in range(FRAMES):
        frame = reader.read()
        assert frame is not None and frame.is_cuda and frame.dtype == torch.uint8
        rings.add(frame.untyped_storage().data_ptr())
        if i % 2 == 0:
            held.append(frame)  # the odd ones are let go: their slots come back
    reader.close()
    local = _in_process(clip, FRAMES)
    assert held[0].shape == local[0].shape == (info.height * 3 // 2, info.width)
    for i, frame in enumerate(held):
        assert torch.equal(frame, local[2 * i]), f"frame {2 * i} differs"
    # Held frames filled one ring and took a new one; freed slots were used again.
    assert 2 <= len(rings) <= 3, rings
    assert decoding.started == 1


def test_a_picture_from_a_decode_process_letterboxes_as_its_own_copy_gpu(
    clip: Path, decoding: DecodeProcesses
) -> None:
    """The ring's memory is device memory this process's kernels read (the letterbox),
    not only compare."""
    from vidpipe.preprocess.gpu import nv12_letterbox_into

    reader = RemoteNvdecReader(str(clip), 0, lambda: decoding.connect(1))
    reader.open()
    frame = reader.read()
    assert frame is not None
    local = _in_process(clip, 1)[0]
    out = torch.empty((2, 416, 416, 3), dtype=torch.uint8, device="cuda:0")
    nv12_letterbox_into(torch, frame, out[0])
    nv12_letterbox_into(torch, local, out[1])
    torch.cuda.synchronize()
    reader.close()
    assert torch.equal(out[0], out[1])


def test_frames_let_go_in_the_decode_process_leave_the_others_as_decoded_gpu(
    clip: Path, decoding: DecodeProcesses
) -> None:
    """Frames the daemon would drop are decoded there and never copied (``NvdecReader.skip``):
    each frame sent is the picture of its place in the clip, as the camera thread decodes it."""
    reader = RemoteNvdecReader(str(clip), 0, lambda: decoding.connect(1))
    reader.open()
    reader.skip_unwanted(None, lambda: 1)  # the last frame always waits: every other goes
    sent = [reader.read() for _ in range(RING_SLOTS)]
    let_go = reader.skipped_unread
    reader.close()
    local = _in_process(clip, 2 * RING_SLOTS)
    assert let_go == RING_SLOTS
    for i, frame in enumerate(sent):
        assert frame is not None and torch.equal(frame, local[2 * i + 1]), f"frame {2 * i + 1}"
