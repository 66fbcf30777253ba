"""An NVDEC camera refuses to open when the GPU lacks the memory for it (``nvdec_memory.py``).

The test takes nearly all of the GPU's free memory with one tensor, expects the camera's open
to be refused with a message naming the GPU and the memory, then frees the tensor and expects
the same camera to open and read a frame.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.capture.nvdec_memory import RESERVE_BYTES, camera_bytes, torch_free_memory
from vidpipe.capture.nvdec_source import NvdecSource
from vidpipe.capture.source import SourceError
from vidpipe.config import CameraConfig, CaptureConfig

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]

torch = pytest.importorskip("torch")


def test_a_camera_is_refused_while_the_gpu_is_full_and_opens_once_freed_gpu(clip: Path) -> None:
    cam = CameraConfig(name="full", url=str(clip))
    defaults = CaptureConfig(decoder="nvdec", nvdec_prefetch=4)
    torch.cuda.init()
    free = torch_free_memory(0)
    # Leave less than one 1080p camera and the reserve; allocate in one block.
    leave = RESERVE_BYTES + camera_bytes(1920, 1080, 4) // 2
    hog = torch.empty(max(free - leave, 0), dtype=torch.uint8, device="cuda:0")
    source = NvdecSource(cam, defaults)
    try:
        with pytest.raises(SourceError) as err:
            source.open()
        print("refused:", err.value.detail)
        assert err.value.reason == "open_failed"
        assert "GPU 0 has" in err.value.detail and "MiB of memory free" in err.value.detail
        assert "capture.nvdec_prefetch: 4" in err.value.detail
    finally:
        del hog
        torch.cuda.empty_cache()
    try:
        info = source.open()
        assert info.width > 0 and info.height > 0
        picture = source.read()
        assert picture is not None, "the camera opened but decoded no frame"
        image = picture.image()
        assert int(image.nv12.shape[0]) == info.height * 3 // 2
    finally:
        source.close()
