"""Wiring of the capture stage: one camera's mailbox on the frame hub and its worker, and
the inputs of cameras with ``inputs:`` (``CameraInputs``).

``Pipeline.start_camera`` wires every camera through ``capture_worker``, and the rigs in
``benchmarks/`` that measure capture without inference use ``capture_stage``, so that a
measured camera is wired exactly as a running one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.record_input import RecordInputWorker
from vidpipe.capture.source import PacketTap
from vidpipe.capture.worker import CaptureWorker, StateCallback
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.types import CameraState


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


class CameraInputs:
    """The inputs of the cameras that declare ``inputs:`` (a camera with ``url:`` alone is
    not touched here: it runs exactly as it always did).

    A camera's detect input is its ``CaptureWorker`` (``camera.url`` is that input's URL);
    its record input, if any, is a ``RecordInputWorker`` that feeds the camera's clip ring in
    place of the detect worker's packet tap. This keeps their per-input series
    (``vidpipe_camera_input_up``, ``vidpipe_camera_input_reconnects``) and their states for
    the status page.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._named: set[str] = set()  # running cameras with inputs:
        self._detect_state: dict[str, CameraState] = {}
        self.record: dict[str, RecordInputWorker] = {}

    def start(self, cam: CameraConfig, capture: CaptureConfig, ring: PacketTap | None) -> bool:
        """Note ``cam``'s inputs; with a record input and a clip ring (``ring``), start the
        record worker on it. True if the record input feeds the ring (the detect worker
        then gets no packet tap)."""
        if cam.inputs is None:
            return False
        self._named.add(cam.name)
        self._metrics.camera_input_up.labels(camera=cam.name, input="detect").set(0)
        self._metrics.camera_input_reconnects.labels(camera=cam.name, input="detect")
        if cam.record_input is None or ring is None:
            return False
        worker = RecordInputWorker(cam, capture, ring, self._metrics)
        self.record[cam.name] = worker
        worker.start()
        return True

    def detect_state(self, name: str, state: CameraState) -> None:
        """The camera's capture worker changed state (on a capture thread)."""
        if name not in self._named:
            return
        before = self._detect_state.get(name)
        self._detect_state[name] = state
        self._metrics.camera_input_up.labels(camera=name, input="detect").set(
            1 if state is CameraState.STREAMING else 0
        )
        if state is CameraState.CONNECTING and before is CameraState.BACKOFF:
            self._metrics.camera_input_reconnects.labels(camera=name, input="detect").inc()

    def stop(self, name: str) -> RecordInputWorker | None:
        """Ask ``name``'s record input to stop (join the worker returned)."""
        self._named.discard(name)
        self._detect_state.pop(name, None)
        worker = self.record.pop(name, None)
        if worker is not None:
            worker.stop()
        return worker

    def stats(self, name: str, detect: dict[str, Any]) -> dict[str, Any]:
        """``detect`` (the camera's ``CaptureWorker.stats()``), with ``inputs`` for a camera
        that has a record input: the role and state of each input."""
        worker = self.record.get(name)
        if worker is None:
            return detect
        inputs = [{"role": "detect", "state": detect.get("state")}, worker.stats()]
        return {**detect, "inputs": inputs}
