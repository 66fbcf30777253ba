"""Track ids and events in the shared records, the JSONL sink and the drawings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from vidpipe.config import LineConfig, ZoneConfig
from vidpipe.labels import Labels
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks.jsonl import JsonlSink
from vidpipe.sinks.record import detection_dicts, event_record
from vidpipe.track.draw import draw_scene
from vidpipe.track.geometry import resolve_scene
from vidpipe.types import Detections, FrameResult, TrackEvent

LABELS = Labels(("person", "bicycle", "car"))


def two_dets(tracker_id: list[int] | None) -> Detections:
    return Detections(
        np.array([[10, 10, 50, 90], [60, 20, 100, 80]], np.float32),
        np.array([0.9, 0.6], np.float32),
        np.array([0, 2], np.int32),
        None if tracker_id is None else np.array(tracker_id),
    )


def event(kind: str = "cross", **kw: object) -> TrackEvent:
    fields: dict[str, object] = {
        "kind": kind,
        "camera": "door",
        "seq": 7,
        "wall_time": 1_700_000_000.25,
        "where": "middle",
        "tracker_id": 3,
        "class_id": 0,
        "label": "person",
        "point": (12.345, 67.891),
    }
    fields.update(kw)
    return TrackEvent(**fields)  # type: ignore[arg-type]


def frame_result(det: Detections, events: tuple[TrackEvent, ...] = ()) -> FrameResult:
    return FrameResult("door", 7, 1.0, 1.1, 1_700_000_000.25, 160, 120, det, LABELS, events=events)


def test_tracker_id_is_validated_and_kept_by_select() -> None:
    det = two_dets([4, -1])
    assert det.tracker_id is not None and det.tracker_id.dtype == np.int64
    assert det.select([True, False]).tracker_id.tolist() == [4]  # type: ignore[union-attr]
    assert two_dets(None).select([1]).tracker_id is None
    with pytest.raises(ValueError, match=r"tracker_id must have shape \(2,\)"):
        two_dets([1, 2, 3])
    empty = Detections.empty().with_tracker_ids(np.zeros(0))
    assert empty.tracker_id is not None and empty.tracker_id.shape == (0,)


def test_detection_dicts_carry_track_ids_only_when_tracking() -> None:
    dicts = detection_dicts(frame_result(two_dets([4, -1])))
    assert [d["tracker_id"] for d in dicts] == [4, None]
    assert all("tracker_id" not in d for d in detection_dicts(frame_result(two_dets(None))))


@pytest.mark.parametrize(
    ("ev", "expected"),
    [
        (
            event(direction="in"),
            {"event": "cross", "line": "middle", "direction": "in", "point": [12.3, 67.9]},
        ),
        (event("enter", where="hall"), {"event": "enter", "zone": "hall"}),
        (
            event("leave", where="hall", dwell_s=3.21049, reason="lost"),
            {"event": "leave", "zone": "hall", "dwell_s": 3.21, "reason": "lost"},
        ),
    ],
)
def test_event_records(ev: TrackEvent, expected: dict[str, object]) -> None:
    d = event_record(ev)
    assert expected.items() <= d.items()
    assert (d["v"], d["camera"], d["frame"], d["ts"], d["tracker_id"], d["label"]) == (
        1,
        "door",
        7,
        "2023-11-14T22:13:20.250Z",
        3,
        "person",
    )
    if ev.kind != "cross":
        assert "direction" not in d and "line" not in d


def test_jsonl_writes_event_lines_even_for_frames_it_skips(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = JsonlSink("jsonl", path, only_with_detections=True)
    sink.handle(frame_result(Detections.empty()))  # nothing: skipped
    sink.handle(frame_result(Detections.empty(), (event("leave", where="hall", reason="lost"),)))
    sink.handle(frame_result(two_dets([4, 5]), (event(direction="out"),)))
    sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("event", "frame") for line in lines] == ["leave", "frame", "cross"]
    assert [d["tracker_id"] for d in lines[1]["detections"]] == [4, 5]


def test_captions_carry_the_track_id() -> None:
    image = np.full((120, 160, 3), 60, np.uint8)
    with_ids = draw_detections(image, two_dets([4, 12]), LABELS)
    without = draw_detections(image, two_dets(None), LABELS)
    # same boxes; the longer captions ("person #4 0.90") cover more pixels
    assert np.count_nonzero(with_ids != image) > np.count_nonzero(without != image)


def test_draw_scene_marks_zones_and_lines_on_a_copy() -> None:
    image = np.full((200, 400, 3), 60, np.uint8)
    zone = ZoneConfig(name="hall", coords="normalized", points=[(0, 0), (0.5, 0), (0.5, 1), (0, 1)])
    line = LineConfig(name="door", points=[(300, 20), (300, 180)])
    scene = resolve_scene([zone], [line], 400, 200)
    out = draw_scene(image, scene, zone_counts={"hall": 2}, line_counts={"door": {"in": 1}})
    assert np.all(image == 60)  # input untouched
    assert np.any(out[150, 100] != 60)  # inside the zone: tinted
    assert np.all(out[150, 250] == 60)  # outside everything: untouched
    assert np.any(out[100, 300] != 60)  # on the line
    # the arrow points to the "in" side: the line points down, so that is x > 300
    right = np.count_nonzero(out[90:110, 305:330] != 60)
    left = np.count_nonzero(out[90:110, 270:295] != 60)
    assert right > left
    with pytest.raises(ValueError, match="uint8"):
        draw_scene(image.astype(np.float32), scene)  # type: ignore[arg-type]


def test_live_view_draws_the_camera_scene_over_the_detections() -> None:
    from vidpipe.metrics import Metrics
    from vidpipe.sinks.live import LiveView

    zone = ZoneConfig(name="hall", coords="normalized", points=[(0, 0), (0.5, 0), (0.5, 1), (0, 1)])
    scene = resolve_scene([zone], [], 160, 120)
    seen: list[str] = []

    def overlay(camera: str, image: np.ndarray) -> np.ndarray:
        seen.append(camera)
        return draw_scene(image, scene)

    image = np.full((120, 160, 3), 60, np.uint8)
    plain = LiveView(draw_detections, Metrics())
    zoned = LiveView(draw_detections, Metrics(), overlay=overlay)
    result = dataclasses.replace(frame_result(two_dets([4, 5])), image=image)
    for live in (plain, zoned):
        live.handle(result)
    a, b = plain.jpeg("door"), zoned.jpeg("door")
    assert a is not None and b is not None and seen == ["door"]
    tinted = cv2.imdecode(np.frombuffer(b.data, np.uint8), cv2.IMREAD_COLOR)
    untinted = cv2.imdecode(np.frombuffer(a.data, np.uint8), cv2.IMREAD_COLOR)
    assert abs(int(tinted[110, 20].sum()) - int(untinted[110, 20].sum())) > 30  # in the zone
