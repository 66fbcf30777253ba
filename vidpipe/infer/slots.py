"""One GPU's stream set: K slots, each with its own stream, context and buffers.

A slot owns an execution context, a CUDA stream, device input and output buffers, and two
*I/O sets* (double buffering): each I/O set is a pinned host input, pinned host outputs and a
completion event. While one I/O set's batch is copied and run, the batcher fills the other:
each row of its pinned input is lent, as an ``InputBuffer``, to the scheduler, which
letterboxes a frame straight into it. An I/O set is free again only after its batch
completed, so no row of a batch being copied to the device is ever lent.
Both may be queued on the slot's stream at once: stream order keeps the shared device buffers
safe (the second batch's host-to-device copy runs after the first batch's device-to-host copy).

A submission on a slot (``DeviceStreamSet.dispatch``):

1. copies host to device asynchronously,
2. binds the tensor addresses and enqueues the batch (the executor: ``set_tensor_address`` +
   ``execute_async_v3`` for TensorRT),
3. copies device to host asynchronously, or, when every frame's tag asks for postprocessing
   on the device (``SubmitTag``) and the executor has it (``device_postprocess``: YOLOX with
   the torch executor), device to device into the I/O set's own output copy (the slot's
   outputs are overwritten by its next batch),
4. records the I/O set's event.

One completion thread per slot waits on its events in submission order (never
``cudaStreamSynchronize`` on the submitting thread), copies the batch's outputs out of the
pinned buffers (or postprocesses the device copy, so that only each frame's kept detections
come back), frees the I/O set, and hands every frame's ``Completion`` to its callback.
A thread per slot rather than per device: the output copies (1.2 MB a frame for YOLOX at
416) then run side by side, the GIL released by numpy, instead of queueing behind each other.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vidpipe.infer.cuda_rt import CudaError, FatalDeviceError
from vidpipe.infer.gpu_base import (
    BatchExecutor,
    DevicePostprocess,
    ExecContext,
    GpuRuntime,
    HostArray,
)
from vidpipe.preprocess.buffers import InputBuffer, input_buffer
from vidpipe.types import Completion, SubmitTag, TensorSpec

log = logging.getLogger(__name__)

OnDone = Callable[[Completion], None]


@dataclass(eq=False)
class IoSet:
    """Half of a slot's double buffer: pinned input, pinned outputs, completion event."""

    slot: Slot
    index: int
    host_in: HostArray
    host_out: list[HostArray]
    event: int
    # one lendable InputBuffer per row of ``host_in`` (views: the pinned memory itself)
    rows: list[InputBuffer] = field(default_factory=list)
    # device copies of the outputs, for postprocessing on the device (allocated on first use)
    d_out: list[int] = field(default_factory=list)


@dataclass(eq=False)
class Slot:
    """A stream with its context and device buffers."""

    index: int
    stream: int
    d_input: int
    d_outputs: list[int]
    ctx: ExecContext | None = None
    io_sets: list[IoSet] = field(default_factory=list)
    queued: int = 0  # batches enqueued on the stream and not yet completed
    fifo: queue.SimpleQueue[Batch | None] = field(default_factory=queue.SimpleQueue)
    thread: threading.Thread | None = None
    # decoder -> this slot's device postprocessor (None: the executor has none)
    post: dict[str, DevicePostprocess | None] = field(default_factory=dict)


@dataclass(eq=False)
class Batch:
    """Frames gathered into one I/O set: (tag, on_done, submit time) per frame, in order.

    ``device_rows`` are the rows whose frame is still on the GPU (an NVDEC picture): their
    host input row is unused; the dispatch letterboxes the picture into the device input.
    """

    io: IoSet
    owner: DeviceStreamSet
    t_open: float
    entries: list[tuple[Any, OnDone, float]] = field(default_factory=list)
    device_rows: list[tuple[int, Any]] = field(default_factory=list)
    post: DevicePostprocess | None = None  # set at dispatch: postprocessed on the device


class DeviceStreamSet:
    """K slots on one device and the completion thread that serves them.

    Args:
        runtime: the device's CUDA runtime (checked calls).
        executor: the model, already loaded on this device.
        streams: number of slots K.
        on_frames_done: called with the number of frames finished (success or error) after
            their I/O set is free again; the batcher uses it for accounting.
        on_fatal: called once with the sticky error that made this device unusable.
    """

    def __init__(
        self,
        runtime: GpuRuntime,
        executor: BatchExecutor,
        streams: int,
        on_frames_done: Callable[[int], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.runtime = runtime
        self.executor = executor
        self.max_batch = executor.max_batch
        self._on_frames_done = on_frames_done
        self._on_fatal = on_fatal
        self.slots: list[Slot] = []
        self._free: list[IoSet] = []
        self._enqueue_lock = threading.Lock()
        self.pending = 0  # frames dispatched to this device and not yet released
        self.fatal: BaseException | None = None
        self.batches = 0
        self.frames = 0
        self._lock = threading.Lock()  # guards _free and Slot.queued
        try:
            for i in range(streams):
                slot = Slot(i, runtime.stream_create(), 0, [])
                self.slots.append(slot)  # registered first so that a failure frees it
                self._fill_slot(slot)
        except BaseException:
            self._free_resources()
            raise
        self._free = [io for s in self.slots for io in s.io_sets]
        for slot in self.slots:
            slot.thread = threading.Thread(
                target=self._completion_loop,
                args=(slot,),
                name=f"vidpipe-gpu{runtime.device}-slot{slot.index}",
                daemon=True,
            )
            slot.thread.start()

    def _fill_slot(self, slot: Slot) -> None:
        rt, io, b = self.runtime, self.executor.io, self.max_batch
        slot.d_input = rt.device_alloc(b * io.input.frame_elems)
        for out in io.outputs:
            slot.d_outputs.append(rt.device_alloc(b * out.frame_elems * 4))
        spec = TensorSpec(io.input.name, (1, *io.input.shape), "u8", "NHWC")
        for j in range(2):
            host_in = rt.host_alloc((b, *io.input.shape), np.uint8)
            host_out = [rt.host_alloc((b, *o.shape), np.float32) for o in io.outputs]
            io_set = IoSet(slot, j, host_in, host_out, rt.event_create())
            io_set.rows = [input_buffer(spec, r, host_in.array[r : r + 1]) for r in range(b)]
            slot.io_sets.append(io_set)
        slot.ctx = self.executor.create_context(slot.stream, slot.d_input, list(slot.d_outputs))

    # ------------------------------------------------------------------ gathering

    def free_io_sets(self) -> int:
        with self._lock:
            return len(self._free)

    def take_io_set(self) -> IoSet | None:
        """A free I/O set, from the slot with the fewest queued batches (spreads streams)."""
        with self._lock:
            if not self._free:
                return None
            best = min(self._free, key=lambda io: (io.slot.queued, io.slot.index))
            self._free.remove(best)
            return best

    def return_io_set(self, io: IoSet) -> None:
        """Give back an I/O set taken for a batch that got no frame."""
        with self._lock:
            self._free.append(io)

    # ------------------------------------------------------------------ submission

    def dispatch(self, batch: Batch) -> None:
        """Queue one gathered batch on its slot's stream (never waits for the GPU)."""
        n = len(batch.entries)
        io, slot = batch.io, batch.io.slot
        rt = self.runtime
        with self._lock:
            self.pending += n
        with self._enqueue_lock:
            if self.fatal is not None:
                self._fail(batch, self.fatal)
                return
            try:
                rt.activate()
                assert slot.ctx is not None
                if len(batch.device_rows) < n:  # some frames came letterboxed from the host
                    rt.copy_h2d(
                        slot.d_input,
                        io.host_in.ptr,
                        n * self.executor.io.input.frame_elems,
                        slot.stream,
                    )
                if batch.device_rows:  # after the copy on the stream: it overwrites those rows
                    slot.ctx.letterbox(batch.device_rows)
                slot.ctx.enqueue(n)
                batch.post = self._post_for(batch)
                self._copy_outputs(batch, n)
                rt.event_record(io.event, slot.stream)
            except BaseException as exc:
                self._dispatch_failed(batch, exc)
                return
            with self._lock:
                slot.queued += 1
            self.batches += 1
            self.frames += n
            slot.fifo.put(batch)  # inside the lock: completion order follows enqueue order

    def _post_for(self, batch: Batch) -> DevicePostprocess | None:
        """The slot's device postprocessor when every frame asks for the same decoder."""
        names = {
            tag.postprocess.decoder if isinstance(tag, SubmitTag) and tag.postprocess else None
            for tag, _, _ in batch.entries
        }
        name = names.pop() if len(names) == 1 else None
        if name is None:
            return None
        slot = batch.io.slot
        if name not in slot.post:
            slot.post[name] = self.executor.device_postprocess(name)
        return slot.post[name]

    def _copy_outputs(self, batch: Batch, n: int) -> None:
        """Queue the outputs' copies: to the I/O set's device copy when they are
        postprocessed on the device (the slot's own outputs are overwritten by its next
        batch), else to its pinned host outputs."""
        io, slot, rt = batch.io, batch.io.slot, self.runtime
        outputs = self.executor.io.outputs
        if batch.post is not None and not io.d_out:
            io.d_out = [rt.device_alloc(self.max_batch * o.frame_elems * 4) for o in outputs]
        for i, (out, d_out) in enumerate(zip(outputs, slot.d_outputs, strict=True)):
            nbytes = n * out.frame_elems * 4
            if batch.post is not None:
                rt.copy_d2d(io.d_out[i], d_out, nbytes, slot.stream)
            else:
                rt.copy_d2h(io.host_out[i].ptr, d_out, nbytes, slot.stream)

    def _dispatch_failed(self, batch: Batch, exc: BaseException) -> None:
        """Decide whether the device is gone (sticky) or only this batch failed."""
        sticky = isinstance(exc, CudaError) and exc.sticky
        if not sticky:
            try:  # an executor error may hide a sticky CUDA error: ask the stream
                self.runtime.stream_probe(batch.io.slot.stream)
            except CudaError as probe:
                sticky, exc = probe.sticky, probe if probe.sticky else exc
        if sticky:
            self._fail(batch, self._go_fatal(exc))
        else:
            log.error(
                "GPU %d: batch of %d failed: %s", self.runtime.device, len(batch.entries), exc
            )
            self._fail(batch, exc)

    def _go_fatal(self, exc: BaseException) -> BaseException:
        """Mark the device unusable (once) and tell the batcher; returns the fatal error."""
        if self.fatal is None:
            fatal = FatalDeviceError(f"GPU {self.runtime.device} is unusable: {exc}")
            fatal.__cause__ = exc
            self.fatal = fatal
            log.critical("%s", fatal)
            self._on_fatal(fatal)
        return self.fatal

    # ------------------------------------------------------------------ completion

    def _completion_loop(self, slot: Slot) -> None:
        try:
            self.runtime.activate()
        except BaseException as exc:
            self._go_fatal(exc)
        while True:
            batch = slot.fifo.get()
            if batch is None:
                return
            try:
                self._complete(batch)
            except BaseException:  # never let the thread die: later batches still need it
                log.exception("GPU %d: completion handling failed", self.runtime.device)

    def _complete(self, batch: Batch) -> None:
        io = batch.io
        if self.fatal is None:
            try:
                self.runtime.event_wait(io.event)
            except BaseException as exc:
                # Any failure seen by an event wait is asynchronous and device-wide.
                self._go_fatal(exc)
        with self._lock:
            io.slot.queued -= 1
        if self.fatal is not None:
            self._fail(batch, self.fatal)
            return
        if batch.post is not None:
            self._complete_on_device(batch, batch.post)
            return
        t_done = time.perf_counter()
        n = len(batch.entries)
        copies = [h.array[:n].copy() for h in io.host_out]  # one copy per batch and output
        per_frame = [tuple(c[i : i + 1] for c in copies) for i in range(n)]
        entries = batch.entries
        self._release(batch)
        for (tag, on_done, t0), outputs in zip(entries, per_frame, strict=True):
            self._deliver(on_done, Completion(tag, outputs, t_done - t0))

    def _complete_on_device(self, batch: Batch, post: DevicePostprocess) -> None:
        """Postprocess the batch's device outputs; only the kept detections come back."""
        requests = [tag.postprocess for tag, _, _ in batch.entries]
        try:
            found = post(batch.io.d_out, len(batch.entries), requests)
        except BaseException as exc:
            log.error("GPU %d: postprocessing a batch failed: %s", self.runtime.device, exc)
            self._fail(batch, exc)
            return
        t_done = time.perf_counter()
        entries = batch.entries
        self._release(batch)
        for (tag, on_done, t0), dets in zip(entries, found, strict=True):
            self._deliver(on_done, Completion(tag, dets, t_done - t0))

    def fail_undispatched(self, batch: Batch, exc: BaseException) -> None:
        """Fail a gathered batch that was never dispatched (the device died meanwhile)."""
        with self._lock:
            self.pending += len(batch.entries)
        self._fail(batch, exc)

    def _fail(self, batch: Batch, exc: BaseException) -> None:
        entries = batch.entries
        self._release(batch)
        now = time.perf_counter()
        for tag, on_done, t0 in entries:
            self._deliver(on_done, Completion(tag, exc, now - t0))

    def _release(self, batch: Batch) -> None:
        n = len(batch.entries)
        batch.entries = []
        batch.device_rows = []  # the pictures were read by the batch's kernels: let them go
        batch.post = None
        with self._lock:
            self._free.append(batch.io)
            self.pending -= n
        self._on_frames_done(n)

    @staticmethod
    def _deliver(on_done: OnDone, completion: Completion) -> None:
        try:
            on_done(completion)
        except BaseException:
            log.exception("inference completion handler failed")

    # ------------------------------------------------------------------ shutdown

    def close(self, timeout_s: float) -> None:
        """Stop the completion threads (after what is queued) and free everything."""
        deadline = time.monotonic() + timeout_s
        for slot in self.slots:
            slot.fifo.put(None)
        for slot in self.slots:
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))
                if slot.thread.is_alive():
                    log.warning(
                        "GPU %d: completion thread of slot %d still alive; buffers kept",
                        self.runtime.device,
                        slot.index,
                    )
                    return
        self._free_resources()

    def _free_resources(self) -> None:
        rt = self.runtime
        for slot in self.slots:
            for what, release in self._slot_releases(slot):
                try:
                    release()
                except BaseException as exc:  # a dead device refuses frees: nothing to save
                    log.debug("GPU %d: %s at close: %s", rt.device, what, exc)
        self.slots = []
        self._free = []

    def _slot_releases(self, slot: Slot) -> list[tuple[str, Callable[[], None]]]:
        rt = self.runtime
        out: list[tuple[str, Callable[[], None]]] = []
        if slot.ctx is not None:
            out.append(("context", slot.ctx.close))
        for io in slot.io_sets:
            out.append(("event", functools.partial(rt.event_destroy, io.event)))
            out.append(("host input", functools.partial(rt.host_free, io.host_in)))
            out += [("host output", functools.partial(rt.host_free, h)) for h in io.host_out]
            out += [("device output copy", functools.partial(rt.device_free, p)) for p in io.d_out]
        if slot.d_input:
            out.append(("device input", functools.partial(rt.device_free, slot.d_input)))
        out += [("device output", functools.partial(rt.device_free, p)) for p in slot.d_outputs]
        out.append(("stream", functools.partial(rt.stream_destroy, slot.stream)))
        return out
