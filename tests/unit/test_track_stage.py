"""The tracking step on synthetic frame results: ids, events, metrics, resets, config errors."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from vidpipe.config import Config, ConfigError, parse_config
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.sinks.record import detection_dicts
from vidpipe.track.stage import CameraScene, TrackingStage, build_scenes
from vidpipe.types import Detections, FrameResult

LABELS = Labels(("person", "bicycle", "car"))

CONFIG = """\
model:
  path: /m.onnx
cameras:
  - name: door
    url: /door.mp4
    zones:
      - name: hall
        coords: normalized
        points: [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]
        classes: [person]
    lines:
      - name: middle
        coords: normalized
        points: [[0.5, 0], [0.5, 1]]
  - name: plain
    url: /plain.mp4
"""


def config(text: str = CONFIG) -> Config:
    return parse_config(textwrap.dedent(text), "test.yaml", env={})


def result(
    seq: int,
    boxes: list[tuple[float, float, float, float]],
    *,
    camera: str = "door",
    epoch: int = 0,
    class_id: int = 0,
) -> FrameResult:
    n = len(boxes)
    det = (
        Detections(np.array(boxes, np.float32), np.full(n, 0.9, np.float32), np.full(n, class_id))
        if n
        else Detections.empty()
    )
    return FrameResult(camera, seq, seq / 10, seq / 10 + 0.05, 1e9 + seq / 10, 400, 200, det,
                       LABELS, epoch=epoch)  # fmt: skip


def walk(seq: int) -> tuple[float, float, float, float]:
    """A 30x80 person walking right, 8 px per frame, from x=100 (in the hall) to x=340."""
    x = 100 + 8 * seq
    return (x, 100, x + 30, 180)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


class Recorded(TrackingStage):
    """The stage, with every result it hands to the next stage kept in ``out``."""

    def __init__(self, scenes: dict[str, CameraScene], metrics: Metrics) -> None:
        super().__init__(scenes, metrics)
        self.out: list[FrameResult] = []

    def __call__(self, result: FrameResult) -> FrameResult:
        passed = super().__call__(result)
        self.out.append(passed)
        return passed


def make(text: str = CONFIG) -> tuple[TrackingStage, list[FrameResult], Metrics]:
    cfg = config(text)
    metrics = Metrics()
    scenes = build_scenes(cfg, lambda _: LABELS, {"door": None, "plain": None}, metrics)
    stage = Recorded(scenes, metrics)
    return stage, stage.out, metrics


def test_walker_leaves_the_hall_and_crosses_the_middle_line_once() -> None:
    stage, out, metrics = make()
    for seq in range(30):
        stage(result(seq, [walk(seq)]))
    events = [e for r in out for e in r.events]
    kinds = [(e.kind, e.where, e.direction or e.reason) for e in events]
    # the line points down the frame, so its left-hand side ("in") is the right of the frame
    assert kinds == [
        ("enter", "hall", None),
        ("leave", "hall", "exited"),
        ("cross", "middle", "in"),
    ]
    ids = {e.tracker_id for e in events}
    assert len(ids) == 1
    assert {int(t) for r in out[5:] for t in r.detections.tracker_id} == ids
    assert detection_dicts(out[-1])[0]["tracker_id"] == ids.pop()
    labels = {"camera": "door", "line": "middle", "class": "person"}
    assert sample(metrics, "vidpipe_line_crossings_total", **labels, direction="in") == 1
    assert sample(metrics, "vidpipe_line_crossings_total", **labels, direction="out") == 0
    gauge = {"camera": "door", "zone": "hall", "class": "person"}
    assert sample(metrics, "vidpipe_zone_objects", **gauge) == 0


def test_zone_gauge_counts_who_is_inside() -> None:
    stage, out, metrics = make()
    for seq in range(5):  # two people standing in the hall
        stage(result(seq, [(20, 100, 50, 180), (120, 100, 150, 180)]))
    gauge = {"camera": "door", "zone": "hall", "class": "person"}
    assert sample(metrics, "vidpipe_zone_objects", **gauge) == 2
    assert sum(e.kind == "enter" for r in out for e in r.events) == 2


def test_reconnect_resets_tracks_and_empties_zones() -> None:
    stage, out, metrics = make()
    for seq in range(5):
        stage(result(seq, [(20, 100, 50, 180)]))
    first_id = int(out[-1].detections.tracker_id[0])
    stage(result(5, [(20, 100, 50, 180)], epoch=1))  # the capture reopened the stream
    leaves = [e for e in out[-1].events if e.kind == "leave"]
    assert [(e.tracker_id, e.reason) for e in leaves] == [(first_id, "reset")]
    assert sample(metrics, "vidpipe_tracker_resets_total", camera="door") == 1
    for seq in range(6, 10):
        stage(result(seq, [(20, 100, 50, 180)], epoch=1))
    assert int(out[-1].detections.tracker_id[0]) > first_id


def test_class_filter_of_the_zone_and_untracked_camera_passes_through() -> None:
    stage, out, _ = make()
    for seq in range(5):
        stage(result(seq, [(20, 100, 50, 180)], class_id=2))  # a car in the hall
    assert not [e for r in out for e in r.events if e.kind == "enter"]
    stage(result(0, [(20, 100, 50, 180)], camera="plain"))
    assert out[-1].detections.tracker_id is None and out[-1].events == ()
    assert "tracker_id" not in detection_dicts(out[-1])[0]


def test_a_failing_step_passes_the_result_on_and_counts_it(caplog) -> None:
    stage, out, metrics = make()
    stage(result(0, [walk(0)]))

    def boom(_result: FrameResult) -> FrameResult:
        raise RuntimeError("boom")

    stage.scenes["door"].process = boom  # type: ignore[method-assign]
    stage(result(1, [walk(1)]))
    assert len(out) == 2 and out[1].seq == 1
    assert sample(metrics, "vidpipe_tracking_errors_total", camera="door") == 1
    assert "tracking failed" in caplog.text


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        (
            "[persn]",
            "cameras[0].zones[0].classes[0] (door): unknown class 'persn' (did you mean 'person'?)",
        ),
        ("[7]", "cameras[0].zones[0].classes[0] (door): class id 7 out of range 0..2"),
    ],
)
def test_unknown_zone_class_names_the_yaml_path(classes: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_scenes(config(CONFIG.replace("[person]", classes)), lambda _: LABELS, {}, Metrics())
    assert expected in info.value.problems


def test_zone_class_that_the_camera_filters_out_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        build_scenes(config(), lambda _: LABELS, {"door": frozenset({2})}, Metrics())
    assert any(
        "cameras[0].zones[0].classes (door): class 'person' is never reported" in p
        for p in info.value.problems
    )


@pytest.mark.parametrize(
    ("yaml_tail", "expected"),
    [
        (
            "    zones:\n      - name: z\n        points: [[0, 0], [5, 5]]\n",
            "cameras[0].zones[0].points (line 8): a zone needs at least 3 points, got 2",
        ),
        (
            "    zones:\n      - name: z\n        coords: normalized\n"
            "        points: [[0, 0], [1.5, 0], [1, 1]]\n",
            "points[1] = [1.5, 0]: normalized coordinates must lie within 0..1",
        ),
        (
            "    zones:\n      - name: z\n        points: [[0, 0], [5, 5], [10, 10]]\n",
            "enclose no area",
        ),
        ("    lines:\n      - name: l\n        points: [[0, 0]]\n", "exactly 2 points, got 1"),
        ("    lines:\n      - name: l\n        points: [[-1, 0], [3, 3]]\n", "cannot be negative"),
        (
            "    tracking: {enabled: false}\n    lines:\n      - name: l\n"
            "        points: [[0, 0], [3, 3]]\n",
            "zones and lines need tracking",
        ),
        (
            "    lines:\n      - {name: l, points: [[0, 0], [3, 3]]}\n"
            "      - {name: l, points: [[0, 0], [4, 3]]}\n",
            "duplicate line name 'l'",
        ),
        (
            "    zones:\n      - name: 'a b'\n        points: [[0, 0], [5, 0], [5, 5]]\n",
            "zone name may use only",
        ),
        (
            "    tracking: {min_iuo: 0.2}\n",
            "cameras[0].tracking.min_iuo (line 6): unknown key (did you mean 'min_iou'?)",
        ),
    ],
)
def test_bad_zone_and_line_config_names_the_path(yaml_tail: str, expected: str) -> None:
    base = "model:\n  path: /m.onnx\ncameras:\n  - name: door\n    url: /door.mp4\n"
    with pytest.raises(ConfigError) as info:
        config(base + yaml_tail)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_series_of_filtered_classes_exist_from_the_start() -> None:
    line_points = "points: [[0.5, 0], [0.5, 1]]"
    text = CONFIG.replace(line_points, line_points + "\n        classes: [car]")
    _, _, metrics = make(text)
    line = {"camera": "door", "line": "middle", "class": "car"}
    for direction in ("in", "out"):
        labels = {**line, "direction": direction}
        assert metrics.registry.get_sample_value("vidpipe_line_crossings_total", labels) == 0.0
    zone = {"camera": "door", "zone": "hall", "class": "person"}
    assert metrics.registry.get_sample_value("vidpipe_zone_objects", zone) == 0.0


def test_reload_keeps_tracks_of_unchanged_cameras_and_restarts_changed_ones() -> None:
    stage, out, metrics = make()
    for seq in range(5):
        stage(result(seq, [(20, 100, 50, 180)]))
    old_scene, old_id = stage.scenes["door"], int(out[-1].detections.tracker_id[0])
    gauge = {"camera": "door", "zone": "hall", "class": "person"}
    assert sample(metrics, "vidpipe_zone_objects", **gauge) == 1

    same = build_scenes(config(), lambda _: LABELS, {"door": None, "plain": None}, metrics)
    stage.replace_scenes(same)  # a reload that did not touch this camera's scene
    assert stage.scenes["door"] is old_scene
    stage(result(5, [(20, 100, 50, 180)]))
    assert int(out[-1].detections.tracker_id[0]) == old_id

    smaller = CONFIG.replace("0.5, 0], [0.5, 1], [0, 1]", "0.4, 0], [0.4, 1], [0, 1]")
    moved = build_scenes(config(smaller), lambda _: LABELS, {}, metrics)
    stage.replace_scenes(moved)  # the zone changed: a fresh scene, the old series removed
    assert stage.scenes["door"] is not old_scene
    assert metrics.registry.get_sample_value("vidpipe_zone_objects", gauge) == 0.0  # re-created
    for seq in range(6, 10):
        stage(result(seq, [(20, 100, 50, 180)]))
    assert sample(metrics, "vidpipe_zone_objects", **gauge) == 1

    stage.replace_scenes({})  # tracking removed from every camera
    assert metrics.registry.get_sample_value("vidpipe_zone_objects", gauge) is None
    stage(result(10, [(20, 100, 50, 180)]))
    assert out[-1].detections.tracker_id is None


def test_pixel_zone_outside_the_frame_is_logged(caplog) -> None:
    text = CONFIG.replace(
        "coords: normalized\n        points: [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]",
        "points: [[0, 0], [1900, 0], [1900, 1000], [0, 1000]]",
    )
    stage, _, _ = make(text)
    stage(result(0, [walk(0)]))  # frames are 400x200
    assert "camera door: zone 'hall' reaches outside the 400x200 frame" in caplog.text
