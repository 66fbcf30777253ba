"""The event store with its real writer thread, a real SQLite file and real clip files."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.integration.conftest import wait_for
from vidpipe.events import EventStore, StoreError
from vidpipe.events.db import SCHEMA_VERSION, connect_writer
from vidpipe.events.query import EventQuery, decode_cursor, run_query
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.types import ClipEvent, Detections, FrameResult, TrackEvent

pytestmark = pytest.mark.timeout(60)

LABELS = Labels(["person", "car"])
T0 = time.time() - 600.0  # events ten minutes ago: inside the default retention


def result(*events: TrackEvent | ClipEvent, camera: str = "walkway") -> FrameResult:
    det = Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32))
    return FrameResult(camera, 1, 0.0, 0.0, T0, 64, 48, det, LABELS, events=events)


def track_event(kind: str, t: float, track: int, camera: str = "walkway", label: str = "person"):
    where = "exit" if kind == "cross" else "table"
    direction = "in" if kind == "cross" else None
    return TrackEvent(kind, camera, int(t), t, where, track, 0, label, (1.0, 2.0), direction)


def clip_event(camera_dir: Path, cid: str, start: float, end: float, tracks: tuple[int, ...]):
    """A clip written for real: its MP4 (any bytes), one crop per track and its sidecar."""
    camera_dir.mkdir(parents=True, exist_ok=True)
    (camera_dir / f"{cid}.mp4").write_bytes(b"\0" * 100)
    for t in tracks:
        (camera_dir / f"{cid}.t{t}.jpg").write_bytes(b"\xff\xd8")
    (camera_dir / f"{cid}.json").write_text("{}")
    base = f"/clips/walkway/{cid}"
    return ClipEvent(
        "walkway", 9, end + 1, cid, start, end, f"{base}.mp4", "person", ("person",), tracks, 100,
        f"{base}.t{tracks[0]}.jpg", str(camera_dir / f"{cid}.t{tracks[0]}.jpg"),
    )  # fmt: skip


def count(metric, **labels: str) -> float:
    return metric.labels(**labels)._value.get() if labels else metric._value.get()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[EventStore, Metrics, Path]]:
    metrics = Metrics()
    clips = tmp_path / "clips" / "walkway"
    s = EventStore(
        tmp_path / "state" / "events.db",
        metrics,
        max_age_days=1,
        queue_size=100,
        clip_dirs=lambda: {"walkway": clips},
        housekeeping_s=0.1,
    )
    try:
        yield s, metrics, clips
    finally:
        s.close()


def stored(metrics: Metrics) -> float:
    return sum(count(metrics.events_stored, kind=k) for k in ("enter", "leave", "cross", "clip"))


def test_every_event_is_a_row_newest_first_and_pages_follow_the_cursor(store) -> None:
    s, metrics, _ = store
    for i in range(25):
        s.handle(result(track_event(("enter", "leave", "cross")[i % 3], T0 + i, i)))
    s.handle(result(track_event("enter", T0 + 30, 99, camera="street", label="car")))
    wait_for(lambda: stored(metrics) == 26, 10, "26 events stored")
    assert count(metrics.events_stored, kind="enter") == 10

    page = run_query(s.path, EventQuery(limit=10))
    assert [e["tracker_id"] for e in page["events"]] == [99, *range(24, 15, -1)]
    seen = [e["tracker_id"] for e in page["events"]]
    while page["next_cursor"]:
        page = run_query(s.path, EventQuery(limit=10, cursor=decode_cursor(page["next_cursor"])))
        seen += [e["tracker_id"] for e in page["events"]]
    assert seen == [99, *range(24, -1, -1)]  # every row once, in order

    enters = run_query(s.path, EventQuery(camera="walkway", kind="enter"))["events"]
    assert [e["tracker_id"] for e in enters] == list(range(24, -1, -3))
    first = enters[-1]
    assert (first["zone"], first["line"], first["label"]) == ("table", None, "person")
    assert first["record"]["event"] == "enter" and first["record"]["v"] == 1
    crosses = run_query(s.path, EventQuery(kind="cross", after=T0 + 20, before=T0 + 24))
    assert [e["tracker_id"] for e in crosses["events"]] == [23, 20]
    assert crosses["events"][0]["line"] == "exit"
    assert run_query(s.path, EventQuery(label="car"))["events"][0]["camera"] == "street"


def test_a_clip_links_its_tracks_events_and_retention_marks_it_deleted(store) -> None:
    s, metrics, clips = store
    s.handle(result(track_event("enter", T0, 1), track_event("enter", T0 + 1, 2)))
    s.handle(result(track_event("enter", T0 + 500, 1)))  # a later visit of track 1: not this clip
    s.handle(result(clip_event(clips, "20260101-000000-000", T0 - 5, T0 + 6, (1, 2))))
    wait_for(lambda: stored(metrics) == 4, 10, "4 events stored")
    rows = run_query(s.path, EventQuery())["events"]
    assert [e["kind"] for e in rows] == ["enter", "clip", "enter", "enter"]
    linked = [e for e in rows if e["kind"] == "enter" and e["clip_id"]]
    assert sorted(e["tracker_id"] for e in linked) == [1, 2]
    for e in linked:  # each event shows its own track's crop
        assert e["crop_url"] == f"/clips/walkway/20260101-000000-000.t{e['tracker_id']}.jpg"
        assert e["clip_url"] == "/clips/walkway/20260101-000000-000.mp4"
    assert rows[0]["clip_id"] is None

    for p in clips.iterdir():  # what the clip retention does (vidpipe.clips.store.delete_clip)
        p.unlink()

    def deleted() -> bool:
        rows = run_query(s.path, EventQuery(kind="enter"))["events"]
        return all(e["clip_deleted"] for e in rows if e["clip_id"])

    wait_for(deleted, 10, "rows of the deleted clip marked")
    for e in run_query(s.path, EventQuery())["events"]:
        if e["clip_id"]:
            assert e["clip_url"] is None and e["crop_url"] is None  # no link that would 404


def test_rows_older_than_max_age_are_deleted_and_counted(store) -> None:
    s, metrics, _ = store
    s.handle(result(track_event("enter", time.time() - 2 * 86400, 1)))
    s.handle(result(track_event("enter", time.time(), 2)))
    wait_for(lambda: count(metrics.events_deleted) == 1, 10, "the old row deleted")
    assert [e["tracker_id"] for e in run_query(s.path, EventQuery())["events"]] == [2]


def test_a_locked_file_fails_writes_fills_the_queue_and_nothing_is_lost_unaccounted(
    store,
) -> None:
    s, metrics, _ = store
    other = sqlite3.connect(s.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock: every transaction of the writer fails
    try:
        s.handle(result(track_event("enter", T0, 0)))  # the writer takes it and retries it
        wait_for(lambda: count(metrics.events_write_failures) >= 1, 20, "a failed write")
        for i in range(1, 151):
            s.handle(result(track_event("enter", T0 + i, i)))
        # the queue holds 100 while the writer retries: the other 50 are dropped and counted
        dropped = count(metrics.events_dropped, reason="queue_full")
        assert dropped == 50
        assert stored(metrics) == 0
    finally:
        other.execute("ROLLBACK")
        other.close()
    sent = 151
    wait_for(lambda: stored(metrics) + dropped == sent, 30, "the writer recovered")
    assert len(run_query(s.path, EventQuery(limit=1000))["events"]) == stored(metrics)


def test_close_commits_what_is_queued(tmp_path: Path) -> None:
    metrics = Metrics()
    s = EventStore(tmp_path / "e.db", metrics, max_age_days=1, queue_size=1000)
    s.handle(result(*(track_event("leave", T0 + i, i) for i in range(300))))
    s.close()
    s.close()  # idempotent
    assert count(metrics.events_stored, kind="leave") == 300
    assert len(run_query(tmp_path / "e.db", EventQuery(limit=1000))["events"]) == 300


def test_schema_version_is_sqlite_user_version_and_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    connect_writer(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connect_writer(path).close()  # migrating an up-to-date file changes nothing
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this vidpipe"):
        connect_writer(path)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match=r"junk\.db"):
        connect_writer(tmp_path / "junk.db")
