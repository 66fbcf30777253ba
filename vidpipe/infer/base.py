"""The inference backend interface: small on purpose."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from vidpipe.types import Completion, DeviceImage, TensorSpec


class BackendError(Exception):
    """A model or device problem found while building a backend (clear message, no limping on)."""


class FatalDeviceError(BackendError):
    """The device is unusable for the rest of the process (e.g. a sticky CUDA error).

    A backend puts it in the ``Completion`` of every frame it can no longer serve; the scheduler
    then calls its ``on_fatal`` hook once, and the daemon exits non-zero so that its
    supervisor restarts it, rather than serving errors for hours.
    """


class InferenceBackend(Protocol):
    """An asynchronous inference device with a fixed number of in-flight slots.

    ``submit`` is called from one thread only (the scheduler). ``on_done`` runs on the
    backend's own thread: it must only hand the completion on. Errors travel inside the
    ``Completion``; they are never raised on a foreign thread.
    """

    input_spec: TensorSpec
    output_shapes: list[tuple[int, ...]]
    capacity: int
    description: dict[str, str]

    def submit(
        self,
        tensor: np.ndarray | DeviceImage,
        buffer_index: int,
        tag: Any,
        on_done: Callable[[Completion], None],
    ) -> None:
        """Start inference on ``tensor`` (owned by the caller until ``on_done`` runs).

        A ``DeviceImage`` (an NVDEC frame, still on the GPU) is accepted only by the GPU
        backend, which letterboxes it into its batch; config validation keeps it from others.
        """
        ...

    def wait_slot(self, timeout_s: float) -> bool:
        """Block until a slot is free; False on timeout."""
        ...

    def in_flight(self) -> int:
        """Requests currently submitted and not yet completed."""
        ...

    def observe_batches(self, observe: Callable[[int], None]) -> None:
        """Call ``observe(frames)`` for every batch sent to the device from now on."""
        ...

    def drain(self, timeout_s: float) -> bool:
        """Wait for every in-flight request; False if some are still running at the timeout."""
        ...

    def close(self) -> None:
        """Release the device (idempotent)."""
        ...
