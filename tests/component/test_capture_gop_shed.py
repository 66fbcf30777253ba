"""Groups of pictures shed before the decoder: a camera past what inference takes decodes only
the keyframe of the groups its budget sheds, and every frame is still counted.

The walkway clip (10 fps, H.264, a keyframe every second) through the real ``PyAVSource`` and
a real capture worker; only the share of groups is set by the test.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import av
import numpy as np
import pytest

from tests.component.capture_rig import FAST, PERSON, Rig
from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.group_budget import SharedShare
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.config import CameraConfig
from vidpipe.types import CameraState

PERSON_FRAMES = 1394


class Always:
    """A budget that sheds every group (or none)."""

    def __init__(self, full: bool) -> None:
        self.full = full
        self.keyframes = 0

    def keyframe(self, media_s: float | None) -> bool:
        self.keyframes += 1
        return self.full


def luma_hash(pixels: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(pixels).tobytes()).hexdigest()


def decode_all(clip: Path) -> list[tuple[bool, str]]:
    """Every frame of the clip in presentation order: keyframe or not, and its pixels."""
    with av.open(str(clip)) as container:
        return [
            (frame.key_frame, luma_hash(frame.to_ndarray()[: frame.height]))
            for frame in container.decode(video=0)
        ]


def read_all(clip: Path, budget: Always) -> tuple[list[str], PyAVSource]:
    source = PyAVSource(CameraConfig(name="shed", url=str(clip)), FAST)
    source.open()
    source.shed_groups(budget)  # type: ignore[arg-type]  # the source asks only keyframe()
    out = []
    while (picture := source.read()) is not None:
        luma = picture.luma()
        assert luma is not None
        out.append(luma_hash(luma.pixels))
    source.close()
    return out, source


@pytest.mark.timeout(60)
def test_a_shed_group_decodes_its_keyframe_only_and_counts_the_rest(videos: Path) -> None:
    clip = videos / f"{PERSON}.mp4"
    reference = decode_all(clip)
    keyframes = [pixels for key, pixels in reference if key]
    assert len(reference) == PERSON_FRAMES and 100 < len(keyframes) < 200

    shed_all = Always(full=False)
    got, source = read_all(clip, shed_all)
    assert got == keyframes  # the same pictures as a full decode's keyframes
    assert source.shed == PERSON_FRAMES - len(keyframes)
    assert shed_all.keyframes == len(keyframes)

    got, source = read_all(clip, Always(full=True))
    assert got == [pixels for _, pixels in reference]
    assert source.shed == 0


SHED = FAST  # capture.shed_gops is on unless a config turns it off


@pytest.mark.timeout(60)
def test_a_live_camera_shedding_groups_numbers_and_counts_every_frame(videos: Path) -> None:
    """A realtime file (a ``newest`` mailbox, as live cameras get) whose pipeline's share of
    groups is held at 0.25: most frames are shed, each one counted, and the frames that reach
    inference keep their place in the stream's numbering."""
    rig = Rig()
    context = CaptureContext()
    shared = context.shared(SharedShare)
    shared.share = 0.25
    shared.tick = lambda: None  # type: ignore[method-assign]  # held: nothing moves it
    try:
        worker, states = rig.worker("live", str(videos / f"{PERSON}.mp4"), "newest",
                                    realtime=True, capture=SHED)  # fmt: skip
        worker._context = context
        worker.start()
        states.wait_for(CameraState.STREAMING, 10)
        time.sleep(6.0)
        worker.stop()
        assert worker.join(10)
    finally:
        rig.close()
    captured = rig.value("vidpipe_frames_captured_total", camera="live")
    shed = rig.value("vidpipe_frames_dropped_total", camera="live", reason="gop_shed")
    dropped = sum(
        rig.value("vidpipe_frames_dropped_total", camera="live", reason=r)
        for r in ("overwritten", "mailbox_full", "decimated")
    )
    taken = rig.collector.of("live")
    assert 0.4 * captured < shed < 0.9 * captured
    assert len(taken) + rig.hub.pending() + dropped + shed == captured
    seqs = [f.seq for f in taken]
    assert seqs == sorted(seqs) and seqs[-1] >= captured - 12  # numbered across the shed ones
    # played at the clip's rate: the shed frames kept their places in the schedule
    assert captured < 10 * 8.0
