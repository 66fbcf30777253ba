"""NVDEC cameras decoded in decode processes (``capture.nvdec_processes``), on CPU CI.

The decode processes are real (spawned, with their own interpreter and GIL) and so are the
connections, the handle passing and the rings of shared memory; PyNvVideoCodec and the GPU
are not (``tests/fake_nvdec.py`` decodes packet ``k`` to a picture filled with ``k % 251``,
and the ring is host memory). The CUDA ring and the real decoder are checked on the GPU by
``tests/gpu/test_nvdec_decode_process_gpu.py``.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vidpipe.capture import CaptureWorker
from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_child import RING_SLOTS, CodecSpec
from vidpipe.capture.nvdec_remote import DecodeProcesses
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.capture.pacing import Decimator
from vidpipe.capture.source import SourceError
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import Frame

PACKETS, GOP = 40, 10
FAKE = CodecSpec("tests.fake_nvdec", "FakeCodec", (PACKETS, GOP))


@pytest.fixture
def decoding() -> Iterator[DecodeProcesses]:
    processes = DecodeProcesses(FAKE, ring="host")
    yield processes
    processes.close()


def _source(decoding: DecodeProcesses, url: str = "file:///clip.mp4") -> NvdecSource:
    camera = CameraConfig(name="door", url=url)
    defaults = CaptureConfig(decoder="nvdec", nvdec_processes=2)
    return NvdecSource(camera, defaults, shared=NvdecShared(decoding=decoding))


def _value(image: Any) -> int:
    return int(image.nv12[0, 0])


class Alternate:
    """A group budget that decodes every other group in full, starting with the first."""

    def __init__(self) -> None:
        self.asked: list[float | None] = []

    def keyframe(self, media_s: float | None) -> bool:
        self.asked.append(media_s)
        return len(self.asked) % 2 == 1


def _in_process(budget: Alternate | None = None) -> list[int]:
    """What the same fake decoder gives on this process's thread."""
    reader = NvdecReader("file:///clip.mp4", codec=FAKE.load(), to_tensor=lambda f: f)
    reader.open()
    if budget is not None:
        reader.shed_groups(budget)  # type: ignore[arg-type]
    values = []
    while (frame := reader.read()) is not None:
        values.append(int(frame[0, 0]))
    reader.close()
    return values


def test_a_decode_process_gives_the_frames_the_camera_thread_would(
    decoding: DecodeProcesses,
) -> None:
    source = _source(decoding)
    info = source.open()
    values = []
    while (picture := source.read()) is not None:
        values.append(_value(picture.image()))
    source.close()
    assert (info.width, info.height, info.fps) == (16, 12, 25.0)
    assert values == _in_process() == list(range(PACKETS))
    assert decoding.started == 1


def test_frames_held_past_the_ring_keep_their_pixels(decoding: DecodeProcesses) -> None:
    source = _source(decoding)
    source.open()
    held = [source.read().image() for _ in range(RING_SLOTS + 5)]  # type: ignore[union-attr]
    more = [_value(source.read().image()) for _ in range(5)]  # type: ignore[union-attr]
    source.close()
    assert [_value(image) for image in held] == list(range(RING_SLOTS + 5))
    assert more == list(range(RING_SLOTS + 5, RING_SLOTS + 10))


def test_a_freed_slot_is_used_again_without_a_new_ring(decoding: DecodeProcesses) -> None:
    source = _source(decoding)
    source.open()
    first = source.read().image().nv12  # type: ignore[union-attr]
    base = first.base
    del first
    for _ in range(3 * RING_SLOTS):  # each frame let go at once
        frame = source.read().image().nv12  # type: ignore[union-attr]
        assert frame.base is base  # the ring of the first frame
        del frame
    source.close()


def test_groups_are_shed_as_the_daemons_budget_says(decoding: DecodeProcesses) -> None:
    source = _source(decoding)
    source.open()
    remote, local = Alternate(), Alternate()
    source.shed_groups(remote)  # type: ignore[arg-type]
    values = []
    while (picture := source.read()) is not None:
        values.append(_value(picture.image()))
    shed = source.shed
    source.close()
    expected = _in_process(local)
    assert values == expected
    assert len(values) < PACKETS  # some groups went undecoded, their keyframes kept
    assert shed == PACKETS - len(values)
    assert remote.asked == local.asked and len(remote.asked) == PACKETS // GOP


def test_a_failed_open_names_no_credentials(decoding: DecodeProcesses) -> None:
    source = _source(decoding, "rtsp://admin:hunter2@10.0.0.9/broken")
    with pytest.raises(SourceError) as caught:
        source.open()
    assert caught.value.reason == "open_failed"
    assert "Connection refused" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_a_dead_decode_process_is_a_read_error_then_starts_again(
    decoding: DecodeProcesses,
) -> None:
    source = _source(decoding)
    source.open()
    assert _value(source.read().image()) == 0  # type: ignore[union-attr]
    children = [c for c in decoding._children if c is not None]
    os.kill(children[0].process.pid, 9)
    children[0].process.join(10)
    with pytest.raises(SourceError) as caught:
        source.read()
    assert caught.value.reason == "read_failed"
    assert "decode process exited" in str(caught.value)
    source.close()
    source.open()  # as the worker does after its backoff
    assert _value(source.read().image()) == 0  # type: ignore[union-attr]
    source.close()
    assert decoding.started == 2


def test_cameras_take_the_decode_processes_in_turn_and_close_ends_them(
    decoding: DecodeProcesses,
) -> None:
    sources = [_source(decoding) for _ in range(3)]
    for s in sources:
        s.open()
    assert decoding.alive == 2
    assert [_value(s.read().image()) for s in sources] == [0, 0, 0]  # type: ignore[union-attr]
    for s in sources:
        s.close()
    decoding.close(5.0)
    assert decoding.alive == 0


@pytest.mark.skipif(
    importlib.util.find_spec("PyNvVideoCodec") is not None, reason="PyNvVideoCodec is installed"
)
def test_without_pynvvideocodec_the_open_error_says_so() -> None:
    decoding = DecodeProcesses(None, ring="host")  # the daemon's own: imports PyNvVideoCodec
    try:
        source = _source(decoding)
        with pytest.raises(SourceError) as caught:
            source.open()
    finally:
        decoding.close()
    assert "PyNvVideoCodec" in str(caught.value)


@pytest.mark.timeout(60)
def test_a_looping_camera_streams_through_its_worker_from_a_decode_process() -> None:
    """The daemon's own path: the registered nvdec decoder, a capture worker, a pipeline's
    context whose decode process runs the fake decoder."""
    context = CaptureContext()
    decoding = context.shared(NvdecShared).decoding
    decoding.codec, decoding.ring = FAKE, "host"
    camera = CameraConfig(name="gate", url="file:///clip.mp4", loop=True)
    defaults = CaptureConfig(decoder="nvdec", nvdec_processes=1)
    hub, metrics = FrameHub(), Metrics()
    box = hub.add(camera.name, "block", lambda _f: None)
    worker = CaptureWorker(camera, defaults, box, metrics.camera(camera.name), context=context)
    frames: list[Frame] = []
    worker.start()
    try:
        while len(frames) < PACKETS + 5:
            frame = hub.take(5.0)
            assert frame is not None, "no frame from the decode process within 5 s"
            frames.append(frame)
    finally:
        worker.stop()
        assert worker.join(10.0)
        context.close()
    assert [int(f.image.nv12[0, 0]) for f in frames] == [*range(PACKETS), *range(5)]
    assert frames[0].epoch != frames[PACKETS].epoch, "each pass is a new epoch"
    captured = metrics.registry.get_sample_value(
        "vidpipe_frames_captured_total", {"camera": camera.name}
    )
    assert captured is not None and captured >= PACKETS + 5
    assert decoding.alive == 0 and decoding.started == 1


def test_frames_detection_would_not_use_are_let_go_in_the_decode_process(
    decoding: DecodeProcesses,
) -> None:
    """``detect_fps`` 5 of a 25 fps file: the decode process sends only the frames the
    decimator passes; the frames that reach detection are those of a decoder that sends all."""
    source = _source(decoding)
    source.open()
    decimator = Decimator(5.0)
    source.skip_unwanted(decimator.wanted_after(1 / 25), None)
    read, passed = [], []
    while (picture := source.read()) is not None:
        k = _value(picture.image())
        read.append(k)
        if decimator.due(k / 25):
            passed.append(k)
    skipped, unread = source.skipped, source.skipped_unread
    source.close()
    every = Decimator(5.0)
    assert passed == [k for k in range(PACKETS) if every.due(k / 25)]
    assert len(read) < PACKETS  # frames were let go there, not sent and dropped here
    assert skipped == PACKETS - len(read) and unread == 0


@pytest.mark.parametrize("held", [0, 1])
def test_a_frame_that_would_replace_an_untaken_one_is_let_go_there(
    decoding: DecodeProcesses, held: int
) -> None:
    """While the last frame waits untaken (``held_back`` 1) the decode process lets the next
    one go and sends the one after; never two in a row. The file's end may come mid-skip."""
    source = _source(decoding)
    source.open()
    source.skip_unwanted(None, lambda: held)
    values = []
    while (picture := source.read()) is not None:
        values.append(_value(picture.image()))
    unread = source.skipped_unread
    source.close()
    assert values == list(range(held, PACKETS, 1 + held))
    assert unread == PACKETS - len(values) == (PACKETS // 2 if held else 0)


def test_a_live_streams_frames_are_never_let_go_for_an_untaken_one(
    decoding: DecodeProcesses,
) -> None:
    """A stream's read is sent before its next frame arrives: the frame waiting then is
    mostly taken by the time it does, so only the worker's own rule drops (at the frame)."""
    source = _source(decoding, "rtsp://10.0.0.9/live")
    source.open()
    source.skip_unwanted(None, lambda: 1)  # as if a frame always waited
    values = [_value(source.read().image()) for _ in range(10)]  # type: ignore[union-attr]
    unread = source.skipped_unread
    source.close()
    assert values == list(range(10)) and unread == 0


def _leave_untaken(skip_unused: bool) -> tuple[Frame, dict[str, float]]:
    """A file camera with a ``newest`` mailbox whose frames nobody takes, through its worker
    from a decode process, to the end of the file: the frame left waiting and its counters."""
    context = CaptureContext()
    decoding = context.shared(NvdecShared).decoding
    decoding.codec, decoding.ring = FAKE, "host"
    camera = CameraConfig(name="yard", url="file:///clip.mp4")
    defaults = CaptureConfig(
        decoder="nvdec", nvdec_processes=1, skip_unused_frames=skip_unused, shed_gops=False
    )
    hub, metrics, overwritten = FrameHub(), Metrics(), []
    box = hub.add(camera.name, "newest", overwritten.append)
    worker = CaptureWorker(camera, defaults, box, metrics.camera(camera.name), context=context)
    worker.start()

    def sample(name: str, **labels: str) -> float:
        value = metrics.registry.get_sample_value(name, {"camera": camera.name, **labels})
        return value or 0.0

    try:
        deadline = time.monotonic() + 20
        while sample("vidpipe_frames_captured_total") < PACKETS and time.monotonic() < deadline:
            time.sleep(0.05)
        frame = hub.take(5.0)
    finally:
        worker.stop()
        assert worker.join(10.0)
        context.close()
    assert frame is not None
    counts = {
        "mailbox_full": sample("vidpipe_frames_dropped_total", reason="mailbox_full"),
        "overwritten": len(overwritten),  # the mailbox's own count (the hub's on_drop)
        "captured": sample("vidpipe_frames_captured_total"),
    }
    return frame, counts


def test_frames_let_go_in_the_decode_process_are_counted_as_the_worker_drops_them() -> None:
    """Letting a frame go before it is sent changes no count and no frame number: the worker
    made and dropped the same frames (``mailbox_full`` once in a row, then ``overwritten``)."""
    frame, counts = _leave_untaken(skip_unused=True)
    sent_frame, sent_counts = _leave_untaken(skip_unused=False)
    assert counts == sent_counts
    assert counts["captured"] == PACKETS
    assert counts["mailbox_full"] == PACKETS // 2 and counts["overwritten"] == PACKETS // 2 - 1
    assert frame.seq == sent_frame.seq == int(frame.image.nv12[0, 0]) == PACKETS - 2
