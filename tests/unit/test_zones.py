"""Zones and lines on synthetic track sequences: enter/leave, dwell, crossings, jitter."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.labels import Labels
from vidpipe.sinks.record import event_record
from vidpipe.track.geometry import (
    anchor_points,
    crosses_segment,
    into_frame,
    points_in_polygon,
    signed_distance,
    to_pixels,
)
from vidpipe.track.zones import FrameInfo, LineWatch, Observations, ZoneWatch

LABELS = Labels(("person", "bicycle", "car"))
SQUARE = np.array([[100, 100], [200, 100], [200, 200], [100, 200]], np.float64)
FRAME = (640, 480)  # width, height of the frame the synthetic zones are drawn in


def frame(seq: int, fps: float = 10.0) -> FrameInfo:
    return FrameInfo("cam", seq, 1_700_000_000.0 + seq / fps, seq / fps)


def obs(*tracks: tuple[int, int, tuple[float, float]]) -> Observations:
    """Observations of tracks ``(id, class, anchor (x, y))``: a 20x40 box whose bottom centre
    is the anchor."""
    if not tracks:
        return Observations.empty()
    ids, classes, points = zip(*tracks, strict=True)
    boxes = [(x - 10, y - 40, x + 10, y) for x, y in points]
    return Observations(
        np.array(ids, np.int64), np.array(classes, np.int32), np.array(boxes, np.float32)
    )


# ------------------------------------------------------------------------------ geometry


@pytest.mark.parametrize(
    ("point", "inside"),
    [
        ((150, 150), True),
        ((99, 150), False),
        ((201, 150), False),
        ((150, 99), False),
        ((150, 201), False),
        ((100, 150), True),  # left edge: inside (half-open)
        ((200, 150), False),  # right edge: outside
    ],
)
def test_points_in_square(point: tuple[float, float], inside: bool) -> None:
    assert points_in_polygon([point], SQUARE).tolist() == [inside]


# The demo's walkway camera: 768x432, its table zone drawn to the bottom edge (normalized
# 0.4..0.75 x 0.7..1.0), and the picture tiled into four quadrants that share edges.
W, H = 768, 432
TABLE = to_pixels([(0.4, 0.7), (0.75, 0.7), (0.75, 1.0), (0.4, 1.0)], "normalized", W, H)
QUADRANTS = {
    "top_left": [(0, 0), (384, 0), (384, 216), (0, 216)],
    "top_right": [(384, 0), (768, 0), (768, 216), (384, 216)],
    "bottom_left": [(0, 216), (384, 216), (384, 432), (0, 432)],
    "bottom_right": [(384, 216), (768, 216), (768, 432), (384, 432)],
}
# a triangle standing on the bottom edge: slanted edges reach the frame's edge
TRIANGLE = [(200, 232), (300, 432), (100, 432)]


@pytest.mark.parametrize(
    ("polygon", "point", "inside"),
    [
        (TABLE, (400, 432), True),  # a box clipped at the bottom edge: inside (the defect)
        (TABLE, (400, 431.9), True),
        (TABLE, (400, 0.7 * H), True),  # the zone's top edge, inside the frame: half-open, in
        (TABLE, (400, 302), False),  # just above it
        (TABLE, (0.4 * W, 432), True),  # bottom-left corner of the zone, on the frame's edge
        (TABLE, (0.75 * W, 432), False),  # its right edge is not the frame's: half-open, out
        (TABLE, (0.75 * W - 0.01, 432), True),
        (TABLE, (300, 432), False),  # left of the zone, on the frame's edge
        (TABLE, (400, 500), True),  # below the frame (cannot happen for clipped boxes)
        (TRIANGLE, (200, 432), True),
        (TRIANGLE, (299, 432), True),
        (TRIANGLE, (300, 432), False),  # the right corner: a right-hand edge
        (TRIANGLE, (200, 233), True),
        (TRIANGLE, (120, 300), False),  # outside the left slant
        (QUADRANTS["bottom_right"], (768, 432), True),  # the frame's corner
        (QUADRANTS["bottom_right"], (768, 300), True),  # the frame's right edge
        (QUADRANTS["bottom_right"], (384, 432), True),  # shared edge on the frame's edge
        (QUADRANTS["bottom_left"], (384, 432), False),  # ... belongs to one quadrant only
        (QUADRANTS["bottom_left"], (0, 432), True),
        (QUADRANTS["top_left"], (0, 0), True),
        (QUADRANTS["top_right"], (768, 0), True),
        (QUADRANTS["top_right"], (768, 216), False),  # shared with bottom_right
        (QUADRANTS["bottom_right"], (768, 216), True),
    ],
)
def test_zones_drawn_to_the_frame_edge_contain_points_on_it(
    polygon: object, point: tuple[float, float], inside: bool
) -> None:
    assert points_in_polygon(into_frame([point], W, H), polygon).tolist() == [inside]


def test_quadrants_tile_the_frame_edges_included() -> None:
    """Every point of the frame, on its edges and on shared zone edges too, is in exactly one
    of four tiles: the reason the edge rule stays half-open (a closed rule puts points of
    shared edges into two zones)."""
    xs = [0, 1, 383.5, 384, 384.5, 700, 767.999, 768]
    ys = [0, 1, 215.5, 216, 216.5, 431, 431.999, 432]
    points = into_frame([(x, y) for x in xs for y in ys], W, H)
    hits = sum(points_in_polygon(points, q).astype(int) for q in QUADRANTS.values())
    assert hits.tolist() == [1] * len(points)


@pytest.mark.parametrize(
    ("point", "want"),
    [
        ((0, 0), (0, 0)),
        ((768, 432), (np.nextafter(768, 0), np.nextafter(432, 0))),
        ((-5, 500), (0, np.nextafter(432, 0))),
        ((383.25, 216.5), (383.25, 216.5)),
    ],
)
def test_into_frame(point: tuple[float, float], want: tuple[float, float]) -> None:
    assert into_frame([point], W, H).tolist() == [list(want)]


def test_points_in_concave_polygon() -> None:
    # a "U": the notch between the arms is outside
    u_shape = [(0, 0), (30, 0), (30, 100), (70, 100), (70, 0), (100, 0), (100, 130), (0, 130)]
    got = points_in_polygon([(15, 50), (50, 50), (85, 50), (50, 120)], u_shape)
    assert got.tolist() == [True, False, True, True]


def test_signed_distance_left_of_the_line_on_screen_is_negative() -> None:
    # a -> b points right; on screen, "left" of it is up (smaller y)
    d = signed_distance([(50, 90), (50, 110), (50, 100)], (0, 100), (200, 100))
    np.testing.assert_allclose(d, [-10.0, 10.0, 0.0])


def test_crosses_segment_only_between_the_ends() -> None:
    a, b = (0.0, 100.0), (200.0, 100.0)
    assert crosses_segment((50, 120), (60, 80), a, b)
    assert not crosses_segment((250, 120), (260, 80), a, b)  # past b: on the extension
    assert crosses_segment((200, 120), (200, 80), a, b)  # through the end point


def test_anchor_points_and_normalized_coordinates() -> None:
    boxes = [(10, 20, 30, 60)]
    np.testing.assert_allclose(anchor_points(boxes, "bottom_center"), [[20, 60]])
    np.testing.assert_allclose(anchor_points(boxes, "center"), [[20, 40]])
    np.testing.assert_allclose(
        to_pixels([(0.5, 0.25), (1.0, 1.0)], "normalized", 640, 480), [[320, 120], [640, 480]]
    )
    np.testing.assert_allclose(to_pixels([(5, 6)], "pixel", 640, 480), [[5, 6]])


# ------------------------------------------------------------------------------ zones


def zone(class_ids: frozenset[int] | None = None) -> ZoneWatch:
    return ZoneWatch(LABELS, "square", SQUARE, class_ids, "bottom_center", frame_size=FRAME)


def test_enter_then_leave_with_dwell_time() -> None:
    z = zone()
    path = [(50, 150), (90, 150), (120, 150), (150, 150), (180, 150), (230, 150), (260, 150)]
    events = []
    for seq, point in enumerate(path):
        events += z.update(frame(seq), obs((7, 0, point)), ())
        if seq == 3:
            assert z.counts() == {0: 1}
    assert [(e.kind, e.seq, e.tracker_id, e.label) for e in events] == [
        ("enter", 2, 7, "person"),
        ("leave", 5, 7, "person"),
    ]
    leave = events[1]
    assert leave.reason == "exited"
    assert leave.dwell_s == pytest.approx(0.3)  # frames 2 -> 5 at 10 fps
    assert event_record(leave)["zone"] == "square" and event_record(leave)["dwell_s"] == 0.3
    assert z.counts() == {}


def test_walking_in_from_the_bottom_edge_enters_once() -> None:
    """The demo's defect: a person coming up from the bottom of the picture has a box clipped
    at y = height until their feet are in view. A zone drawn to the bottom edge must count them
    inside from the start, not let them leave and enter again when the clip ends."""
    z = ZoneWatch(LABELS, "table", TABLE, None, "bottom_center", frame_size=(W, H))
    feet = [432, 432, 432, 432, 431, 432, 428, 420, 400, 380, 360, 340, 310, 290, 270]
    events = []
    for seq, y in enumerate(feet):
        events += z.update(frame(seq), obs((3, 0, (450, y))), ())
    assert [(e.kind, e.seq) for e in events] == [("enter", 0), ("leave", 13)]


def test_unobserved_frames_keep_membership_and_a_lost_track_leaves() -> None:
    z = zone()
    assert [e.kind for e in z.update(frame(0), obs((1, 0, (150, 150))), ())] == ["enter"]
    for seq in range(1, 6):  # occluded: alive, but not matched to a detection
        assert z.update(frame(seq), Observations.empty(), ()) == []
    assert z.counts() == {0: 1}
    events = z.update(frame(6), Observations.empty(), {1})
    assert [(e.kind, e.reason) for e in events] == [("leave", "lost")]
    assert events[0].dwell_s == pytest.approx(0.6)
    assert events[0].point == (150.0, 150.0)  # where it was last seen


def test_reset_makes_everyone_leave() -> None:
    z = zone()
    z.update(frame(0), obs((1, 0, (150, 150)), (2, 2, (160, 160))), ())
    assert z.counts() == {0: 1, 2: 1}
    events = z.reset(frame(4))
    assert sorted((e.tracker_id, e.reason) for e in events) == [(1, "reset"), (2, "reset")]
    assert z.counts() == {}


def test_class_filter_ignores_other_classes() -> None:
    z = zone(frozenset({2}))
    events = z.update(frame(0), obs((1, 0, (150, 150)), (2, 2, (150, 150))), ())
    assert [(e.tracker_id, e.label) for e in events] == [(2, "car")]
    assert z.counts() == {2: 1}


def test_several_tracks_and_state_bounded_by_live_tracks() -> None:
    z = zone()
    for tid in range(100):  # 100 objects pass through, one after the other
        z.update(frame(3 * tid), obs((tid, 0, (150, 150))), ())
        z.update(frame(3 * tid + 1), Observations.empty(), {tid})
    assert z.counts() == {}
    assert len(z._inside) == 0


# ------------------------------------------------------------------------------ lines


def line(min_distance_px: float = 4.0, class_ids: frozenset[int] | None = None) -> LineWatch:
    a = np.array([0.0, 100.0])
    b = np.array([200.0, 100.0])
    return LineWatch(LABELS, "door", a, b, class_ids, "bottom_center", min_distance_px)


def run_line(w: LineWatch, ys: list[float], x: float = 100.0, tid: int = 1) -> list[str]:
    out = []
    for seq, y in enumerate(ys):
        out += [e.direction for e in w.update(frame(seq), obs((tid, 0, (x, y))), ())]
    return [d or "" for d in out]


def test_crossing_in_both_directions() -> None:
    w = line()
    # below the line (its right-hand side) to above (left-hand side): "in"; then back: "out"
    assert run_line(w, [150, 130, 110, 90, 70, 90, 110, 130]) == ["in", "out"]
    assert w.crossings == {"in": 1, "out": 1}


def test_cross_event_fields() -> None:
    w = line()
    w.update(frame(0), obs((9, 2, (100, 120))), ())
    (event,) = w.update(frame(1), obs((9, 2, (100, 80))), ())
    d = event_record(event)
    assert (d["event"], d["line"], d["direction"], d["tracker_id"], d["label"]) == (
        "cross",
        "door",
        "in",
        9,
        "car",
    )
    assert d["frame"] == 1 and d["point"] == [100.0, 80.0] and d["ts"].endswith("Z")


def test_jitter_along_the_line_does_not_double_count() -> None:
    w = line(min_distance_px=4.0)
    # one real crossing, then an object standing on the line, its box bottom jittering +-3 px
    jitter = [100 + (3 if i % 2 else -3) for i in range(30)]
    assert run_line(w, [140, 120, 90, *jitter, 97, 103, 96]) == ["in"]


def test_without_dead_band_jitter_would_count() -> None:
    """The same jitter with a zero dead band counts every swing: the dead band is what helps."""
    w = line(min_distance_px=0.0)
    assert len(run_line(w, [140, 120, 90, 103, 97, 103, 97])) == 5


def test_crossing_beside_the_line_does_not_count() -> None:
    w = line()
    assert run_line(w, [150, 120, 80, 60], x=260) == []  # passes the line's extension


def test_a_new_track_on_the_other_side_is_not_a_crossing() -> None:
    w = line()
    assert run_line(w, [150, 140], tid=1) == []
    # track 1 ends; a new track 2 appears above the line: no crossing
    w.update(frame(5), Observations.empty(), {1})
    assert run_line(w, [60, 50], tid=2) == []
    assert len(w._sides) == 1  # only the live track is remembered


def test_line_class_filter_and_reset() -> None:
    w = line(class_ids=frozenset({0}))
    w.update(frame(0), obs((1, 2, (100, 150))), ())
    assert w.update(frame(1), obs((1, 2, (100, 50))), ()) == []  # a car: not counted
    w.update(frame(2), obs((2, 0, (100, 150))), ())
    w.reset()  # reconnect: the side it was on is forgotten
    assert w.update(frame(3), obs((2, 0, (100, 50))), ()) == []


def test_a_box_wobbling_across_the_edge_makes_no_events_with_min_frames() -> None:
    wobble = [(150, 150), (150, 150), (150, 150)] + [(195, 150), (205, 150)] * 6
    steady = ZoneWatch(
        LABELS, "square", SQUARE, None, "bottom_center", min_frames=2, frame_size=FRAME
    )
    jumpy = ZoneWatch(
        LABELS, "square", SQUARE, None, "bottom_center", min_frames=1, frame_size=FRAME
    )
    events: dict[str, list[str]] = {"steady": [], "jumpy": []}
    for seq, point in enumerate([*wobble, (260, 150), (270, 150)]):
        for name, z in (("steady", steady), ("jumpy", jumpy)):
            events[name] += [e.kind for e in z.update(frame(seq), obs((1, 0, point)), ())]
    assert events["steady"] == ["enter", "leave"]
    assert len(events["jumpy"]) == 12  # 1 enter, then each wobble out and back in


def test_min_frames_dwell_runs_from_the_first_frame_seen_inside() -> None:
    z = ZoneWatch(LABELS, "square", SQUARE, None, "bottom_center", min_frames=3, frame_size=FRAME)
    path = [(50, 150), (150, 150), (150, 150), (150, 150), (150, 150), (250, 150), (250, 150)]
    events = []
    for seq, point in enumerate([*path, (250, 150)]):
        events += z.update(frame(seq), obs((1, 0, point)), ())
    assert [(e.kind, e.seq) for e in events] == [("enter", 3), ("leave", 7)]
    assert events[1].dwell_s == pytest.approx(0.4)  # inside from frame 1, outside from 5
