"""Event clips from a live RTSP camera.

A real GStreamer RTSP server (``tests/rtsp.py``), the real capture worker and PyAV, the
recorder's real ring and writer thread; ffprobe and libav read the clips back. Each test
starts its own server, so the worker's connection is a fresh RTSP session: its first packet
is a keyframe that PyAV hands over without timestamps.

Triggers are zone events made here on frames the worker captured: the recorder, not the
tracker, is under test (tests/integration/test_clips_e2e.py runs the whole pipeline).
"""

from __future__ import annotations

import bisect
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.component.capture_rig import PERSON, Rig, wait_until
from tests.rtsp import RtspServer
from vidpipe.clips import ClipRecorder
from vidpipe.clips.store import stored_clips
from vidpipe.config import CameraConfig, ClipsConfig
from vidpipe.labels import Labels
from vidpipe.types import Detections, Frame, FrameResult, TrackEvent

CAMERA = "walkway"
LABELS = Labels(["person"])


class LiveCamera:
    """One RTSP camera whose packets go to a clip recorder, and whose frames the rig keeps."""

    def __init__(self, rig: Rig, url: str, clips_dir: Path, **clips: Any) -> None:
        self.rig = rig
        self.recorder = ClipRecorder(rig.metrics)
        cfg = ClipsConfig(enabled=True, dir=str(clips_dir), **clips)
        ring = self.recorder.add_camera(CameraConfig(name=CAMERA, url=url, clips=cfg), frozenset())
        self.dir = clips_dir / CAMERA
        self.worker, _ = rig.worker(CAMERA, url, "newest")
        self.worker.set_packet_tap(ring)
        self.worker.start()

    def frame_at(self, seconds: float, timeout_s: float = 30) -> Frame:
        """The first frame captured at least ``seconds`` after the session's first frame."""
        found: list[Frame] = []

        def arrived() -> bool:
            frames = self.rig.collector.of(CAMERA)
            found[:] = [f for f in frames if f.t_capture - frames[0].t_capture >= seconds][:1]
            return bool(found)

        wait_until(arrived, timeout_s, f"a frame {seconds} s into the session")
        return found[0]

    def trigger(self, frame: Frame, track: int) -> None:
        """A zone enter of ``track`` in ``frame``, handed to the recorder now (a little late,
        as detection would)."""
        event = TrackEvent("enter", CAMERA, frame.seq, time.time(), "door", track, 0, "person",
                           (1, 2))  # fmt: skip
        det = Detections(
            np.array([[300, 200, 400, 420]], np.float32),
            np.array([0.9], np.float32),
            np.array([0], np.int32),
            np.array([track]),
        )
        result = FrameResult(
            CAMERA, frame.seq, frame.t_capture, time.monotonic(), time.time(), 768, 432, det,
            LABELS, image=frame.image, events=(event,),
        )  # fmt: skip
        self.recorder.observe(result)

    def wait_clip(self, timeout_s: float = 30) -> dict[str, Any]:
        """The sidecar of the one clip written (fails on a failed clip)."""
        metrics = self.rig.metrics

        def done() -> bool:
            failed = sum(
                metrics.clips_failed.labels(camera=CAMERA, reason=r)._value.get()
                for r in ("write_error", "no_keyframe", "disk_full", "dir_missing")
            )
            assert failed == 0, "the clip was not written (vidpipe_clips_failed_total)"
            return bool(metrics.clips_written.labels(camera=CAMERA)._value.get() >= 1)

        wait_until(done, timeout_s, "the clip")
        (clip,) = stored_clips(self.dir)
        return dict(json.loads((self.dir / f"{clip.clip_id}.json").read_text()))

    def close(self) -> None:
        self.recorder.close(5)


def decode(path: Path) -> list[tuple[float, np.ndarray]]:
    """Every frame of ``path``: (its time in the file in seconds, BGR pixels)."""
    with av.open(str(path)) as clip:
        return [(float(f.time), f.to_ndarray(format="bgr24")) for f in clip.decode(video=0)]


def ffprobe_first_frame(path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        ["ffprobe", "-v", "error", "-of", "json", "-select_streams", "v:0", "-show_frames",
         "-read_intervals", "%+#1", "-show_entries", "frame=key_frame,pict_type,width,height",
         str(path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return dict(json.loads(proc.stdout)["frames"][0])


@pytest.mark.timeout(90)
def test_trigger_early_in_a_fresh_rtsp_session_gives_a_playable_clip(
    rig: Rig, videos: Path, tmp_path: Path, rtsp_ok: None
) -> None:
    with RtspServer(videos) as server:
        camera = LiveCamera(rig, server.url(PERSON), tmp_path, pre_s=3, post_s=1)
        try:
            trigger = camera.frame_at(2.5)  # its pre-roll reaches back to the session's start
            camera.trigger(trigger, track=1)
            side = camera.wait_clip()
        finally:
            camera.close()
    clip = camera.dir / side["file"]
    first = ffprobe_first_frame(clip)
    assert (first["key_frame"], first["pict_type"]) == (1, "I")
    assert (first["width"], first["height"]) == (768, 432)
    frames = decode(clip)
    assert len(frames) == side["packets"]  # every packet, the session's first one too
    session_start = rig.collector.of(CAMERA)[0]
    if session_start.seq == 0:  # (the collector took the session's first frame)
        assert np.array_equal(frames[0][1], session_start.image)


@pytest.mark.timeout(90)
def test_offset_s_is_where_the_trigger_frame_is_in_the_clip(
    rig: Rig, videos: Path, tmp_path: Path, rtsp_ok: None
) -> None:
    with RtspServer(videos) as server:
        camera = LiveCamera(rig, server.url(PERSON), tmp_path, pre_s=1, post_s=1)
        try:
            triggers = [camera.frame_at(4.0)]
            camera.trigger(triggers[0], track=1)
            triggers.append(camera.frame_at(4.55))  # another place in its group of pictures
            camera.trigger(triggers[1], track=2)
            side = camera.wait_clip()
        finally:
            camera.close()
    frames = decode(camera.dir / side["file"])
    times = [t for t, _ in frames]
    assert [t["tracker_id"] for t in side["triggers"]] == [1, 2]
    for hit, frame in zip(side["triggers"], triggers, strict=True):
        # a player seeking to offset_s shows the last picture that starts at or before it:
        # the very picture the detector was given (the same pixels, no inference involved)
        i = bisect.bisect_right(times, hit["offset_s"]) - 1
        assert np.array_equal(frames[i][1], frame.image), (hit["offset_s"], times[i])
        # (and the pictures next to it differ, so the comparison can tell them apart)
        assert not np.array_equal(frames[i - 1][1], frame.image)
        assert not np.array_equal(frames[i + 1][1], frame.image)
