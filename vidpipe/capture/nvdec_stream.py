"""Where an NVDEC camera's decoder works: its CUDA context and stream, and the frame buffers
it copies decoded pictures into (``DecoderStream``, ``FramePool``). The camera's reader uses
them in the daemon's process, or in a decode process (``nvdec_child.py``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from vidpipe.capture.nvdec import NvdecError
from vidpipe.capture.nvdec_memory import POOL_KEEP


class FramePool:
    """Frame buffers of one camera, reused once nothing but the pool refers to them.

    A frame's copy is referenced by whatever still needs it: the mailbox, a batch until an
    event after its letterbox kernels has passed (``TorchContext.letterbox``), a live view
    download. When only the pool's own list refers to a buffer, no queued GPU work reads it
    (the stream set lets a batch's pictures go only after their kernels ran), so the next
    frame may be copied into it. This takes the allocation off the camera thread's per-frame
    path: PyTorch's allocator, behind its lock and with the GIL held, took 24 % of the GIL
    samples of a 72-camera daemon on the H200.

    Args:
        allocate: makes a buffer of a shape (``Tensor.new_empty`` of the decoded surface).
        keep: buffers kept per camera; past it, a busy pool allocates and lets the extra go.
    """

    def __init__(self, keep: int = POOL_KEEP) -> None:
        self.keep = keep
        self._buffers: list[Any] = []
        self.allocated = 0

    def take(self, shape: tuple[int, ...], allocate: Callable[[tuple[int, ...]], Any]) -> Any:
        """A buffer of ``shape`` that nothing else refers to, or a new one."""
        for buffer in self._buffers:
            # The list and getrefcount's own argument: nobody else holds it.
            if sys.getrefcount(buffer) <= 3 and tuple(buffer.shape) == shape:
                return buffer
        buffer = allocate(shape)
        self.allocated += 1
        if len(self._buffers) >= self.keep:  # the oldest go (a busy pool, or an old size)
            self._buffers = self._buffers[len(self._buffers) - self.keep + 1 :]
        self._buffers.append(buffer)
        return buffer


class DecoderStream:
    """The CUDA context and stream a camera's decoder works in: the GPU's primary context
    (the one PyTorch and the stream set use) and a stream of the camera's own.

    Without a stream of its own, PyNvVideoCodec decodes on the legacy default stream, which
    serialises with every blocking stream of the context; the decode, the dlpack hand-over
    and the copy out of the surface pool all run on this one (``NvdecSource.read`` and
    ``NvdecSource._copy_out``).
    """

    def __init__(self, gpu: int) -> None:
        import torch
        from cuda.bindings import driver

        with torch.cuda.device(gpu):
            torch.cuda.init()
            self.stream = torch.cuda.Stream()
        self._contiguous = torch.contiguous_format
        err, device = driver.cuDeviceGet(gpu)  # PyTorch has called cuInit already
        if err == driver.CUresult.CUDA_SUCCESS:
            err, context = driver.cuDevicePrimaryCtxRetain(device)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise NvdecError(f"cannot retain the primary CUDA context of GPU {gpu}: {err}")
        self.context = int(context)
        self.handle = int(self.stream.cuda_stream)
        self._driver = driver  # cuda-python's driver API (its calls release the GIL)
        self.driver_copies = 0  # frames copied through the driver (the rest: Tensor.clone)
        self.pool = FramePool()

    def own_copy(self, surface: Any) -> tuple[Any, Any]:
        """A copy of ``surface`` made on the camera's stream and complete on return, and
        None: no event for its consumers to wait on.

        The copy and the wait go through cuda-python's driver calls, which release the GIL
        around the C call; PyTorch's ``clone`` and ``Event.record`` held it. In a GIL profile
        of one daemon with 88 NVDEC cameras on the H200 the clone alone held the GIL for 35 %
        of the samples, and the camera threads starved the batcher. A surface that is not
        one dense block (a pitched one) is cloned by PyTorch.

        The camera's thread then waits for its stream (the decode and a 3 MB device copy,
        the GIL released), so the picture is complete when it leaves and the frame carries no
        event (``ready`` is None). Otherwise the batcher waited on one event per picture,
        64 GIL hand-overs per batch behind every camera thread of the process; at 72 NVDEC
        cameras on the H200 its batches took 200-275 ms and the SMs went idle.
        """
        if surface.is_contiguous():
            copy = self.pool.take(tuple(surface.shape), surface.new_empty)  # on this stream
            self._driver_copy(copy, surface)
            self.driver_copies += 1
        else:
            copy = surface.clone(memory_format=self._contiguous)
        self._wait()
        return copy, None

    def copy_into(self, target: Any, surface: Any) -> None:
        """Copy ``surface`` into ``target`` (as ``own_copy``, into a buffer the caller owns:
        a decode process's ring), complete on return."""
        if surface.is_contiguous():
            self._driver_copy(target, surface)
        else:
            with self.current():
                target.copy_(surface)
        self._wait()

    def _driver_copy(self, target: Any, surface: Any) -> None:
        driver = self._driver
        (err,) = driver.cuMemcpyDtoDAsync(
            target.data_ptr(), surface.data_ptr(), surface.numel(), self.handle
        )
        if err != driver.CUresult.CUDA_SUCCESS:
            raise NvdecError(f"copying a decoded frame failed: {err}")

    def _wait(self) -> None:
        driver = self._driver
        (err,) = driver.cuStreamSynchronize(self.handle)  # only this camera's decode and copy
        if err != driver.CUresult.CUDA_SUCCESS:
            raise NvdecError(f"waiting for the frame's copy failed: {err}")

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """Make the camera's stream PyTorch's current one (dlpack hand-over and the copy)."""
        import torch

        with torch.cuda.stream(self.stream):
            yield
