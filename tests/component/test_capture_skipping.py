"""Frames that ``detect_fps`` drops are not decoded where the codec allows it, and nothing else
changes: the same frames reach detection, pixel for pixel, and every frame is counted.

The walkway clip (10 fps, H.264 with 59 % non-reference B-frames) is decoded by the real
``PyAVSource`` in a real capture worker, once with ``capture.skip_unused_frames`` and once
without; the source counts the frames it left undecoded.
"""

from __future__ import annotations

import hashlib
import time
from fractions import Fraction
from pathlib import Path

import pytest

from tests.component.capture_rig import FAST, PERSON, Rig
from vidpipe.capture.pacing import Decimator
from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.capture.skipping import NonRefSkipper
from vidpipe.types import CameraState

PERSON_FRAMES = 1394


def run_clip(rig: Rig, clip: Path, name: str, skip: bool) -> dict[str, object]:
    capture = FAST.model_copy(update={"skip_unused_frames": skip})
    worker, states = rig.worker(name, str(clip), "block", capture=capture, detect_fps=5)
    worker.start()
    states.wait_for(CameraState.STOPPED, 30)
    captured = rig.value("vidpipe_frames_captured_total", camera=name)
    decimated = rig.value("vidpipe_frames_dropped_total", camera=name, reason="decimated")
    frames = rig.collector.wait_count(name, int(captured - decimated), 5)
    return {
        "captured": captured,
        "decimated": decimated,
        "seqs": [f.seq for f in frames],
        "pixels": [hashlib.sha256(f.image.tobytes()).hexdigest() for f in frames],
    }


@pytest.mark.timeout(60)
def test_skipping_unused_frames_forwards_the_same_frames_and_counts_every_frame(
    rig: Rig, videos: Path, sources: list[PyAVSource]
) -> None:
    clip = videos / f"{PERSON}.mp4"
    skipping = run_clip(rig, clip, "skips", skip=True)
    decoding_all = run_clip(rig, clip, "decodes", skip=False)

    assert [s.skipped for s in sources] == [sources[0].skipped, 0]
    # most of the 820 B-frames of the clip fall between detect_fps 5's due frames
    assert sources[0].skipped > 0.3 * PERSON_FRAMES
    assert skipping["captured"] == decoding_all["captured"] == PERSON_FRAMES
    assert skipping["decimated"] == decoding_all["decimated"] == PERSON_FRAMES / 2
    assert skipping["seqs"] == decoding_all["seqs"] == list(range(0, PERSON_FRAMES, 2))
    assert skipping["pixels"] == decoding_all["pixels"]


def test_skipper_counts_only_the_marked_frames_that_never_came_out() -> None:
    tb = Fraction(1, 10)
    skipper = NonRefSkipper(lambda ahead_s: ahead_s > 0.25)  # only frames 3+ ahead wanted
    assert not skipper.may_skip(0, tb)  # nothing handed yet: nothing to measure from
    assert skipper.handed(0) == (0, 0)
    assert skipper.may_skip(1, tb) and skipper.may_skip(2, tb)
    assert not skipper.may_skip(3, tb)
    assert not skipper.may_skip(None, tb)
    # frame 2 was a reference frame after all (decoded); frame 1 was skipped
    assert skipper.handed(2) == (1, 0)
    assert skipper.handed(3) == (0, 0)
    assert skipper.may_skip(4, tb)  # measured from frame 3 now: 0.1 s ahead
    assert skipper.handed(9) == (1, 0)
    # timestamps restart (a new pass): old marks are forgotten, not counted
    assert skipper.may_skip(10, tb)
    assert skipper.handed(0) == (0, 0)
    assert skipper.handed(20) == (0, 0)


def test_skipper_counts_frames_left_because_the_last_one_waited_apart() -> None:
    tb = Fraction(1, 10)
    waits = {"now": False}
    skipper = NonRefSkipper(lambda ahead_s: ahead_s > 0.15, lambda: waits["now"])
    assert skipper.handed(0) == (0, 0)
    assert skipper.may_skip(1, tb)  # unused: detection would not take it
    assert not skipper.may_skip(2, tb)  # wanted, and nothing waits
    waits["now"] = True
    assert skipper.may_skip(3, tb)  # wanted, but the frame before still waits
    assert not skipper.may_skip(4, tb), "one at a time, as the worker drops them"
    # 1 and 3 never came out; 4 was decoded and handed on
    assert skipper.handed(4) == (1, 1)
    assert skipper.may_skip(6, tb), "wanted, and held back again once a frame was handed"
    assert skipper.handed(6) == (0, 0), "6 was a reference frame after all"
    waits["now"] = False
    assert not skipper.may_skip(8, tb), "wanted, and nothing waits"
    only_held_back = NonRefSkipper(None, lambda: waits["now"])  # no detect_fps
    only_held_back.handed(0)
    assert not only_held_back.may_skip(1, tb)
    waits["now"] = True
    assert only_held_back.may_skip(2, tb) and only_held_back.handed(3) == (0, 1)


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_a_frame_not_wanted_in_advance_is_never_passed_by_the_decimator(jitter: float) -> None:
    """Checked against the real ``Decimator`` over 12.5 and 29.97 fps streams with timestamps
    off by up to ``jitter`` of a frame: what ``wanted`` refuses, ``due`` would refuse too."""
    for fps in (12.5, 29.97, 10.0):
        decimator = Decimator(5.0)
        wanted = decimator.wanted_after(1.0 / fps)
        frame_s = 1.0 / fps
        refused = passed = 0
        for i in range(400):
            t = i * frame_s + (jitter * frame_s * ((i * 7919) % 11 - 5) / 5 if i else 0.0)
            ahead = t - (decimator._last_s if decimator._last_s is not None else t)
            ok = wanted(ahead) if i else True
            due = decimator.due(t)
            refused += not ok
            passed += due
            assert ok or not due, f"frame {i} at {t:.3f}s was refused but is due ({fps} fps)"
        assert refused > 0.25 * 400  # it does refuse (5 of 12.5 fps: 60 % are not due)
        assert passed >= 400 * 5.0 / fps * 0.95


@pytest.mark.timeout(60)
def test_a_looping_file_that_skips_counts_every_frame_of_every_pass(
    rig: Rig, videos: Path, sources: list[PyAVSource]
) -> None:
    """Each pass of a looping file is a new source in the same session; the undecoded frames
    of each are counted once (a pass used to make the count go negative and crash the
    reader)."""
    worker, _ = rig.worker("loop", str(videos / f"{PERSON}.mp4"), "block", detect_fps=5, loop=True)
    worker.start()
    deadline = time.monotonic() + 40
    while len(sources) < 3 and time.monotonic() < deadline:  # two passes done, a third began
        time.sleep(0.05)
    worker.stop()
    assert worker.join(10)
    assert worker.failure is None
    assert len(sources) >= 3, "the file did not loop twice"
    assert rig.errors("loop", "read_failed") == 0
    captured = rig.value("vidpipe_frames_captured_total", camera="loop")
    decimated = rig.value("vidpipe_frames_dropped_total", camera="loop", reason="decimated")
    taken = len(rig.collector.of("loop"))
    waiting = rig.hub.pending()
    assert captured >= 2 * PERSON_FRAMES
    assert sum(s.skipped for s in sources) > 0.3 * 2 * PERSON_FRAMES
    assert taken + waiting + decimated == captured  # counters add up across passes
    seqs = [f.seq for f in rig.collector.of("loop")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.timeout(60)
def test_a_live_camera_ahead_of_its_consumer_leaves_frames_undecoded_and_counts_them(
    rig: Rig, videos: Path, sources: list[PyAVSource]
) -> None:
    """A live camera (``newest``) whose consumer takes a frame only every 20 ms while the
    walkway clip decodes in about 1 ms a frame: most frames find the one before untaken. The
    non-reference ones among them are left undecoded and counted as ``mailbox_full``; every
    frame that reaches the consumer is, pixel for pixel, the frame a full decode gives at its
    number, and every frame of the clip is counted once."""
    clip = str(videos / f"{PERSON}.mp4")
    reference, _ = rig.worker("reference", clip, "block")
    reference.start()
    full = {f.seq: f for f in rig.collector.wait_count("reference", PERSON_FRAMES, 30)}
    rig.collector.take_interval_s = 0.02
    # whole groups are not shed here: what this test follows is each non-reference frame
    live, states = rig.worker("live", clip, "newest", FAST.model_copy(update={"shed_gops": False}))
    live.start()
    states.wait_for(CameraState.STOPPED, 40)
    rig.collector.take_interval_s = 0.0
    time.sleep(0.2)  # the consumer takes the last frame
    taken = rig.collector.of("live")
    source = sources[-1]
    assert source.skipped_unread > 0.1 * PERSON_FRAMES, "B-frames behind an untaken frame"
    assert source.skipped == 0, "no detect_fps: no frame is unused"
    for frame in taken:
        digest = hashlib.sha256(frame.image.tobytes()).hexdigest()
        assert digest == hashlib.sha256(full[frame.seq].image.tobytes()).hexdigest(), frame.seq

    def dropped(reason: str) -> float:
        return rig.value("vidpipe_frames_dropped_total", camera="live", reason=reason)

    assert dropped("mailbox_full") >= source.skipped_unread
    captured = rig.value("vidpipe_frames_captured_total", camera="live")
    assert captured == PERSON_FRAMES
    assert len(taken) + dropped("mailbox_full") + dropped("overwritten") == captured
