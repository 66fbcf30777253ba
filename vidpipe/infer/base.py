"""The inference backend interface: small on purpose (four methods)."""

from __future__ import annotations

from collections.abc import Callable
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


def ignore_batch(_frames: int) -> None:
    """The default ``observe_batch``: nobody watches batch sizes."""


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
        capacity: frames that may be in flight at once.
        in_flight_floor: the fewest requests the scheduler may keep in flight (one per
            device stream), or None: it keeps ``capacity`` in flight.
        uses_every_core: one inference runs on every host core (OpenVINO on the CPU with
            one stream: the latency hint): a file camera's next decode then waits for it
            to end instead of slowing it (``TurnClock``).
        description: what runs where (exported as a metric's labels).
        observe_batch: called with the frame count of every batch sent to the device, on
            whichever thread sends it; whoever exports metrics sets it.
    """

    input_spec: TensorSpec
    output_shapes: list[tuple[int, ...]]
    capacity: int
    in_flight_floor: int | None
    uses_every_core: bool
    description: dict[str, str]
    observe_batch: Callable[[int], None]

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

    def drain(self, timeout_s: float) -> bool:
        """Wait for every in-flight request; False if some are still running at the timeout."""
        ...

    def close(self) -> None:
        """Release the device (idempotent)."""
        ...
