"""The status page's clip list in real headless Chromium: a new clip leaves a playing one be.

The real HTTP server serves the real page and ``/api/clips`` over a clip directory; the clips
in it are real MP4s that the real clip writer cut from the walkway video's packets. A new clip
is caused by writing one more into the directory, as the recorder does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import wait_for
from tests.integration.test_web_browser import browser  # noqa: F401 (a fixture)
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips.ring import Segment
from vidpipe.clips.store import clip_id
from vidpipe.clips.writer import ClipJob, write_clip
from vidpipe.config import CameraConfig, CaptureConfig, LiveViewConfig
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks.live import LiveView
from vidpipe.web import WebServer, build_app
from vidpipe.web.clips import ClipRoutes
from vidpipe.web.live import LiveRoutes

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PERSON = "one-by-one-person-detection"


class Packets:
    """The packet listener of a source: keeps the packets (pictures are not needed here)."""

    def __init__(self) -> None:
        self.packets: list[TapPacket] = []

    def __call__(self, packet: TapPacket) -> None:
        self.packets.append(packet)

    def frame(self, pts: int | None) -> None:
        pass


@pytest.fixture(scope="module")
def walkway_segment(assets_dir: Path) -> Segment:
    """The walkway video's first 12 s of packets (10 fps, a keyframe every second)."""
    cam = CameraConfig(name="walkway", url=str(assets_dir / "videos" / f"{PERSON}.mp4"))
    source = PyAVSource(cam, CaptureConfig())
    listener = Packets()
    source.packet_listener = listener
    info = source.open()
    for _ in range(120):
        assert source.read() is not None
    source.close()
    assert info.stream is not None
    params: StreamParams = info.stream
    return Segment(params, tuple(listener.packets))


def write(camera_dir: Path, segment: Segment, wall_time: float) -> str:
    """One clip of ``segment`` in ``camera_dir``, as the recorder's writer thread writes it."""
    cid = clip_id(wall_time)
    job = ClipJob(
        camera="walkway", camera_dir=camera_dir, clip_id=cid, segment=segment,
        wall_offset=wall_time - segment.t_start, triggers=[], trigger_times=[],
        triggers_total=0, classes=["person"], tracker_ids=[], seq=0, closed_by="post_s",
    )  # fmt: skip
    write_clip(job)
    return cid


@pytest.fixture
def page_port(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The status page with ``/api/clips`` over one camera's clip directory (no token)."""
    metrics = Metrics()
    camera_dir = tmp_path / "walkway"
    live = LiveRoutes(
        LiveView(draw_detections, metrics), lambda: ["walkway"], dict, metrics,
        LiveViewConfig(),
    )  # fmt: skip
    clips = ClipRoutes(lambda: {"walkway": camera_dir})
    app = build_app(metrics, Health(), installers=[live.install, clips.install])
    server = WebServer(app, "127.0.0.1", 0)
    server.start()
    try:
        yield server.port, camera_dir
    finally:
        server.stop()


def video_js(driver, clip: str, script: str):
    """Run ``script`` with ``v``, the video of clip ``clip`` on the page (null if none)."""
    return driver.execute_script(
        "const v = document.querySelector("
        f"'#clips figure.clip[data-clip=\"{clip}\"] video'); {script}"
    )


def test_a_new_clip_leaves_the_playing_one_playing(
    page_port: tuple[int, Path],
    walkway_segment: Segment,
    browser,  # noqa: F811 (the fixture imported above)
) -> None:
    port, camera_dir = page_port
    now = time.time()
    first = write(camera_dir, walkway_segment, now - 60)
    browser.get(f"http://127.0.0.1:{port}/")
    wait_for(lambda: video_js(browser, first, "return v !== null"), 20, "the clip on the page")
    # mark the element itself: a re-rendered list would hold a new element without the mark
    video_js(browser, first, "v.vidpipeMark = 'the first'; v.muted = true; v.play();")
    wait_for(lambda: video_js(browser, first, "return v.currentTime") > 0.5, 20, "the clip to play")
    before = video_js(browser, first, "return v.currentTime")

    second = write(camera_dir, walkway_segment, now)  # the recorder wrote a new clip
    wait_for(lambda: video_js(browser, second, "return v !== null"), 20, "the new clip listed")
    order = browser.execute_script(
        "return [...document.querySelectorAll('#clips figure.clip')].map(f => f.dataset.clip)"
    )
    assert order == [second, first]  # newest first
    assert video_js(browser, first, "return v.vidpipeMark") == "the first"  # the same element
    assert video_js(browser, first, "return v.paused") is False
    at_listing = video_js(browser, first, "return v.currentTime")
    assert at_listing >= before  # not reset to the start
    wait_for(
        lambda: video_js(browser, first, "return v.currentTime") > at_listing,
        20,
        "the clip to go on playing",
    )
