"""Track embeddings in the event store, with the real writer thread, a real SQLite file and
real embeddings: the person re-identification model on crops of the walkway clip.

The clip shows six visits, one person at a time, standing in one window of the frame. Each
visit gives two tracks: camera ``walkway`` embeds the first half of the visit, camera
``mirror`` the second half mirrored (the usual stand-in for the same person seen by another
camera). No assertion holds the model's output at one precision: only which track is nearest.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.component.test_event_store import T0, clip_event, count, result
from tests.integration.conftest import wait_for
from tests.precision import forced_precision
from vidpipe.events import EventStore
from vidpipe.events.db import MIGRATIONS, SCHEMA_VERSION, connect_writer
from vidpipe.events.query import SearchAnswer, SearchQuery
from vidpipe.events.vectors import VectorIndex, run_search
from vidpipe.metrics import Metrics
from vidpipe.types import TrackSummary

pytestmark = pytest.mark.timeout(120)

#: Frames of each visit (10 fps) in which the person stands in ``WINDOW`` (x1, y1, x2, y2).
VISITS = ((90, 180), (250, 430), (530, 680), (770, 850), (950, 1170), (1260, 1340))
WINDOW = (375, 0, 555, 410)
MIRROR_ID = 100  # the mirror camera's track ids: MIRROR_ID + the walkway's
Embed = Callable[[np.ndarray], np.ndarray]


def reid_embed(assets_dir: Path) -> Embed:
    """BGR crop -> normalised 256-d embedding, by the reid model compiled with OpenVINO."""
    import openvino as ov

    path = assets_dir / "models" / "person-reidentification-retail-0288.onnx"
    config = {}
    if (precision := forced_precision()) is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    model = ov.Core().compile_model(str(path), "CPU", config)

    def embed(image: np.ndarray) -> np.ndarray:
        x = cv2.resize(image, (128, 256)).astype(np.float32)[None]  # NHWC, BGR, 0-255
        v = np.asarray(model(x)[0], np.float32).reshape(-1)
        return v / np.linalg.norm(v)

    return embed


@functools.cache
def visit_crops(video: Path) -> tuple[tuple[list[np.ndarray], list[np.ndarray]], ...]:
    """Each visit's crops: the first half's, and the second half's mirrored (every 5th frame)."""
    cap = cv2.VideoCapture(str(video))
    wanted = {i for a, b in VISITS for i in range(a, b, 5)}
    frames: dict[int, np.ndarray] = {}
    for i in range(max(wanted) + 1):
        ok, frame = cap.read()
        assert ok, f"{video}: frame {i}"
        if i in wanted:
            x1, y1, x2, y2 = WINDOW
            frames[i] = frame[y1:y2, x1:x2].copy()
    cap.release()
    out = []
    for a, b in VISITS:
        mid = (a + b) // 2
        first = [frames[i] for i in range(a, mid, 5)]
        second = [frames[i][:, ::-1].copy() for i in range(mid, b, 5) if i in frames]
        out.append((first, second))
    return tuple(out)


def summary(camera: str, track: int, crops: list[np.ndarray], embed: Embed, t: float):
    mean = np.mean([embed(c) for c in crops], axis=0)
    vec = (mean / np.linalg.norm(mean)).astype(np.float32)
    return TrackSummary(camera, 1, t + 10, track, track, 0, "person", t, t + 10, len(crops), vec,
                        "reid")  # fmt: skip


def visit_tracks(assets_dir: Path, embed: Embed) -> list[TrackSummary]:
    """Two tracks per visit: ``walkway`` 1..6 and ``mirror`` 101..106, a minute apart each."""
    tracks = []
    video = assets_dir / "videos" / "one-by-one-person-detection.mp4"
    for n, (first, second) in enumerate(visit_crops(video), start=1):
        t = T0 + 60 * n
        tracks.append(summary("walkway", n, first, embed, t))
        tracks.append(summary("mirror", MIRROR_ID + n, second, embed, t + 20))
    return tracks


def stored_tracks(metrics: Metrics) -> float:
    return count(metrics.events_stored, kind="track")


@pytest.fixture(scope="module")
def embed(assets_dir: Path) -> Embed:
    return reid_embed(assets_dir)


def test_a_stored_track_finds_the_same_person_on_the_other_camera_first(
    tmp_path: Path, assets_dir: Path, embed: Embed
) -> None:
    metrics = Metrics()
    store = EventStore(tmp_path / "events.db", metrics, max_age_days=1, queue_size=100)
    tracks = visit_tracks(assets_dir, embed)
    clip = clip_event(tmp_path / "clips", "c1", T0 + 55, T0 + 75, (1, 7))  # visit 1's span
    other = clip_event(tmp_path / "clips", "c2", T0 + 115, T0 + 135, (2,))
    for s in tracks:
        store.handle(result(s, camera=s.camera))
    store.handle(result(clip))
    store.handle(result(other))
    wait_for(lambda: stored_tracks(metrics) == len(tracks), 10, "every track stored")
    store.close()

    index = VectorIndex()
    for n in range(1, len(VISITS) + 1):
        answer = run_search(store.path, index, SearchQuery("walkway", n, limit=3))
        SearchAnswer.model_validate(answer)
        found = [(t["camera"], t["track_id"]) for t in answer["tracks"]]
        assert found[0] == ("mirror", MIRROR_ID + n), answer
        assert ("walkway", n) not in found  # the example itself is left out
        sims = [t["similarity"] for t in answer["tracks"]]
        assert sims == sorted(sims, reverse=True) and sims[0] > sims[1]
        assert answer["query"]["track_id"] == n
    back = run_search(store.path, index, SearchQuery("mirror", MIRROR_ID + 1, limit=1))
    assert back["query"]["clips"] == []  # no clip of the mirror camera
    hit = back["tracks"][0]
    assert (hit["camera"], hit["track_id"]) == ("walkway", 1)
    assert [c["clip_id"] for c in hit["clips"]] == ["c1"]  # c2 holds track 2, not 1
    assert hit["clips"][0]["url"] == "/clips/walkway/c1.mp4"
    with pytest.raises(KeyError, match="no stored track 99 on camera 'walkway'"):
        run_search(store.path, index, SearchQuery("walkway", 99))


def test_since_leaves_out_tracks_last_seen_before_it(tmp_path: Path) -> None:
    metrics = Metrics()
    store = EventStore(tmp_path / "events.db", metrics, max_age_days=1, queue_size=100)
    vecs = np.eye(4, dtype=np.float32) + 0.1
    for i in range(4):
        store.handle(result(TrackSummary("a", 1, T0 + i, i, i, 0, "person", T0 + i, T0 + i, 1,
                                         vecs[i], "m")))  # fmt: skip
    wait_for(lambda: stored_tracks(metrics) == 4, 10, "4 tracks stored")
    store.close()
    q = SearchQuery("a", 0, limit=10, since=T0 + 2)
    answer = run_search(store.path, VectorIndex(), q)
    assert sorted(t["track_id"] for t in answer["tracks"]) == [2, 3]


def test_retention_deletes_old_vectors_from_the_file_and_from_a_loaded_index(
    tmp_path: Path,
) -> None:
    metrics = Metrics()
    path = tmp_path / "events.db"
    store = EventStore(path, metrics, max_age_days=30, queue_size=100)  # keeps them all
    rng = np.random.default_rng(0)
    old = time.time() - 2 * 86400  # older than max_age_days
    for i in range(10):
        t = old if i < 6 else T0
        vec = rng.standard_normal(8).astype(np.float32)
        store.handle(result(TrackSummary("a", 1, t, i, i, 0, "person", t, t, 1, vec, "m")))
    wait_for(lambda: stored_tracks(metrics) == 10, 10, "10 tracks stored")
    store.close()
    index = VectorIndex()
    assert len(run_search(path, index, SearchQuery("a", 9, limit=100))["tracks"]) == 9
    assert len(index) == 10

    store = EventStore(path, Metrics(), max_age_days=1, queue_size=100)  # retention at start
    conn = sqlite3.connect(path)
    wait_for(lambda: conn.execute("SELECT count(*) FROM tracks").fetchone()[0] == 4, 10, "4 left")
    conn.close()
    store.close()
    answer = run_search(path, index, SearchQuery("a", 9, limit=100))
    assert sorted(t["track_id"] for t in answer["tracks"]) == [6, 7, 8]
    assert len(index) == 4


def test_a_bad_embedding_is_refused_and_counted_and_its_batch_is_stored(tmp_path: Path) -> None:
    metrics = Metrics()
    store = EventStore(tmp_path / "events.db", metrics, max_age_days=1, queue_size=100)
    good = TrackSummary("a", 1, T0, 1, 1, 0, "person", T0, T0, 1, np.ones(4, np.float32), "m")
    zero = TrackSummary("a", 1, T0, 2, 2, 0, "person", T0, T0, 1, np.zeros(4, np.float32), "m")
    nan = TrackSummary("a", 1, T0, 3, 3, 0, "person", T0, T0, 1, np.full(4, np.nan), "m")
    store.handle(result(zero, good, nan))
    wait_for(lambda: stored_tracks(metrics) == 1, 10, "the good track stored")
    store.close()
    assert count(metrics.events_dropped, reason="rejected") == 2


def test_version_1_files_gain_the_tracks_table_and_keep_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("INSERT INTO events (ts, camera, kind, label, record) VALUES (1, 'a', 'enter', "
                 "'person', '{}')")  # fmt: skip
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    conn = connect_writer(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM tracks").fetchone()[0] == 0
    conn.close()


_WRITER = """
import sys, time
import numpy as np
from tests.component.test_event_store import result
from vidpipe.events import EventStore
from vidpipe.metrics import Metrics
from vidpipe.types import TrackSummary
metrics = Metrics()
store = EventStore(__import__("pathlib").Path(sys.argv[1]), metrics, max_age_days=1,
                   queue_size=10000)
stored = metrics.events_stored.labels(kind="track")
t = time.time()
for i in range(1000000):
    vec = np.random.default_rng(i).standard_normal(64).astype(np.float32)
    store.handle(result(TrackSummary("a", 1, t, i, i, 0, "person", t, t, 1, vec, "m")))
    if i % 50 == 0:
        print(int(stored._value.get()), flush=True)  # acknowledged: committed
        time.sleep(0.002)
"""


def test_a_killed_store_keeps_every_acknowledged_vector(tmp_path: Path, repo_root: Path) -> None:
    path = tmp_path / "events.db"
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE,
                             env=env, cwd=repo_root, text=True)  # fmt: skip
    acked = 0
    try:
        assert child.stdout is not None
        for line in child.stdout:
            acked = int(line)
            if acked >= 2000:
                break
    finally:
        child.send_signal(signal.SIGKILL)  # mid-stream: batches queued and in flight
        child.wait(10)
    assert acked >= 2000
    conn = connect_writer(path)  # opens cleanly, as of the last commit
    rows = conn.execute("SELECT track_id, embedding FROM tracks ORDER BY id").fetchall()
    conn.close()
    assert len(rows) >= acked
    assert [r[0] for r in rows] == list(range(len(rows)))  # none lost before the last commit
    for track_id, blob in rows[:: max(1, len(rows) // 50)]:
        sent = np.random.default_rng(track_id).standard_normal(64).astype(np.float32)
        np.testing.assert_allclose(np.frombuffer(blob, "<f4"), sent / np.linalg.norm(sent),
                                   rtol=1e-6, atol=1e-7)  # fmt: skip
