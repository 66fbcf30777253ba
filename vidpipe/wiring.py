"""Wiring of the capture stage: one camera's mailbox on the frame hub and its worker.

``Pipeline.start_camera`` wires every camera through ``capture_worker``, and the rigs in
``benchmarks/`` that measure capture without inference use ``capture_stage``, so that a
measured camera is wired exactly as a running one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.worker import CaptureWorker, StateCallback
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub, Mailbox


def capture_stage(
    cameras: Sequence[CameraConfig],
    capture: CaptureConfig,
    metrics: Metrics,
    on_state: StateCallback | None = None,
) -> tuple[FrameHub, list[CaptureWorker]]:
    """The capture stage alone, wired as ``Pipeline.start_camera`` wires a camera (one
    capture context for all), for rigs that measure capture without inference
    (``benchmarks/``). The workers are not started; whoever drains the hub stands in for the
    scheduler."""
    hub, context = FrameHub(), CaptureContext()
    workers = [capture_worker(cam, capture, hub, metrics, context, on_state)[1] for cam in cameras]
    return hub, workers


def capture_worker(
    cam: CameraConfig,
    capture: CaptureConfig,
    hub: FrameHub,
    metrics: Metrics,
    context: CaptureContext,
    on_state: StateCallback | None = None,
    phase: Literal["free", "aligned"] = "free",
) -> tuple[Mailbox, CaptureWorker]:
    """One camera's mailbox on ``hub`` and its capture worker (not started). A live camera's
    mailbox keeps the newest frame; a file's applies backpressure, so that no decoded frame
    of a file is wasted."""
    cm = metrics.camera(cam.name)
    live = cam.is_stream or cam.realtime
    box = hub.add(cam.name, "newest" if live else "block", cm.overwritten)
    worker = CaptureWorker(cam, capture, box, cm, on_state=on_state, context=context, phase=phase)
    return box, worker
