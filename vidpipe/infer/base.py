"""The inference backend interface: two descriptions and five methods.

A backend tells the scheduler how to drive it in one frozen ``SchedulingHints`` and what runs
where in one frozen ``BackendInfo``; the scheduler never asks which backend it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vidpipe.preprocess.buffers import InputBuffer
from vidpipe.types import Completion, TensorSpec


class BackendError(Exception):
    """A model or device problem found while building a backend (clear message, no limping on)."""


class FatalDeviceError(BackendError):
    """The device is unusable for the rest of the process (e.g. a sticky CUDA error).

    A backend puts it in the ``Completion`` of every frame it can no longer serve; the scheduler
    then calls its ``on_fatal`` hook once, and the daemon exits non-zero so that its
    supervisor restarts it, rather than serving errors for hours.
    """


BatchObserver = Callable[[int], None]
"""Called with the frame count of every batch sent to the device."""


def ignore_batch(_frames: int) -> None:
    """The batch observer until one is set: nobody watches batch sizes."""


@dataclass(frozen=True, slots=True)
class SchedulingHints:
    """How the scheduler should drive a backend.

    Attributes:
        capacity: frames that may be in flight at once.
        in_flight_floor: the fewest requests the scheduler may keep in flight (one per
            device stream), or None: it keeps ``capacity`` in flight.
        uses_every_core: one inference runs on every host core (OpenVINO on the CPU with
            one stream: the latency hint): a file camera's next decode then waits for it
            to end instead of slowing it (``TurnClock``).
        time_turns: give file cameras a decode turn only when their frame will be needed
            soon (``TurnClock``), so that decoded frames do not age in the hub. Only for a
            backend with an ``in_flight_floor``: a batching backend wants every frame it can
            get, and its batches are not the clock's one-request-per-stream model.
        completions_on_scheduler: with a hub, the scheduler's thread postprocesses between
            submissions (``vidpipe.schedule.completions``) instead of a thread of its own:
            right for a backend whose submissions wait for exactly those completions (a
            request pool), wrong for a batching one, whose many completions per batch would
            hold up the filling of the next batch.
    """

    capacity: int
    in_flight_floor: int | None = None
    uses_every_core: bool = False
    time_turns: bool = False
    completions_on_scheduler: bool = False


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What runs where: logged at start, exported as ``vidpipe_inference_info``'s labels
    (backend, device, precision, hint, model) and read by the benchmarks.

    Attributes:
        backend: the inference type (``openvino``, ``torch``, ``tensorrt``).
        device: where it runs (``CPU``, ``cuda:0 NVIDIA H200``...).
        model: the model file's name.
        precision: the precision the model runs at (``int8`` for a quantized model).
        float_precision: the precision of the device's float arithmetic (``f32``,
            ``bf16``...): ``precision`` unless the model is quantized.
        hint: how the device is driven (OpenVINO's performance hint; the GPU's batching).
        requests: frames the backend holds in flight at most.
        streams: requests the device runs at once.
        optimal_requests: the device's own advice for ``requests``, if it gives one.
        runtime: the software that runs the model, its version and switches.
    """

    backend: str
    device: str
    model: str
    precision: str
    float_precision: str
    hint: str
    requests: int
    streams: int
    optimal_requests: int | None = None
    runtime: str = ""


class InferenceBackend(Protocol):
    """An asynchronous inference device with a fixed number of in-flight slots, which owns
    its input memory and lends it one frame at a time.

    One frame's way: ``lend`` (wait for a free slot; get the memory its input goes to),
    ``InputBuffer.fill`` (the letterbox writes straight into that memory), ``submit``. The
    lent memory is never busy: the backend lends only memory that no request or copy in
    flight reads. A buffer lent and not submitted stays lent: the next ``lend`` returns it
    again.

    ``lend`` and ``submit`` are called from one thread only (the scheduler). ``on_done`` runs
    on the backend's own thread: it must only hand the completion on. Errors travel inside
    the ``Completion``; they are never raised on a foreign thread.

    Attributes:
        input_spec: the input the model takes (what the lent buffers hold).
        output_shapes: shape of each output, batch dimension 1.
        hints: how the scheduler should drive this backend.
        info: what runs where.
    """

    input_spec: TensorSpec
    output_shapes: list[tuple[int, ...]]
    hints: SchedulingHints
    info: BackendInfo

    def lend(self, timeout_s: float) -> InputBuffer | None:
        """Wait for a free slot and lend the memory of the next frame's input.

        Returns None if no slot freed up within ``timeout_s``. Raises BackendError when
        closed, FatalDeviceError when the device is unusable.
        """
        ...

    def submit(self, buffer: InputBuffer, tag: Any, on_done: Callable[[Completion], None]) -> None:
        """Start inference on the lent ``buffer``, filled since it was lent.

        A buffer that holds a GPU frame (``InputBuffer.device``, an NVDEC picture) is
        accepted only by the GPU backend, which letterboxes it into its device batch; config
        validation keeps such frames from the others. Raises BackendError when the frame is
        refused before it was queued (no completion will come).
        """
        ...

    def observe_batches(self, observer: BatchObserver) -> None:
        """Call ``observer`` with the frame count of every batch sent to the device from now
        on, on whichever thread sends it (whoever exports metrics sets it; one at a time)."""
        ...

    def drain(self, timeout_s: float) -> bool:
        """Wait for every in-flight request; False if some are still running at the timeout."""
        ...

    def close(self) -> None:
        """Release the device (idempotent)."""
        ...
