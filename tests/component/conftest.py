"""Fixtures for component tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.component.capture_rig import Rig, capture_threads
from tests.rtsp import gst_rtsp_available
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig


@pytest.fixture
def rig() -> Iterator[Rig]:
    # The threads alive before, not their count: a thread an earlier test left ending may
    # end during this one (seen in CI: 2 threads before, 1 after), and that is not a leak.
    before = set(threading.enumerate())
    r = Rig()
    try:
        yield r
    finally:
        r.close()
    assert capture_threads() == []
    left = [t.name for t in threading.enumerate() if t not in before]
    assert left == [], f"threads the rig left running: {left}"


@pytest.fixture(scope="module")
def videos(assets_dir: Path) -> Path:
    return assets_dir / "videos"


@pytest.fixture(scope="module")
def rtsp_ok() -> None:
    why = gst_rtsp_available()
    if why is not None:
        pytest.fail(f"the RTSP test server cannot run: {why}")


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[PyAVSource]]:
    """Every ``PyAVSource`` the workers make (the real decoder, kept to read its counters)."""
    made: list[PyAVSource] = []

    def factory(camera: CameraConfig, defaults: CaptureConfig, _: CaptureContext) -> PyAVSource:
        made.append(PyAVSource(camera, defaults))
        return made[-1]

    monkeypatch.setitem(CAPTURE_DECODERS.factories, "pyav", DecoderKind(factory))
    yield made
