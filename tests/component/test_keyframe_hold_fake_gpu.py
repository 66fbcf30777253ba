"""A live NVDEC camera that waits for its model decodes only keyframes, through the real
capture worker (only PyNvVideoCodec is faked: ``tests/unit/test_keyframe_hold_fake_gpu.py``'s
decoder, which records a predicted frame decoded without its reference as broken).

With ``inference.stream_while_loading`` a camera's frames are dropped as ``starting`` until its
model is open. Once it has waited ``HOLD_AFTER_S``, its decoder is fed keyframes only; when the
model opens, decoding resumes at the next keyframe. Every frame is still counted: captured,
and dropped ``starting`` or handed on, each in its place in the camera's numbering.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from tests.component.capture_rig import until
from tests.unit.test_keyframe_hold_fake_gpu import GopCodec
from vidpipe.capture import CaptureWorker
from vidpipe.capture import session as capture_session
from vidpipe.capture.decoders import CaptureContext, decoder_kind
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import CameraState, DeviceImage, Frame

PACKETS, GOP = 100, 10


def _surface(k: int) -> np.ndarray:
    return np.full((9, 8), k % 256, np.uint8)  # NV12 of 8x6, every byte the frame's number


def _install(codec: GopCodec, monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext) -> NvdecSource:
        reader = NvdecReader(cam.url, codec=codec, to_tensor=_surface)
        shared = ctx.shared(NvdecShared)
        return NvdecSource(
            cam, defaults, shared=shared, reader=reader, own_copy=lambda s: (s, None)
        )

    kind = dataclasses.replace(decoder_kind("nvdec"), source=factory)
    monkeypatch.setitem(CAPTURE_DECODERS.factories, "nvdec", kind)


def _drops(metrics: Metrics, reason: str) -> float:
    labels = {"camera": "cam", "reason": reason}
    return metrics.registry.get_sample_value("vidpipe_frames_dropped_total", labels) or 0.0


@pytest.mark.timeout(30)
def test_a_camera_waiting_for_its_model_decodes_keyframes_then_resumes_fake_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(capture_session, "HOLD_AFTER_S", 0.2)
    codec = GopCodec(packets=PACKETS, gop=GOP, delay=2)  # NVDEC gives frames out later
    _install(codec, monkeypatch)
    metrics, hub = Metrics(), FrameHub(starting=True)
    box = hub.add("cam", "newest", lambda f: None)
    # a file played at its rate stands in for a live stream (25 fps: 4 s)
    cam = CameraConfig(name="cam", url="file:///clips/a.mp4", realtime=True)
    worker = CaptureWorker(cam, CaptureConfig(decoder="nvdec"), box, metrics.camera("cam"))
    taken: list[Frame] = []
    stop = threading.Event()

    def consume() -> None:  # the scheduler, once the model is open
        while not stop.is_set():
            if (frame := hub.take(0.01)) is not None:
                taken.append(frame)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    worker.start()
    try:
        until(lambda: _drops(metrics, "starting") >= 35)  # the hold has skipped frames
        hub.starting = False  # the model is open
        until(lambda: worker.state is CameraState.STOPPED)
    finally:
        worker.stop()
        assert worker.join(5.0)
        stop.set()
        consumer.join(2.0)

    assert codec.broken == [], "no predicted frame was decoded without its reference"
    (decoder,) = codec.decoders
    assert decoder.last == PACKETS - 1
    assert decoder.decodes <= PACKETS - 25, "the frames held were never decoded"
    captured = metrics.registry.get_sample_value("vidpipe_frames_captured_total", {"camera": "cam"})
    assert captured == PACKETS, "every frame counted, decoded or not"
    dropped = sum(_drops(metrics, r) for r in ("starting", "overwritten", "mailbox_full"))
    assert dropped + len(taken) == PACKETS, "every frame dropped with a reason or handed on"
    tags = []
    for frame in taken:
        assert isinstance(frame.image, DeviceImage)
        tags.append(int(frame.image.nv12[0, 0]))
    assert tags == [f.seq for f in taken], "frames keep their place in the numbering"
    assert tags and tags[0] % GOP == 0, "decoding resumed at a keyframe"
    assert tags[-1] == PACKETS - 1
