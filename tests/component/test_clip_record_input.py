"""Clips of a camera with a record input: its ring holds the record input's packets, placed by
arrival time, and a clip says where it came from.

The packets are the walkway clip's, demuxed by the record input's own reader
(``PacketReader``, no decoding), their arrival times set here to a 10 fps camera's; the
recorder's real ring, writer thread and sidecar. tests/integration/test_record_input_e2e.py
runs the same over RTSP with the whole daemon.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest

from vidpipe.capture.record_input import PacketReader
from vidpipe.capture.source import StreamParams, TapPacket
from vidpipe.clips import ClipRecorder
from vidpipe.config import CameraConfig, CaptureConfig, ClipsConfig
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.types import Detections, FrameResult, TrackEvent

pytestmark = pytest.mark.timeout(60)
CLIPS = "one-by-one-person-detection.mp4"


def record_camera(name: str, clips_dir: Path) -> CameraConfig:
    return CameraConfig.model_validate(
        {
            "name": name,
            "inputs": [
                {"url": "rtsp://cam/sub", "roles": ["detect"]},
                {"url": "rtsp://cam/main", "roles": ["record"]},
            ],
            "clips": ClipsConfig(enabled=True, dir=str(clips_dir), pre_s=1.0, post_s=1.0),
        }
    )


def packets_of(clip: Path, n: int) -> tuple[StreamParams, list[TapPacket]]:
    """The first ``n`` packets of ``clip`` as the record input demuxes them."""
    camera = CameraConfig(name="probe", url=str(clip))
    reader = PacketReader(camera, str(clip), CaptureConfig())
    params = reader.open()
    out: list[TapPacket] = []
    try:
        while len(out) < n:
            got = reader.read()
            assert got is not None, "the clip ended early"
            out.extend(got)
    finally:
        reader.close()
    return params, out[:n]


def trigger(recorder: ClipRecorder, camera: str, t_capture: float) -> None:
    event = TrackEvent("enter", camera, 7, time.time(), "door", 1, 0, "person", (1, 2))
    det = Detections(
        np.array([[300, 200, 400, 420]], np.float32),
        np.array([0.9], np.float32),
        np.array([0], np.int32),
        np.array([1]),
    )
    result = FrameResult(
        camera, 7, t_capture, time.monotonic(), time.time(), 768, 432, det, Labels(["person"]),
        events=(event,),
    )  # fmt: skip
    recorder.observe(result)


def wait_sidecar(camera_dir: Path, timeout_s: float = 20) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(camera_dir.glob("*.json"))
        if found:
            return dict(json.loads(found[0].read_text()))
        time.sleep(0.05)
    pytest.fail(f"no clip written in {camera_dir}")


def test_a_clip_is_cut_from_the_record_input_by_arrival_and_says_so(
    assets_dir: Path, tmp_path: Path
) -> None:
    params, packets = packets_of(assets_dir / "videos" / CLIPS, 50)
    recorder = ClipRecorder(Metrics())
    ring = recorder.add_camera(record_camera("hall", tmp_path), frozenset())
    base = time.monotonic() - 30.0  # a 10 fps camera, 30 s ago: the clip closes at once
    ring.on_stream("hall", params)
    for i, p in enumerate(packets):
        ring.on_packet("hall", dataclasses.replace(p, t_capture=base + 0.1 * i))
        if i == 28:  # a detect frame captured between packets 25 and 26, detected a little later
            trigger(recorder, "hall", base + 2.55)
    side = wait_sidecar(tmp_path / "hall")
    recorder.close(5)
    assert side["input"] == "record" and side["aligned_by"] == "arrival", side
    assert side["record_offset_s"] is None  # no sender reports: nothing measured
    # the file starts at the keyframe (one a second) at or before 2.55 - 1 - 0.5 s: packet 10;
    # the trigger is at the last packet that arrived before its frame: packet 25
    assert packets[10].keyframe and packets[25].pts is not None and packets[10].pts is not None
    expected = float((packets[25].pts - packets[10].pts) * params.time_base)
    (hit,) = side["triggers"]
    assert hit["offset_s"] == pytest.approx(expected, abs=0.001), side


def test_with_sender_reports_on_both_inputs_a_trigger_is_moved_by_their_measured_offset(
    assets_dir: Path, tmp_path: Path
) -> None:
    """The camera took moment k at wall time W + 0.1 k. Its record packet of moment k arrives
    0.5 s after (a slower path), its detect picture of moment k leaves the decoder 0.2 s after:
    the record stream is 0.3 s behind detection, and arrival alone would place a trigger three
    packets early."""
    params, packets = packets_of(assets_dir / "videos" / CLIPS, 50)
    recorder = ClipRecorder(Metrics())
    ring = recorder.add_camera(record_camera("hall", tmp_path), frozenset())
    clock = recorder.detect_clock("hall")
    assert clock is not None
    base, wall = time.monotonic() - 30.0, 1.8e9
    ring.on_stream("hall", params)
    clock.on_stream("hall", params)
    for k, p in enumerate(packets):
        ring.on_packet(
            "hall", dataclasses.replace(p, t_capture=base + 0.1 * k + 0.5, t_sender=wall + 0.1 * k)
        )
        sub = dataclasses.replace(p, pts=k, t_capture=base + 0.1 * k, t_sender=wall + 0.1 * k)
        clock.on_packet("hall", sub)
        clock.on_frame("hall", k, base + 0.1 * k + 0.2)
        if k == 30:  # the detect picture of moment 25 (decoded at base + 2.7), detected late
            trigger(recorder, "hall", base + 2.75)
    side = wait_sidecar(tmp_path / "hall")
    recorder.close(5)
    assert side["input"] == "record" and side["aligned_by"] == "rtcp", side
    assert side["record_offset_s"] == pytest.approx(0.3, abs=0.001)
    # moved to base + 3.05 on the ring's clock: the last record packet by then is moment 25's
    # (arrived at base + 3.0); the file starts at the keyframe at or before 3.05 - 1 - 0.5 s
    # (packet 10, arrived at 1.5)
    assert packets[25].pts is not None and packets[10].pts is not None and packets[10].keyframe
    expected = float((packets[25].pts - packets[10].pts) * params.time_base)
    (hit,) = side["triggers"]
    assert hit["offset_s"] == pytest.approx(expected, abs=0.001), side


def test_no_clip_of_stale_packets_while_the_record_input_is_down(
    assets_dir: Path, tmp_path: Path
) -> None:
    params, packets = packets_of(assets_dir / "videos" / CLIPS, 30)
    metrics = Metrics()
    recorder = ClipRecorder(metrics)
    ring = recorder.add_camera(record_camera("hall", tmp_path), frozenset())
    base = time.monotonic() - 100.0  # the record input's last packets came 97 s ago
    ring.on_stream("hall", params)
    for i, p in enumerate(packets):
        ring.on_packet("hall", dataclasses.replace(p, t_capture=base + 0.1 * i))
    trigger(recorder, "hall", time.monotonic() - 5.0)  # detection went on meanwhile

    def failed() -> float:
        got = metrics.registry.get_sample_value(
            "vidpipe_clips_failed_total", {"camera": "hall", "reason": "no_keyframe"}
        )
        return float(got or 0.0)

    deadline = time.monotonic() + 20
    while failed() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    recorder.close(5)
    assert failed() == 1
    assert not list((tmp_path / "hall").glob("*.mp4"))


def decoded_pictures(clip: Path, n: int) -> dict[int, np.ndarray]:
    """The first ``n`` pictures of ``clip`` decoded whole by PyAV, by pts."""
    import av

    out: dict[int, np.ndarray] = {}
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            out[frame.pts] = frame.to_ndarray(format="bgr24")
            if len(out) >= n:
                break
    return out


def test_a_shot_is_cut_from_the_record_picture_that_arrived_nearest_at_its_scale(
    assets_dir: Path,
) -> None:
    from vidpipe.clips.ring import Segment
    from vidpipe.clips.shots import Shot, record_crops

    clip = assets_dir / "videos" / CLIPS
    params, packets = packets_of(clip, 40)
    base = 100.0
    timed = tuple(dataclasses.replace(p, t_capture=base + 0.1 * i) for i, p in enumerate(packets))
    # detected on a 384x216 sub-stream: the record stream (the clip, 768x432) is twice its size
    near_23 = Shot(1, "person", 0.9, (150.0, 100.0, 200.0, 210.0), 384, 216, base + 2.32)
    near_35 = Shot(2, "person", 0.8, (10.0, 20.0, 30.0, 60.0), 384, 216, base + 3.46)
    crops = record_crops(Segment(params, timed), [near_23, near_35], padding=0.0)
    assert [c.tracker_id for c in crops] == [1, 2]
    whole = decoded_pictures(clip, 40)
    assert packets[23].pts is not None and packets[35].pts is not None
    assert np.array_equal(crops[0].image, whole[packets[23].pts][200:420, 300:400])
    assert np.array_equal(crops[1].image, whole[packets[35].pts][40:120, 20:60])
    # padding grows the box at the record stream's scale, clipped to its picture
    (padded,) = record_crops(Segment(params, timed), [near_23], padding=0.1)
    assert padded.image.shape == (432 - 178, 410 - 290, 3)


def test_a_record_input_clip_with_crops_from_the_record_stream_writes_them_at_its_size(
    assets_dir: Path, tmp_path: Path
) -> None:
    params, packets = packets_of(assets_dir / "videos" / CLIPS, 50)
    camera = record_camera("hall", tmp_path)
    clips = camera.clips.model_copy(
        update={"crop": camera.clips.crop.model_copy(update={"source": "record"})}
    )
    recorder = ClipRecorder(Metrics())
    ring = recorder.add_camera(camera.model_copy(update={"clips": clips}), frozenset())
    assert not recorder.wants_images  # the detect frames' pictures are not kept
    base = time.monotonic() - 30.0
    ring.on_stream("hall", params)
    for i, p in enumerate(packets):
        ring.on_packet("hall", dataclasses.replace(p, t_capture=base + 0.1 * i))
        if i == 28:  # the box (300, 200, 400, 420) of a 768x432 detect frame: scale 1
            trigger(recorder, "hall", base + 2.55)
    side = wait_sidecar(tmp_path / "hall")
    recorder.close(5)
    (crop,) = side["crops"]
    assert crop["tracker_id"] == 1 and crop["label"] == "person"
    # padding 0.1: 10 and 22 pixels on each side, the bottom clipped at 432
    assert (crop["width"], crop["height"]) == (120, 432 - 178), side
    assert (tmp_path / "hall" / crop["file"]).read_bytes()[:3] == b"\xff\xd8\xff"
