"""Result stages: the steps a frame's result goes through after inference, in order.

The assembly composes them once, with ``chain`` (tracking, then clip triggers, then the
sinks), and hands the chain to the scheduler as its ``on_result``. A stage takes a
``FrameResult`` and returns what the next stage gets: the same result, or a copy with more in
it (track ids, zone events, clip events). The last stage (the sink pool) returns None, which
ends the chain. Stages run on the thread that postprocesses, one result at a time, results of
a camera in capture order (``vidpipe.schedule.completions``), so none needs a lock for
per-camera state; none may block.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from vidpipe.types import Detections, Event, FrameResult


class ResultStage(Protocol):
    """One step of the result chain: ``result`` in, what the next step gets out (None: the
    result goes no further)."""

    def __call__(self, result: FrameResult, /) -> FrameResult | None: ...


def chain(stages: Sequence[ResultStage]) -> Callable[[FrameResult], None]:
    """One callable that hands each result through ``stages`` in order."""
    steps = tuple(stages)

    def run(result: FrameResult) -> None:
        for step in steps:
            out = step(result)
            if out is None:
                return
            result = out

    return run


def events_result(camera: str, events: Sequence[Event]) -> FrameResult:
    """A result of ``camera`` that carries ``events`` and no frame, for events that no later
    result of the camera can carry (a clip written after its camera's last frame)."""
    now = time.monotonic()
    return FrameResult(
        camera, -1, now, now, time.time(), 0, 0, Detections.empty(),
        events=tuple(events), events_only=True,
    )  # fmt: skip
