"""A realtime file camera in a decode process, past what inference takes, waits for the take
(``capture/take_wait.py``): through its real worker, the real hub and a real decode process.
The GPU and PyNvVideoCodec are absent: ``tests/fake_nvdec.py`` decodes packet ``k`` to a
picture filled with ``k % 251`` (25 fps), in host memory. Counters only, no timing asserted:
the consumer is slower than the file, by a margin far wider than the wait's bound."""

from __future__ import annotations

import itertools
import threading

import pytest

from vidpipe.capture import CaptureWorker
from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.nvdec_child import CodecSpec
from vidpipe.capture.nvdec_source import NvdecShared
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import Frame

PACKETS = 240  # 9.6 s at 25 fps: the run below never reaches the file's end
LONG = CodecSpec("tests.fake_nvdec", "FakeCodec", (PACKETS, 10))
TAKE_EVERY_S = 0.1  # 10 fps taken of the file's 25


def _run_behind_its_rate(
    skip_unused: bool, frames: int = 40
) -> tuple[list[Frame], dict[str, float]]:
    """Take ``frames`` frames, one every ``TAKE_EVERY_S``: what was taken and the counters."""
    context = CaptureContext()
    decoding = context.shared(NvdecShared).decoding
    decoding.codec, decoding.ring = LONG, "host"
    camera = CameraConfig(name="lot", url="file:///clip.mp4", realtime=True)
    defaults = CaptureConfig(
        decoder="nvdec", nvdec_processes=1, skip_unused_frames=skip_unused, shed_gops=False
    )
    hub, metrics, overwritten = FrameHub(), Metrics(), []
    box = hub.add(camera.name, "newest", overwritten.append)
    worker = CaptureWorker(camera, defaults, box, metrics.camera(camera.name), context=context)
    taken: list[Frame] = []
    worker.start()
    try:
        while len(taken) < frames:
            frame = hub.take(5.0)
            assert frame is not None, "no frame from the decode process within 5 s"
            taken.append(frame)
            threading.Event().wait(TAKE_EVERY_S)
    finally:
        worker.stop()
        assert worker.join(10.0)
        context.close()
    full = metrics.registry.get_sample_value(
        "vidpipe_frames_dropped_total", {"camera": camera.name, "reason": "mailbox_full"}
    )
    return taken, {"overwritten": len(overwritten), "mailbox_full": full or 0.0}


@pytest.mark.timeout(60)
def test_a_camera_behind_its_rate_waits_for_the_take_and_lets_go_one_frame_at_most() -> None:
    taken, counts = _run_behind_its_rate(skip_unused=True)
    values = [int(f.image.nv12[0, 0]) for f in taken]
    steps = [b - a for a, b in itertools.pairwise(values)]
    assert counts["overwritten"] == 0, "every frame put was taken, none replaced"
    assert set(steps) <= {1, 2}, f"at most one frame let go a read: {values}"
    let_go = sum(s - 1 for s in steps)
    assert let_go > 0, "a camera behind its rate lets due frames go"
    # each let-go frame is counted as the worker's drop would be; the last read may be untaken
    assert let_go <= counts["mailbox_full"] <= let_go + 1
    assert [f.seq for f in taken] == [f.seq for f in sorted(taken, key=lambda f: f.seq)]


@pytest.mark.timeout(60)
def test_without_letting_frames_go_the_camera_reads_on_its_clock_and_replaces_them() -> None:
    """The same camera with ``capture.skip_unused_frames: false``: no wait for the take, so
    frames inference had no time for are made and then replaced (what the wait spares)."""
    _, counts = _run_behind_its_rate(skip_unused=False, frames=25)
    assert counts["overwritten"] > 0
