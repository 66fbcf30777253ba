"""A fake of the GPU only, for CPU CI: the stream set's own code runs unchanged on top.

``FakeGpuRuntime`` emulates one device: "device memory" is ordinary host memory, each stream
is a worker thread running its queued operations in order (copies with ``ctypes.memmove``,
kernels, event records), and ``event_wait`` blocks until the stream reached the record.
``FakeExecutor`` is a model whose "kernel" runs on that stream: for every frame it writes
``[pixel (0,0,0), pixel (0,0,1), pixel (0,0,2), batch size]`` into its output, so a test
can tag each frame in its pixels and check that every result comes back to its own frame.

Faults can be injected: a non-sticky enqueue failure, or a sticky error seen by the next
event wait (like an illegal address in a kernel).
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidpipe.infer.base import BackendError
from vidpipe.infer.cuda_rt import CudaError
from vidpipe.infer.gpu_base import ExecutorInfo, ModelIO, TensorIO
from vidpipe.types import Detections, DeviceImage, PostprocessRequest

FRAME_SHAPE = (8, 8, 3)
OUT_SHAPE = (4,)


@dataclass
class FakeHost:
    ptr: int
    array: np.ndarray


class _Stream:
    def __init__(self, name: str) -> None:
        self.ops: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            op = self.ops.get()
            if op is None:
                return
            op()


class FakeGpuRuntime:
    """One emulated device (see the module docstring)."""

    def __init__(self, device: int = 0, kernel_s: float = 0.0) -> None:
        self.device = device
        self.name = f"Fake GPU {device}"
        self.compute_capability = (9, 0)
        self.kernel_s = kernel_s
        self._mem: dict[int, np.ndarray] = {}
        self._streams: dict[int, _Stream] = {}
        self._events: dict[int, threading.Event] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.sticky_on_next_wait: str | None = None
        self.copies = 0  # host <-> device
        self.device_copies = 0

    def activate(self) -> None:
        pass

    def _id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def host_alloc(self, shape: tuple[int, ...], dtype: Any) -> FakeHost:
        arr = np.zeros(shape, dtype)
        self._mem[arr.ctypes.data] = arr
        return FakeHost(arr.ctypes.data, arr)

    def host_free(self, buf: FakeHost) -> None:
        self._mem.pop(buf.ptr)

    def device_alloc(self, nbytes: int) -> int:
        arr = np.zeros(nbytes, np.uint8)
        self._mem[arr.ctypes.data] = arr
        return int(arr.ctypes.data)

    def device_free(self, ptr: int) -> None:
        self._mem.pop(ptr)

    def mem_used(self) -> int:
        return sum(a.nbytes for a in self._mem.values())

    def stream_create(self) -> int:
        sid = self._id()
        self._streams[sid] = _Stream(f"fake-stream-{sid}")
        return sid

    def stream_destroy(self, stream: int) -> None:
        self._streams.pop(stream).ops.put(None)

    def stream_probe(self, stream: int) -> None:
        pass

    def launch(self, stream: int, op: Callable[[], object]) -> None:
        self._streams[stream].ops.put(op)

    def event_create(self) -> int:
        eid = self._id()
        ev = threading.Event()
        ev.set()
        self._events[eid] = ev
        return eid

    def event_destroy(self, event: int) -> None:
        self._events.pop(event)

    def event_record(self, event: int, stream: int) -> None:
        ev = self._events[event]
        ev.clear()
        self.launch(stream, ev.set)

    def event_wait(self, event: int) -> None:
        if not self._events[event].wait(10.0):
            raise CudaError("cudaEventSynchronize", "cudaErrorLaunchTimeout", "fake timeout")
        if self.sticky_on_next_wait:
            name, self.sticky_on_next_wait = self.sticky_on_next_wait, None
            raise CudaError("cudaEventSynchronize", name, "injected by the test")

    def copy_h2d(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy(dst, src, nbytes, stream)

    def copy_d2h(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy(dst, src, nbytes, stream)

    def copy_d2d(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.device_copies += 1
        self.launch(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def _copy(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.copies += 1
        self.launch(stream, lambda: ctypes.memmove(dst, src, nbytes))


class FakeContext:
    def __init__(self, ex: FakeExecutor, stream: int, d_input: int, d_outputs: list[int]) -> None:
        self.ex, self.stream = ex, stream
        self.d_input, self.d_output = d_input, d_outputs[0]
        self.batches: list[int] = []
        self.letterboxed: list[list[int]] = []
        self.closed = False

    def enqueue(self, batch: int) -> None:
        if self.ex.fail_next_enqueue:
            self.ex.fail_next_enqueue = False
            raise BackendError("injected enqueue failure")
        self.batches.append(batch)
        frame = int(np.prod(FRAME_SHAPE))

        def kernel() -> None:
            if self.ex.runtime.kernel_s:
                time.sleep(self.ex.runtime.kernel_s)
            src = (ctypes.c_uint8 * (batch * frame)).from_address(self.d_input)
            x = np.ctypeslib.as_array(src).reshape(batch, *FRAME_SHAPE)
            dst = (ctypes.c_float * (batch * 4)).from_address(self.d_output)
            y = np.ctypeslib.as_array(dst).reshape(batch, 4)
            y[:, :3] = x[:, 0, 0, :]
            y[:, 3] = batch

        self.ex.runtime.launch(self.stream, kernel)

    def letterbox(self, rows: list[tuple[int, DeviceImage]]) -> None:
        """The "GPU letterbox": on the stream, each picture's first 3 bytes become its row's
        pixel (0, 0) and the rest of the row is 114 (a tag survives only through this)."""
        if self.ex.fail_letterbox:
            raise BackendError("injected letterbox failure")
        self.letterboxed.append([row for row, _ in rows])
        frame = int(np.prod(FRAME_SHAPE))

        def kernel() -> None:
            for row, image in rows:
                if image.ready is not None:
                    image.ready.wait(10.0)  # the fake decoder's "event"
                dst = (ctypes.c_uint8 * frame).from_address(self.d_input + row * frame)
                x = np.ctypeslib.as_array(dst).reshape(FRAME_SHAPE)
                x[...] = 114
                x[0, 0] = np.asarray(image.nv12).reshape(-1)[:3]

        self.ex.runtime.launch(self.stream, kernel)

    def close(self) -> None:
        self.closed = True


class FakeExecutor:
    """A model that echoes each frame's tag pixels (see the module docstring)."""

    def __init__(self, runtime: FakeGpuRuntime, max_batch: int) -> None:
        self.runtime = runtime
        self.max_batch = max_batch
        self.io = ModelIO(TensorIO("images", FRAME_SHAPE), (TensorIO("output", OUT_SHAPE),))
        self.info = ExecutorInfo("fake-gpu", "echo", "f32", "fake kernels")
        self.contexts: list[FakeContext] = []
        self.fail_next_enqueue = False
        self.fail_letterbox = False
        self.fail_postprocess = False
        self.postprocessors: list[FakePostprocess] = []
        self.closed = False

    def device_postprocess(self, decoder: str) -> FakePostprocess | None:
        if decoder != "yolox":
            return None
        post = FakePostprocess(self)
        self.postprocessors.append(post)
        return post

    def create_context(self, stream: int, d_input: int, d_outputs: list[int]) -> FakeContext:
        ctx = FakeContext(self, stream, d_input, d_outputs)
        self.contexts.append(ctx)
        return ctx

    def close(self) -> None:
        self.closed = True


class FakePostprocess:
    """The "GPU postprocessing" of the echo model: reads a batch's device output copy and
    makes one detection per frame (class = tag ``a``, score codes tag ``b``, box = the frame's
    size from its letterbox, so a request mixed up between frames shows)."""

    def __init__(self, ex: FakeExecutor) -> None:
        self.ex = ex
        self.batches: list[int] = []
        self.thread: set[str] = set()

    def __call__(
        self, d_outputs: list[int], batch: int, requests: list[PostprocessRequest]
    ) -> list[Detections]:
        if self.ex.fail_postprocess:
            raise BackendError("injected postprocess failure")
        self.batches.append(batch)
        self.thread.add(threading.current_thread().name)
        src = (ctypes.c_float * (batch * 4)).from_address(d_outputs[0])
        y = np.ctypeslib.as_array(src).reshape(batch, 4).copy()
        out = []
        for row, r in zip(y, requests, strict=True):
            box = np.array([[0, 0, r.letterbox.src_w, r.letterbox.src_h]], np.float32)
            score = np.array([(row[1] + 0.5) / 256], np.float32)
            out.append(Detections(box, score, np.array([int(row[0])])))
        return out


def device_frame(a: int, b: int, c: int = 0, gpu: int = 0) -> DeviceImage:
    """A fake GPU picture (16x12 NV12 in host memory) whose first bytes carry ``(a, b, c)``."""
    nv12 = np.zeros((18, 16), np.uint8)
    nv12[0, :3] = (a, b, c)
    return DeviceImage(nv12, gpu, 16, 12, lambda: np.zeros((12, 16, 3), np.uint8))


def tagged_frame(a: int, b: int, c: int = 0) -> np.ndarray:
    """A ``(1, 8, 8, 3)`` u8 input whose pixel (0, 0) carries the tag ``(a, b, c)``."""
    x = np.zeros((1, *FRAME_SHAPE), np.uint8)
    x[0, 0, 0] = (a, b, c)
    return x
