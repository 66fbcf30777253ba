"""How much GPU memory an NVDEC camera takes, and the check that refuses to open one that
does not fit.

A decoder that reads ahead (``PrefetchNvdecReader``) allocates its surfaces on
PyNvVideoCodec's own C++ thread, where running out of memory cannot become a Python error:
the process aborts. So a camera asks before it opens, and a camera that would not fit fails
its open as ``open_failed`` with a message naming the GPU, the memory free and the memory
needed. The worker backs off and retries it; the other cameras go on.

The estimate counts NV12 pictures (``W * H * 3 / 2`` bytes each):

- ``DECODER_SURFACES`` (24): the decoder's own surfaces;
- ``capture.nvdec_prefetch`` frames read ahead (0 for live streams);
- ``FramePool``'s buffers (8, ``nvdec_source.FramePool``).

That is 36 pictures, about 106 MiB, for a 1080p file camera with ``nvdec_prefetch: 4``. On
the H200, 160 such cameras on 5 processes used 28.2 GB in all: about 2 GB per process for
PyTorch, the model and CUDA graphs, and about 110 MB per camera, which the estimate meets.
``RESERVE_BYTES`` stays free for inference's own allocations, which grow with the batch.
"""

from __future__ import annotations

from collections.abc import Callable

DECODER_SURFACES = 24
POOL_KEEP = 8
RESERVE_BYTES = 512 * 1024 * 1024
MIB = 1024 * 1024

# Before the first open the size is not known; cameras are sized as 1080p until they opened.
DEFAULT_SIZE = (1920, 1080)

FreeMemory = Callable[[int], int]


def camera_bytes(width: int, height: int, prefetch: int) -> int:
    """GPU memory one NVDEC camera of ``width`` x ``height`` takes, in bytes."""
    pictures = DECODER_SURFACES + max(prefetch, 0) + POOL_KEEP
    return pictures * width * height * 3 // 2


def torch_memory(gpu: int) -> tuple[int, int]:
    """Bytes the driver reports free and in all on ``gpu`` (``torch.cuda.mem_get_info``)."""
    import torch

    free, total = torch.cuda.mem_get_info(gpu)
    return int(free), int(total)


def torch_free_memory(gpu: int) -> int:
    """Bytes the driver reports free on ``gpu``."""
    return torch_memory(gpu)[0]


def shortage(
    gpu: int,
    size: tuple[int, int],
    prefetch: int,
    free_memory: FreeMemory,
    starting: int = 1,
) -> str | None:
    """Why an NVDEC camera of ``size`` cannot open on ``gpu`` now, or None if it fits.

    Args:
        starting: cameras of the pipeline opening at this moment, this one included
            (``capture.nvdec_open_concurrency`` at most). Each may not have allocated yet,
            so each is counted against what is free.

    A GPU whose free memory cannot be read is not refused (the decoder reports its own
    errors then).
    """
    try:
        free = free_memory(gpu)
    except Exception:
        return None
    need = camera_bytes(size[0], size[1], prefetch)
    starting = max(starting, 1)
    if free >= need * starting + RESERVE_BYTES:
        return None
    others = f", with {starting - 1} other camera(s) starting" if starting > 1 else ""
    return (
        f"GPU {gpu} has {free // MIB} MiB of memory free{others}, and an NVDEC camera of "
        f"{size[0]}x{size[1]} needs about {need // MIB} MiB (capture.nvdec_prefetch: "
        f"{prefetch}) plus {RESERVE_BYTES // MIB} MiB kept for inference; fewer cameras per "
        "GPU, or a smaller capture.nvdec_prefetch, fit"
    )
