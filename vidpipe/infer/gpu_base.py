"""The two seams of the GPU stream set: the device runtime and the batch executor.

Everything in ``streamset.py`` (slots, buffers, events, batching, completion, routing) talks
to the GPU only through these two interfaces, so it does not care which engine runs:

* ``GpuRuntime``: memory, streams, events and copies of one device (``cuda_rt.CudaRuntime``
  in production; tests without a GPU substitute a fake that emulates only the device).
* ``BatchExecutor``: the model. ``create_context(stream)`` gives one execution context per
  slot, and ``ExecContext.enqueue`` queues one batch on that slot's stream, reading the
  device input and writing the device outputs, without waiting (TensorRT's
  ``execute_async_v3``; PyTorch on a ``torch.cuda.ExternalStream``). ``ExecContext.letterbox``
  writes GPU pictures (NVDEC frames) into rows of the slot's input, and
  ``BatchExecutor.device_postprocess`` postprocesses a batch's outputs on the device; the
  PyTorch executor has both, TensorRT neither: config validation refuses NVDEC cameras with
  it, and its outputs are postprocessed on the host.

Tensors crossing the seam (one frame; the batch dimension comes first on the device):
input ``(H, W, 3)`` uint8 BGR letterboxed (the executors turn it into the model's float
NCHW on the GPU), each output float32 of ``ModelIO.outputs[i].shape``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vidpipe.types import Detections, DeviceImage, PostprocessRequest


@dataclass(frozen=True, slots=True)
class TensorIO:
    """Name and per-frame shape (no batch dimension) of one model tensor."""

    name: str
    shape: tuple[int, ...]

    @property
    def frame_elems(self) -> int:
        return int(np.prod(self.shape))


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """What an executor runs (the stream set adds where, into its ``BackendInfo``).

    Attributes:
        backend: the inference type (``torch``, ``tensorrt``).
        model: the model file's name.
        precision: the precision the model runs at.
        runtime: the software that runs it, its version and switches.
    """

    backend: str
    model: str
    precision: str
    runtime: str


@dataclass(frozen=True, slots=True)
class ModelIO:
    """What an executor takes and gives, per frame: u8 NHWC input, float32 outputs."""

    input: TensorIO
    outputs: tuple[TensorIO, ...]


class HostArray(Protocol):
    """Page-locked host memory and its numpy view."""

    ptr: int
    array: np.ndarray


class GpuRuntime(Protocol):
    """Memory, streams, events and copies of one device. Every method raises on failure."""

    device: int
    name: str
    compute_capability: tuple[int, int]

    def activate(self) -> None: ...
    def host_alloc(self, shape: tuple[int, ...], dtype: Any) -> HostArray: ...
    def host_free(self, buf: Any) -> None: ...
    def device_alloc(self, nbytes: int) -> int: ...
    def device_free(self, ptr: int) -> None: ...
    def mem_used(self) -> int: ...
    def stream_create(self) -> int: ...
    def stream_destroy(self, stream: int) -> None: ...
    def stream_probe(self, stream: int) -> None: ...
    def event_create(self) -> int: ...
    def event_destroy(self, event: int) -> None: ...
    def event_record(self, event: int, stream: int) -> None: ...
    def event_wait(self, event: int) -> None: ...
    def copy_h2d(self, dst: int, src: int, nbytes: int, stream: int) -> None: ...
    def copy_d2h(self, dst: int, src: int, nbytes: int, stream: int) -> None: ...
    def copy_d2d(self, dst: int, src: int, nbytes: int, stream: int) -> None: ...


class ExecContext(Protocol):
    """One slot's execution context, bound to the slot's stream and device buffers."""

    def enqueue(self, batch: int) -> None:
        """Queue inference of the first ``batch`` frames of the bound input on the stream."""
        ...

    def letterbox(self, rows: list[tuple[int, DeviceImage]]) -> None:
        """Queue, on the stream, the letterbox of each GPU picture into its row of the bound
        input (NV12 to BGR, resize, pad 114: ``vidpipe.preprocess.gpu``). Raises
        BackendError if the executor cannot read GPU pictures."""
        ...

    def close(self) -> None: ...


class DevicePostprocess(Protocol):
    """Postprocessing of a batch's outputs where they are, on the device."""

    def __call__(
        self, d_outputs: list[int], batch: int, requests: list[PostprocessRequest]
    ) -> list[Detections]:
        """Final detections of the first ``batch`` frames of ``d_outputs`` (device pointers,
        complete when called), one list entry per frame. Only these come back to the host."""
        ...


class BatchExecutor(Protocol):
    """A model that runs batches of 1..max_batch frames on a CUDA stream of one device."""

    io: ModelIO
    max_batch: int
    info: ExecutorInfo

    def device_postprocess(self, decoder: str) -> DevicePostprocess | None:
        """A new postprocessor for ``decoder`` (a model type) on this device, or None if the
        executor has none (the stream set then copies the raw outputs to the host). Each
        completion thread gets its own."""
        ...

    def create_context(self, stream: int, d_input: int, d_outputs: list[int]) -> ExecContext:
        """A context that reads ``d_input`` and writes ``d_outputs`` (device pointers)."""
        ...

    def close(self) -> None: ...
