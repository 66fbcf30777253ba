"""The GPU inference backend: cross-camera batching over one stream set per GPU.

The scheduler takes frames round-robin across cameras (``FrameHub``) and submits them one at
a time, as with OpenVINO. This backend gathers them, like DeepStream's
nvstreammux: a batch is *open* until it holds ``max_batch`` frames or ``batch_timeout_ms``
has passed since its first frame, then it is dispatched to its GPU's stream set. ``lend``
gives the scheduler the next row of the open batch's pinned input, and the host frame is
letterboxed straight into it: no second copy. (If the batch's timer dispatched it while the
frame was being letterboxed, the row is outside the batch's copy, which had already started;
``submit`` then copies that one frame into the next batch, counted in ``input_copies``.)
A frame still on the GPU (NVDEC) is letterboxed at dispatch into the slot's device input, on
the slot's stream, one call per batch into the executor. Round-robin order and
fairness carry over unchanged, and each frame's outputs come back to its own callback with
its own tag (the camera and frame travel in the tag).

Several GPUs: a new batch goes to the least-loaded one (fewest frames gathered or queued).

Accounting: ``capacity`` is the number of frames the backend can hold (every I/O set full);
``lend`` waits while the open batch is full and no I/O set is free. The scheduler keeps the
whole capacity in flight and postprocesses on a thread of its own (``SchedulingHints``'
defaults): batching wants every frame it can get, and a batch's many completions would
otherwise hold up the filling of the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vidpipe.infer.base import (
    BackendError,
    BackendInfo,
    BatchObserver,
    SchedulingHints,
    ignore_batch,
)
from vidpipe.infer.cuda_rt import FatalDeviceError
from vidpipe.infer.gpu_base import BatchExecutor, GpuRuntime
from vidpipe.infer.slots import Batch, DeviceStreamSet
from vidpipe.preprocess.buffers import InputBuffer
from vidpipe.types import Completion, TensorSpec

log = logging.getLogger(__name__)

_IO_WAIT_S = 30.0  # a submit waiting this long for a free I/O set means a hung device


class StreamSetBackend:
    """``InferenceBackend`` over per-GPU stream sets with cross-camera batching.

    Args:
        devices: ``(runtime, executor)`` per GPU; the backend owns and closes them.
        streams: slots per GPU.
        batch_timeout_ms: how long an open batch waits for more frames.
    """

    def __init__(
        self,
        devices: Sequence[tuple[GpuRuntime, BatchExecutor]],
        streams: int,
        batch_timeout_ms: float,
    ) -> None:
        if not devices:
            raise BackendError("the GPU backend needs at least one device")
        executors = [ex for _, ex in devices]
        io = executors[0].io
        self.max_batch = min(ex.max_batch for ex in executors)
        self.input_spec = TensorSpec(io.input.name, (1, *io.input.shape), "u8", "NHWC")
        self.output_shapes = [(1, *o.shape) for o in io.outputs]
        self._timeout_s = batch_timeout_ms / 1000.0
        self._cond = threading.Condition()
        self._open: Batch | None = None
        self._inflight = 0
        self._closed = False
        self._observe_batch: BatchObserver = ignore_batch
        self.input_copies = 0  # host frames copied a second time (see the module docstring)
        self.fatal: BaseException | None = None
        self.sets: list[DeviceStreamSet] = []
        try:
            for rt, ex in devices:
                self.sets.append(
                    DeviceStreamSet(rt, ex, streams, self._frames_done, self._device_fatal)
                )
        except BaseException:
            for s in self.sets:
                s.close(1.0)
            for ex in executors:
                ex.close()
            raise
        self._executors = executors
        self.capacity = sum(2 * streams * s.max_batch for s in self.sets)
        self.hints = SchedulingHints(capacity=self.capacity)  # see the module docstring
        self.info = self._info(devices, streams, batch_timeout_ms)
        self._flusher = threading.Thread(
            target=self._flush_loop, name="vidpipe-gpu-batcher", daemon=True
        )
        self._flusher.start()

    def _info(
        self,
        devices: Sequence[tuple[GpuRuntime, BatchExecutor]],
        streams: int,
        batch_timeout_ms: float,
    ) -> BackendInfo:
        ex = devices[0][1].info
        return BackendInfo(
            backend=ex.backend,
            device=", ".join(f"cuda:{rt.device} {rt.name}" for rt, _ in devices),
            model=ex.model,
            precision=ex.precision,
            float_precision=ex.precision,
            hint=f"max_batch {self.max_batch}, timeout {batch_timeout_ms:g} ms",
            requests=self.capacity,
            streams=streams * len(devices),
            runtime=ex.runtime,
        )

    # ------------------------------------------------------------------ accounting

    def _frames_done(self, n: int) -> None:
        with self._cond:
            self._inflight -= n
            self._cond.notify_all()

    def _device_fatal(self, exc: BaseException) -> None:
        """A GPU hit a sticky error: refuse new work; the scheduler sees FatalDeviceError in
        the completions."""
        with self._cond:
            if self.fatal is None:
                self.fatal = exc
            batch, self._open = self._open, None
            self._cond.notify_all()
        if batch is not None:
            # Not dispatched: this may run inside a dispatch on the broken device.
            batch.owner.fail_undispatched(batch, self.fatal or exc)

    def _room(self) -> bool:
        if self._closed or self.fatal is not None:
            return True  # submit will raise: don't keep the caller waiting
        if self._open is not None and len(self._open.entries) < self._open.owner.max_batch:
            return True
        return any(s.free_io_sets() for s in self.sets if s.fatal is None)

    def in_flight(self) -> int:
        """Frames submitted and not yet completed (diagnostics)."""
        with self._cond:
            return self._inflight

    # ------------------------------------------------------------------ submission

    def lend(self, timeout_s: float) -> InputBuffer | None:
        """The next row of the open batch's pinned input; a batch is opened, on the
        least-loaded GPU, when none is. None if the open batch stayed full and no I/O set
        freed up within ``timeout_s``.

        One thread lends (the scheduler's): the row lent is the one after the open batch's
        last submitted frame, so a second ``lend`` before the first frame's ``submit`` gives
        the same row. Four bench threads lending at once wrote into each other's rows and
        fell to 0.04 of the tight loop on the H200; the daemon never does this."""
        with self._cond:
            if not self._cond.wait_for(self._room, timeout_s):
                return None
            if self._closed:
                raise BackendError("backend is closed")
            if self.fatal is not None:
                raise FatalDeviceError(str(self.fatal))
            batch = self._open or self._open_batch()
            return batch.io.rows[len(batch.entries)]

    def submit(self, buffer: InputBuffer, tag: Any, on_done: Callable[[Completion], None]) -> None:
        """Add the lent ``buffer``'s frame to the open batch: a host frame letterboxed into
        its row, or a GPU frame (``buffer.device``, kept as it is and letterboxed on the GPU
        into the batch's device input at dispatch: no pixel crosses to the host).

        A device frame joins a batch on its own GPU: an open batch on another GPU is
        dispatched first. The frame's ``Completion`` (outputs with a batch dimension of 1)
        reaches ``on_done`` on the completion thread. Raises BackendError when closed or
        given a bad frame, FatalDeviceError when the GPU is unusable.
        """
        device = buffer.device
        if device is None and (
            buffer.hwc.shape != self.input_spec.shape[1:] or buffer.hwc.dtype != np.uint8
        ):
            raise BackendError(
                f"GPU backend expects a uint8 frame of shape {self.input_spec.shape[1:]}, got "
                f"{buffer.hwc.dtype} {buffer.hwc.shape}"
            )
        gpu = None if device is None else self._set_index(device.gpu)
        ready: list[Batch] = []
        with self._cond:
            batch = self._open
            if batch is not None and gpu is not None and batch.owner is not self.sets[gpu]:
                self._open = None  # a device frame cannot join another GPU's batch
                if batch.entries:
                    ready.append(batch)
                else:
                    batch.owner.return_io_set(batch.io)
                batch = None
            batch = batch or self._open_batch(gpu)
            self._add(batch, buffer, tag, on_done)
            if len(batch.entries) >= batch.owner.max_batch:
                ready.append(batch)
                self._open = None
        for full in ready:
            self._dispatch(full)

    def _add(self, batch: Batch, buffer: InputBuffer, tag: Any, on_done: Any) -> None:
        """Put ``buffer``'s frame in the next row of ``batch`` (lock held)."""
        row = len(batch.entries)
        if buffer.device is not None:
            batch.device_rows.append((row, buffer.device))
            buffer.device = None  # the row must not keep a GPU picture alive after its batch
        elif buffer is not batch.io.rows[row]:
            # The frame is not in this row: the batch it was lent from left on its timer
            # while the frame was letterboxed (or the buffer is not one of ours). One copy,
            # counted. In this row it is already where the batch's copy to the device reads.
            target = batch.io.rows[row]
            np.copyto(target.hwc, buffer.hwc)
            target.padded_for = buffer.padded_for  # the row now holds the source's pad
            self.input_copies += 1
        if row == 0:
            batch.t_open = time.monotonic()  # the timer runs from the first frame
            self._cond.notify_all()  # the flusher starts this batch's timer
        batch.entries.append((tag, on_done, time.perf_counter()))
        self._inflight += 1

    def _set_index(self, gpu: int) -> int:
        for i, s in enumerate(self.sets):
            if s.runtime.device == gpu:
                return i
        raise BackendError(
            f"a frame decoded on GPU {gpu}, but this backend runs on GPU(s) "
            f"{[s.runtime.device for s in self.sets]}"
        )

    def _open_batch(self, only: int | None = None) -> Batch:
        """A new open batch on the least-loaded GPU with a free I/O set, or on the set
        ``only`` (lock held)."""
        deadline = time.monotonic() + _IO_WAIT_S
        while True:
            if self._closed:
                raise BackendError("backend is closed")
            if self.fatal is not None:
                raise FatalDeviceError(str(self.fatal))
            sets = self.sets if only is None else [self.sets[only]]
            for s in sorted(sets, key=lambda s: s.pending):
                io = s.take_io_set() if s.fatal is None else None
                if io is not None:
                    self._open = Batch(io, s, time.monotonic())
                    return self._open
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"no free GPU I/O set for {_IO_WAIT_S:.0f} s (device hung?)")
            self._cond.wait(min(left, 0.1))

    def _dispatch(self, batch: Batch) -> None:
        self._observe_batch(len(batch.entries))
        batch.owner.dispatch(batch)

    def _flush_loop(self) -> None:
        """Dispatch an open batch once it has waited ``batch_timeout_ms``."""
        with self._cond:
            while True:
                batch = self._open
                if batch is None or not batch.entries:  # a batch lent from, still empty
                    if self._closed:
                        return
                    self._cond.wait()
                    continue
                wait_s = batch.t_open + self._timeout_s - time.monotonic()
                if wait_s > 0 and not self._closed:
                    self._cond.wait(wait_s)
                    continue
                self._open = None
                self._cond.release()
                try:
                    self._dispatch(batch)
                finally:
                    self._cond.acquire()

    def observe_batches(self, observer: BatchObserver) -> None:
        """``observer`` is called with every batch's frame count as it is dispatched, on the
        scheduler's thread or the batcher's (a batch dispatched on its timer)."""
        self._observe_batch = observer

    def flush(self) -> None:
        """Dispatch the open batch now (drain and benchmarks)."""
        with self._cond:
            batch, self._open = self._open, None
        if batch is not None and batch.entries:
            self._dispatch(batch)
        elif batch is not None:  # lent from, never filled
            batch.owner.return_io_set(batch.io)

    # ------------------------------------------------------------------ shutdown

    def drain(self, timeout_s: float) -> bool:
        self.flush()
        with self._cond:
            return self._cond.wait_for(lambda: self._inflight <= 0, timeout_s)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        drained = self.drain(5.0)
        if not drained:
            log.warning("closing with %d frames still on the GPU", self.in_flight())
        self._flusher.join(1.0)
        for s in self.sets:
            s.close(5.0 if drained else 0.5)
        for ex in self._executors:
            try:
                ex.close()
            except BaseException as exc:
                log.debug("executor close: %s", exc)
