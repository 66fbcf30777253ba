"""One embedder model's lane: a bounded queue of crops and the thread that feeds the model.

The result thread only puts crops in (``offer``, never waiting: a full queue refuses the crop
and the stage counts it as ``secondary_busy``). The feeder thread is the only one that submits
to the model (OpenVINO's request queue is not safe with several submitting threads); the
model's answers arrive on OpenVINO's thread and go straight to the stage's ``on_done``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from vidpipe.infer.base import BackendError

log = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]
OnEmbedded = Callable[[Any, "Vector | BaseException"], None]
"""An embedder's answer for a crop's tag: its normalised vector, or the error."""

#: How long the idle feeder waits on its queue before re-checking the stop flag.
_POLL_S = 0.2
#: A submission without an answer after this long failed (OpenVINO then calls no callback);
#: a crop takes about 6 ms.
_STALE_AFTER_S = 5.0
_ERROR_LOG_INTERVAL_S = 10.0


class Abandoned(Exception):
    """A crop's answer when the lane closed before its model could embed it."""


class Embedder(Protocol):
    """What a lane needs of an embedder model (``ReidEmbedder``)."""

    name: str

    def submit(self, crop_bgr: npt.NDArray[np.uint8], tag: object, on_done: OnEmbedded) -> None: ...

    def stale(self, older_than_s: float) -> list[object]: ...

    @property
    def in_flight(self) -> int: ...

    def wait(self, timeout_s: float) -> bool: ...

    def close(self) -> None: ...

    def embed(self, image_bgr: npt.NDArray[np.uint8]) -> Vector: ...


@dataclass(frozen=True, slots=True)
class Crop:
    """A crop of one track, waiting for its model.

    Attributes:
        model: the embedder model it waits for.
        camera, track_id: whose crop it is.
        pixels: ``(h, w, 3)`` uint8 BGR, a copy (the frame is not kept alive).
        wall_time: the frame's result ``wall_time``.
        t_queued: ``time.monotonic()`` when it was queued (the latency metric starts there).
    """

    model: str
    camera: str
    track_id: int
    pixels: npt.NDArray[np.uint8]
    wall_time: float
    t_queued: float


class Lane:
    """The queue and feeder thread of one embedder model.

    Args:
        embedder: the model.
        queue_size: crops that may wait.
        on_done: ``(crop, vector_or_error)``, from the model's thread (or the feeder's, for an
            error); must be quick and never raise.
    """

    def __init__(
        self, embedder: Embedder, queue_size: int, on_done: Callable[[Crop, object], None]
    ) -> None:
        self.embedder = embedder
        self._queue: queue.Queue[Crop] = queue.Queue(queue_size)
        self._on_done = on_done
        self._closing = threading.Event()
        self._abandon = threading.Event()
        self._last_error_log = -float("inf")
        self._thread = threading.Thread(
            target=self._run, name=f"secondary-{embedder.name}", daemon=True
        )
        self._thread.start()

    def offer(self, crop: Crop) -> bool:
        """Queue ``crop`` unless the queue is full or the lane is closing (never waits)."""
        if self._closing.is_set():
            return False
        try:
            self._queue.put_nowait(crop)
        except queue.Full:
            return False
        return True

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            try:
                crop = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                self._reap()
                if self._closing.is_set():
                    return
                continue
            if self._abandon.is_set():
                self._on_done(crop, Abandoned(crop.model))
                continue
            try:
                self.embedder.submit(crop.pixels, crop, self._answer)
            except BackendError as exc:
                self._on_done(crop, exc)
                self._log_error(exc)
            self._reap()

    def _answer(self, tag: object, result: object) -> None:
        assert isinstance(tag, Crop)
        self._on_done(tag, result)

    def _reap(self) -> None:
        """Fail the submissions the model never answered (their inference failed)."""
        for tag in self.embedder.stale(_STALE_AFTER_S):
            assert isinstance(tag, Crop)
            self._on_done(tag, BackendError("inference failed (no answer)"))

    def _log_error(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_INTERVAL_S:
            self._last_error_log = now
            log.error("%s", exc)

    def close(self, timeout_s: float) -> bool:
        """Take no more crops, embed those queued and in flight within ``timeout_s``, then
        answer what is left with ``Abandoned``, wait for the model's requests and close
        it. True if nothing had to be abandoned."""
        deadline = time.monotonic() + timeout_s
        self._closing.set()
        while self._queue.qsize() and time.monotonic() < deadline:
            time.sleep(0.01)
        finished = self.embedder.wait(max(0.0, deadline - time.monotonic()))
        finished = finished and not self._queue.qsize()
        self._abandon.set()
        self._thread.join(max(1.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            log.warning("secondary %s: feeder thread still alive at close", self.embedder.name)
        self.embedder.close()  # waits for every request in flight
        return finished
