"""The clip recorder on real packets: merging, the max_s cap, retention, write failures.

The walkway clip's real packets (10 fps, a keyframe every second) come from the real PyAV
source, as a camera's packet tap gets them; their times are re-stamped from their timestamps
on a clock the test owns, so that "seconds" pass instantly. The recorder's writer thread, the
remux to MP4 and ffprobe are real. Triggers are zone events made here: the recorder, not the
tracker, is under test (tests/integration/test_clips_e2e.py runs the whole pipeline).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips import ClipRecorder
from vidpipe.clips.store import clip_file, recent, stored_clips
from vidpipe.config import CameraConfig, CaptureConfig, ClipsConfig
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.sinks.record import clip_record
from vidpipe.types import ClipEvent, Detections, FrameResult, TrackEvent

PERSON = "one-by-one-person-detection"
LABELS = Labels(["person", "bicycle"])


@dataclasses.dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def walkway(videos: Path) -> tuple[StreamParams, list[TapPacket], list[np.ndarray]]:
    """The first 40 s of the walkway clip: stream parameters, packets (times from 0), frames."""
    cam = CameraConfig(name="walkway", url=str(videos / f"{PERSON}.mp4"))
    source = PyAVSource(cam, CaptureConfig())
    packets: list[TapPacket] = []

    class Listener:  # keeps the packets; frames are placed by the packets' times here
        def __call__(self, packet: TapPacket) -> None:
            packets.append(packet)

        def frame(self, pts: int | None) -> None:
            pass

    source.packet_listener = Listener()
    info = source.open()
    frames = []
    while len(frames) < 400 and (picture := source.read()) is not None:
        frames.append(picture.image())
    source.close()
    assert info.stream is not None
    tb = info.stream.time_base
    packets = [dataclasses.replace(p, t_capture=float(p.pts * tb)) for p in packets]
    return info.stream, packets, frames


class Rig:
    """A recorder with one camera whose ring is fed up to a chosen time."""

    def __init__(self, tmp: Path, walkway: Any, **clips: Any) -> None:
        self.params, self.packets, self.frames = walkway
        self.clock = Clock(-1.0)
        self.metrics = Metrics()
        self.recorder = ClipRecorder(self.metrics, clock=self.clock)
        cfg = {"enabled": True, "pre_s": 2, "post_s": 3, "max_s": 30, "dir": str(tmp), **clips}
        self.cam = CameraConfig(name="walkway", url="x.mp4", clips=ClipsConfig(**cfg))
        self.ring = self.recorder.add_camera(self.cam, frozenset())
        self.ring.on_stream("walkway", self.params)
        self.fed = 0
        self.dir = tmp / "walkway"

    def feed_until(self, t: float) -> None:
        while self.fed < len(self.packets) and self.packets[self.fed].t_capture <= t:
            self.ring.on_packet("walkway", self.packets[self.fed])
            self.fed += 1

    def enter(self, t: float, track: int) -> FrameResult:
        """A zone enter of ``track`` in the frame at ``t`` (its image and the box of a person)."""
        self.feed_until(t)
        self.clock.now = t
        seq = round(t * 10)
        event = TrackEvent(
            "enter", "walkway", seq, time.time(), "table", track, 0, "person", (1, 2)
        )
        det = Detections(
            np.array([[300, 200, 400, 420]], np.float32),
            np.array([0.5 + track / 100], np.float32),
            np.array([0], np.int32),
            np.array([track]),
        )
        result = FrameResult(
            "walkway", seq, t, t, time.time(), 768, 432, det, LABELS,
            image=self.frames[seq], events=(event,),
        )  # fmt: skip
        return self.recorder.observe(result)

    def run_until(self, t: float) -> None:
        self.feed_until(t)
        self.clock.now = t

    def wait_clips(self, n: int, timeout_s: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            written = self.metrics.clips_written.labels(camera="walkway")._value.get()
            if written >= n:
                return [json.loads((self.dir / f"{c.clip_id}.json").read_text()) for c in
                        stored_clips(self.dir)]  # fmt: skip
            time.sleep(0.05)
        pytest.fail(f"{n} clip(s) not written in {timeout_s} s")

    def metric(self, counter: Any, **labels: str) -> float:
        return float(counter.labels(camera="walkway", **labels)._value.get())


def probe(path: Path) -> tuple[float, dict[str, Any]]:
    """(duration, first frame's key_frame/pict_type) by ffprobe."""
    base = ["ffprobe", "-v", "error", "-of", "json"]
    dur = subprocess.run([*base, "-show_entries", "format=duration", str(path)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    first = subprocess.run(
        [*base, "-select_streams", "v:0", "-show_frames", "-read_intervals", "%+#1",
         "-show_entries", "frame=key_frame,pict_type", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    frame = json.loads(first.stdout)["frames"][0]
    return float(json.loads(dur.stdout)["format"]["duration"]), frame


@pytest.mark.timeout(60)
def test_two_close_triggers_give_one_clip(tmp_path: Path, walkway: Any) -> None:
    rig = Rig(tmp_path, walkway)
    try:
        rig.run_until(10.45)
        first = rig.enter(10.5, track=1)
        assert first.events[-1].kind == "enter"  # no clip to announce yet
        rig.enter(12.0, track=2)  # while the first clip is open: extends it
        rig.run_until(15.4)  # 12 + post_s 3 (+ 0.5 for jitter) = 15.5: still open
        time.sleep(0.5)
        assert rig.metric(rig.metrics.clips_written) == 0
        rig.run_until(16.0)
        (side,) = rig.wait_clips(1)
    finally:
        rig.recorder.close(5)
    assert [t["tracker_id"] for t in side["triggers"]] == [1, 2]
    assert side["tracker_ids"] == [1, 2] and side["closed_by"] == "post_s"
    # from the keyframe at or before 10.5 - pre_s = 8.5 s (the one at 8 s), to 12 + 3 = 15 s,
    # each widened by the recorder's 0.5 s for jitter in arrival times: 8 s to 15.5 s
    assert side["packets"] == 155 - 80 + 1
    # seconds into the file, which starts at that keyframe
    assert [t["offset_s"] for t in side["triggers"]] == [2.5, 4.0]
    duration, frame = probe(rig.dir / side["file"])
    assert frame["key_frame"] == 1 and frame["pict_type"] == "I"
    assert duration >= 2 + 1.5 + 3
    # a crop per track, best score first for the triggering tracks
    assert [c["tracker_id"] for c in side["crops"]] == [2, 1]
    for crop in side["crops"]:
        # the box (100 x 220) + 10 % on each side, cut at the frame's bottom edge (432)
        assert (crop["width"], crop["height"]) == (120, 432 - 178)
        assert clip_file(rig.dir, crop["file"]) is not None


@pytest.mark.timeout(60)
def test_clip_event_rides_on_the_cameras_next_result(tmp_path: Path, walkway: Any) -> None:
    rig = Rig(tmp_path, walkway)
    try:
        rig.run_until(9.95)
        rig.enter(10.0, track=7)
        rig.run_until(20.0)
        (side,) = rig.wait_clips(1)
        nxt = rig.enter(20.0, track=8)
    finally:
        rig.recorder.close(5)
    clips = [e for e in nxt.events if e.kind == "clip"]
    assert len(clips) == 1
    clip = clips[0]
    assert (clip.clip_id, clip.tracker_ids, clip.size) == (side["id"], (7,), side["size"])
    assert clip.url == f"/clips/walkway/{side['id']}.mp4"
    assert clip.crop_url == f"/clips/walkway/{side['id']}.t7.jpg"
    # the sidecar: the record the sinks got, then what only the files tell
    record = clip_record(clip)
    assert list(side)[: len(record)] == list(record) and {k: side[k] for k in record} == record
    extras = {"file", "packets", "closed_by", "triggers", "triggers_total", "crops"}
    assert set(side) - set(record) == extras
    # it lasts what the stream's timestamps say, from the keyframe at 8 s (10 - pre_s) on
    duration, _ = probe(rig.dir / side["file"])
    assert abs(side["duration_s"] - duration) < 0.15


def late_rig(tmp: Path, walkway: Any, track: int) -> tuple[Rig, list[FrameResult]]:
    """A rig whose late clip events are collected, with a clip opened by ``track`` at 10 s."""
    late: list[FrameResult] = []
    rig = Rig(tmp, walkway)
    rig.recorder.send_late_events(late.append)
    rig.run_until(9.95)
    rig.enter(10.0, track=track)
    return rig, late


@pytest.mark.timeout(60)
def test_clips_written_after_their_cameras_last_result_reach_the_sinks_without_a_frame(
    tmp_path: Path, walkway: Any
) -> None:
    # a clip whose event a later result carries, then a clip still open at shutdown, whose
    # event no result can carry: only that one is sent on its own, once the recorder closes
    rig, late = late_rig(tmp_path, walkway, track=7)
    rig.run_until(20.0)
    rig.wait_clips(1)
    nxt = rig.enter(20.0, track=8)
    assert [e.kind for e in nxt.events] == ["enter", "clip"]
    rig.run_until(21.0)
    assert late == []
    rig.recorder.close(5)
    closed_by = {
        c.clip_id: json.loads((rig.dir / f"{c.clip_id}.json").read_text())["closed_by"]
        for c in stored_clips(rig.dir)
    }
    assert sorted(closed_by.values()) == ["post_s", "shutdown"]
    (result,) = late
    assert result.events_only and result.camera == "walkway" and len(result.detections) == 0
    (clip,) = result.events
    assert isinstance(clip, ClipEvent) and closed_by[clip.clip_id] == "shutdown"
    assert clip.tracker_ids == (8,)


@pytest.mark.timeout(60)
def test_a_removed_cameras_last_clip_reaches_the_sinks_without_a_frame(
    tmp_path: Path, walkway: Any
) -> None:
    rig, late = late_rig(tmp_path, walkway, track=3)
    try:
        rig.run_until(11.0)
        rig.recorder.remove_camera("walkway")  # its open clip is written as it stands
        deadline = time.monotonic() + 20
        while not late:
            assert time.monotonic() < deadline, "the removed camera's clip was not announced"
            time.sleep(0.05)
    finally:
        rig.recorder.close(5)
    (result,) = late
    (clip,) = result.events
    assert result.events_only and isinstance(clip, ClipEvent) and clip.tracker_ids == (3,)
    assert (rig.dir / f"{clip.clip_id}.mp4").exists()


@pytest.mark.timeout(90)
def test_max_s_caps_clips_and_retention_deletes_the_oldest(tmp_path: Path, walkway: Any) -> None:
    # one 8-10 s clip of this video is about 250-330 kB: the cap keeps one clip, not two
    rig = Rig(tmp_path, walkway, max_s=8, max_total_gb=0.0004)
    try:
        rig.run_until(2.95)
        announced = []
        for t in range(3, 34):  # a trigger every second for 30 s
            result = rig.enter(float(t), track=t)
            announced += [e.clip_id for e in result.events if e.kind == "clip"]
            if t % 8 == 0:
                time.sleep(0.4)  # let the writer thread see the clock
        rig.run_until(40.0)
        time.sleep(0.5)
    finally:
        rig.recorder.close(10)  # writes what is still queued
    written = rig.metric(rig.metrics.clips_written)
    assert written >= 4  # 3 + 30 + post_s - (3 - pre_s) = 35 s of clips of at most 8 s
    left = recent(rig.dir, 10)
    kept = sorted(side["id"] for side in left)
    assert sum(c.nbytes for c in stored_clips(rig.dir)) <= 0.0004e9
    assert rig.metric(rig.metrics.clips_deleted, reason="size") == written - len(left) >= 2
    # the ones deleted were written first (announcements come in the order of writing)
    deleted = [cid for cid in announced if cid not in kept]
    assert len(deleted) >= 2 and announced[: len(deleted)] == deleted
    for side in left:
        duration, frame = probe(rig.dir / side["file"])
        # max_s, from the keyframe (one a second) before the start, each end 0.5 s wider
        assert duration <= 8 + 1.0 + 0.5 + 0.1
        assert frame["key_frame"] == 1
    assert not list(rig.dir.glob(".tmp-*"))
    # nothing but the kept clips' files is left
    assert {p.name.split(".")[0] for p in rig.dir.iterdir()} == set(kept)


@pytest.mark.timeout(60)
def test_directory_that_cannot_be_written_drops_the_clip_and_recording_goes_on(
    tmp_path: Path, walkway: Any
) -> None:
    blocker = tmp_path / "clips"
    rig = Rig(blocker, walkway)
    blocker.write_text("not a directory")  # <dir>/walkway cannot be made
    try:
        rig.run_until(9.95)
        rig.enter(10.0, track=1)
        rig.run_until(20.0)
        deadline = time.monotonic() + 20
        while rig.metric(rig.metrics.clips_failed, reason="dir_missing") < 1:
            assert time.monotonic() < deadline, "the failure was not counted"
            time.sleep(0.05)
        blocker.unlink()  # the disk is back: the next clip is written
        rig.enter(21.0, track=2)
        rig.run_until(30.0)
        (side,) = rig.wait_clips(1)
    finally:
        rig.recorder.close(5)
    assert side["tracker_ids"] == [2]
    assert rig.metric(rig.metrics.clips_written) == 1


@pytest.mark.timeout(60)
def test_ring_holds_pre_s_back_to_a_keyframe_and_counts_its_limit(
    tmp_path: Path, walkway: Any
) -> None:
    rig = Rig(tmp_path, walkway, buffer_mb=0.05)  # about 1.5 s of this video
    try:
        rig.run_until(12.0)
        seg = rig.ring.segment(12.0 - 2.0, 12.0)
        assert seg is not None and seg.packets[0].keyframe
        assert rig.ring.nbytes <= 0.05 * 1024 * 1024
        assert rig.metric(rig.metrics.clip_ring_overflow) > 0
        small = Rig(tmp_path / "b", walkway)  # default buffer_mb: pre_s rules
        small.run_until(12.0)
        seg = small.ring.segment(10.0, 12.0)
        assert seg is not None and seg.t_start == 10.0 and seg.packets[0].keyframe
        kept = [p.t_capture for g in small.ring._gops for p in g.packets]
        # pre_s, the latest a trigger can be handled (max_frame_age_ms, 1 s by default) and
        # the recorder's 0.5 s for jitter: back to the keyframe at or before 12 - 3.5 = 8.5 s
        assert kept[0] == 8.0
        assert small.metric(small.metrics.clip_ring_overflow) == 0
        small.recorder.close(1)
    finally:
        rig.recorder.close(1)
