"""``vidpipe_camera_lag_seconds``: how far a live camera's reader is behind its stream.

Real workers read a real clip paced like a live camera (``realtime``); a reader slowed down
on purpose (each read takes longer than a frame interval) must show a growing lag, one that
keeps pace must not.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.component.capture_rig import CAR, Rig, until
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.capture.session import Session
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig

FRAME_S = 0.08  # the car clip runs at 12.5 fps


def lag(rig: Rig, camera: str) -> float:
    return rig.value("vidpipe_camera_lag_seconds", camera=camera)


@pytest.mark.timeout(30)
def test_a_reader_that_keeps_pace_shows_no_lag_and_a_slow_one_shows_it_growing(
    rig: Rig, videos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class SlowSource(PyAVSource):
        def read(self):  # type: ignore[no-untyped-def]
            time.sleep(FRAME_S * 1.6)  # 60 % slower than the stream
            return super().read()

    def factory(camera: CameraConfig, defaults: CaptureConfig, _: CaptureContext) -> PyAVSource:
        cls = SlowSource if camera.name == "slow" else PyAVSource
        return cls(camera, defaults)

    monkeypatch.setitem(CAPTURE_DECODERS.factories, "pyav", DecoderKind(factory))
    clip = str(videos / f"{CAR}.mp4")
    for name in ("paced", "slow"):
        rig.worker(name, clip, "newest", realtime=True)[0].start()
    until(lambda: rig.value("vidpipe_frames_captured_total", camera="slow") >= 25, 20)
    # 25 frames at 1.6 intervals each: about 15 intervals (1.2 s) behind by now
    assert lag(rig, "slow") > 0.6
    assert lag(rig, "paced") < 0.3
    assert rig.value("vidpipe_frames_captured_total", camera="paced") >= 25


def test_lag_is_measured_from_the_least_delay_seen() -> None:
    session = Session(1, 0.0, threading.Event())
    assert session.lag_s(10.0, 0.0) == 0.0  # the first frame sets the fixed delay (10 s)
    assert session.lag_s(10.5, 0.4) == pytest.approx(0.1)
    assert session.lag_s(10.6, 0.8) == 0.0  # earlier than ever: the new least delay
    assert session.lag_s(12.0, 1.0) == pytest.approx(1.2)
