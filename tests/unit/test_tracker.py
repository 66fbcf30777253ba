"""CameraTracker (Norfair) on synthetic boxes: persistent ids, decimation, occlusion, resets."""

from __future__ import annotations

import numpy as np

from vidpipe.config import TrackingConfig
from vidpipe.track.tracker import CameraTracker
from vidpipe.types import Detections


def dets(*boxes: tuple[float, float, float, float], class_id: int = 0) -> Detections:
    if not boxes:
        return Detections.empty()
    n = len(boxes)
    return Detections(
        np.array(boxes, np.float32), np.full(n, 0.9, np.float32), np.full(n, class_id, np.int32)
    )


def walker(x0: float, seq: int, speed_px: float = 4.0) -> tuple[float, float, float, float]:
    """A 40x100 box walking right at ``speed_px`` per decoded frame."""
    x = x0 + speed_px * seq
    return (x, 100.0, x + 40.0, 200.0)


def tracker(**kw: object) -> CameraTracker:
    return CameraTracker(TrackingConfig(enabled=True, **kw))  # type: ignore[arg-type]


def test_one_walker_keeps_one_id_and_is_confirmed_after_min_hits() -> None:
    t = tracker(min_hits=3)
    ids = [int(t.update(dets(walker(0, s)), s, 0).tracker_id[0]) for s in range(40)]
    assert ids[:2] == [-1, -1]  # not confirmed yet
    assert set(ids[2:]) == {ids[2]} and ids[2] > 0


def test_two_walkers_get_distinct_ids() -> None:
    t = tracker()
    for s in range(20):
        up = t.update(dets(walker(0, s), walker(300, s, -2.0)), s, 0)
    a, b = up.tracker_id.tolist()
    assert a > 0 and b > 0 and a != b
    assert sorted(up.observed.tracker_id.tolist()) == sorted([a, b])


def test_decimated_detection_keeps_the_id() -> None:
    """detect_fps 1/5 of the stream: only every 5th frame is seen, the box moves 20 px."""
    t = tracker()
    ids = {int(t.update(dets(walker(0, s)), s, 0).tracker_id[0]) for s in range(0, 200, 5)}
    ids.discard(-1)
    assert len(ids) == 1


def test_short_occlusion_keeps_the_id_and_long_one_ends_the_track() -> None:
    t = tracker(max_lost_frames=10)
    for s in range(15):
        first = int(t.update(dets(walker(0, s)), s, 0).tracker_id[0])
    for s in range(15, 20):  # hidden for 5 detector frames
        up = t.update(Detections.empty(), s, 0)
        assert not up.ended
    again = {int(t.update(dets(walker(0, s)), s, 0).tracker_id[0]) for s in range(20, 30)}
    assert again == {first}
    ended_at = None
    for s in range(30, 50):  # hidden for good
        up = t.update(Detections.empty(), s, 0)
        if up.ended:
            ended_at = s
            assert up.ended == {first}
            break
    # a track seen steadily survives max_lost_frames unmatched frames, and not many more
    assert ended_at is not None and 10 <= ended_at - 29 <= 12
    t.update(Detections.empty(), 50, 0)  # Norfair prunes dead tracks on the next update
    assert t.live_tracks == 0


def test_epoch_change_resets_and_never_reuses_an_id() -> None:
    t = tracker()
    for s in range(10):
        old = int(t.update(dets(walker(0, s)), s, 0).tracker_id[0])
    up = t.update(dets(walker(0, 10)), 10, 1)  # reconnected: epoch 1
    assert up.reset and up.ended == {old}
    new_ids = [int(t.update(dets(walker(0, s)), s, 1).tracker_id[0]) for s in range(11, 20)]
    assert new_ids[-1] > old
    assert old not in new_ids
    assert t.resets == 1


def test_state_stays_bounded_with_many_short_lived_objects() -> None:
    t = tracker(max_lost_frames=5)
    rng = np.random.default_rng(1)
    for s in range(600):  # a new object at a random place in every frame
        x, y = rng.uniform(0, 2000, size=2)
        t.update(dets((x, y, x + 30, y + 30)), s, 0)
        assert t.live_tracks <= 2 * 5 + 2
    for s in range(600, 620):
        t.update(Detections.empty(), s, 0)
    assert t.live_tracks == 0 and not t._alive


def test_classes_do_not_share_a_track() -> None:
    t = tracker(min_hits=1)
    a = int(t.update(dets(walker(0, 0), class_id=0), 0, 0).tracker_id[0])
    b = int(t.update(dets(walker(0, 1), class_id=2), 1, 0).tracker_id[0])
    assert a > 0 and b > 0 and a != b


def test_a_seq_that_goes_back_is_a_new_stream() -> None:
    t = tracker()
    for s in range(100, 110):
        old = int(t.update(dets(walker(0, s)), s, 5).tracker_id[0])
    up = t.update(dets(walker(0, 0)), 0, 5)  # same epoch number, seq restarted
    assert up.reset and up.ended == {old}


STILL_BOX = (300.0, 100.0, 340.0, 200.0)


def test_standing_still_across_motion_gated_frames_keeps_the_id() -> None:
    """The motion gate infers a still scene once every 20 frames (max_skip_s 2 s at 10 fps):
    the person standing there keeps one id across 30 such gaps (an hour would be the same)."""
    t = tracker(max_lost_frames=15)
    ids = [int(t.update(dets(walker(0, s)), s, 0).tracker_id[0]) for s in range(10)]
    stop = walker(0, 9)
    for k in range(1, 31):
        up = t.update(dets(stop), 9 + 20 * k, 0, still_frames=19)
        ids.append(int(up.tracker_id[0]))
        assert not up.ended
    assert set(ids[2:]) == {ids[2]} and ids[2] > 0


def test_a_track_gone_before_the_still_stretch_ends_as_without_the_gate() -> None:
    """Someone left; the picture then stays still. Without the gate the track would end after
    max_lost_frames + 1 missed frames; with it, at the first inferred frame past that count."""
    t = tracker(max_lost_frames=10)
    for s in range(15):
        first = int(t.update(dets(walker(0, s)), s, 0).tracker_id[0])
    up = t.update(Detections.empty(), 15, 0)  # gone: the frame that showed it gone
    assert not up.ended
    up = t.update(Detections.empty(), 16 + 19, 0, still_frames=19)  # 19 still frames later
    assert up.ended == {first}


def test_a_track_seen_before_the_still_stretch_survives_one_miss_after_it() -> None:
    """Seen in the frame before the still stretch, so present during it: one miss only."""
    t = tracker(max_lost_frames=10)
    for s in range(15):
        first = int(t.update(dets(walker(0, s)), s, 0).tracker_id[0])
    up = t.update(Detections.empty(), 15 + 40, 0, still_frames=39)
    assert not up.ended
    up = t.update(dets(walker(0, 14)), 56, 0)
    assert int(up.tracker_id[0]) == first
