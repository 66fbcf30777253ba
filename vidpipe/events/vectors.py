"""Track embeddings in the event store, and the exact nearest-neighbour search over them.

Facts this module is built around (figures: ``benchmarks/README.md``, "Track search"):

* Each ``TrackSummary`` is a row of ``tracks`` with its embedding as a little-endian float32
  BLOB, inserted by the event store's writer in the same transaction as the events of its
  batch: a vector is acknowledged (``vidpipe_events_stored_total{kind="track"}``) only once
  committed, and the age retention deletes it with the events.
* Search is exact: the cosine similarity of the query with every stored vector, one matrix
  product. On 2 cores that is a few milliseconds at 100k tracks and tens at 1M, so an
  approximate index (HNSW) would buy nothing a user notices, while it would need a second
  file kept in step with this one, and could miss the very track asked for.
* ``VectorIndex`` keeps a copy of the vectors in memory (4 bytes x D per track) and follows
  the table before each search: new rows by id (``AUTOINCREMENT`` never reuses one), deleted
  rows by their count. Only the first search after a start reads the whole table.
* Vectors of different embedders are never compared: each model has its own block.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.events.db import connect_reader
from vidpipe.events.query import SearchQuery
from vidpipe.sinks.record import iso_utc
from vidpipe.types import TrackSummary

Vector = npt.NDArray[np.float32]
#: The longest embedding stored (re-identification models give 128 to 2048).
MAX_DIM = 4096
#: Rows read per ``fetchmany`` while loading the table into memory.
_LOAD_CHUNK = 10_000
#: Slack around a track's span when finding its clips: a clip's packet times may differ from
#: the track's result wall times by a frame or two (as ``rows._LINK_SLACK_S``).
_CLIP_SLACK_S = 2.0
#: A clip is written at most this long after its first packet (``clips.max_s`` is at most an
#: hour), which bounds the index range scanned for a track's clips.
_CLIP_WRITE_S = 3600.0 + 60.0

_INSERT = (
    "INSERT INTO tracks (ts, camera, track_id, global_id, class_id, label, first_seen, "
    "last_seen, crops, model, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def embedding_problem(embedding: Any) -> str | None:
    """Why ``embedding`` cannot be stored (not a finite non-zero vector of 1 to ``MAX_DIM``
    numbers), or None."""
    vec = np.asarray(embedding)
    if vec.ndim != 1 or not 1 <= vec.shape[0] <= MAX_DIM:
        return f"embedding of shape {vec.shape}: want (D,), 1 <= D <= {MAX_DIM}"
    if not np.issubdtype(vec.dtype, np.number):
        return f"embedding of dtype {vec.dtype}: want float32"
    norm = float(np.linalg.norm(vec.astype(np.float64)))
    if not math.isfinite(norm) or norm == 0.0:
        return "embedding is zero or not finite"
    return None


def normalised(embedding: Any) -> Vector:
    """``embedding`` as a float32 vector of length 1 (it must pass ``embedding_problem``)."""
    vec = np.asarray(embedding, dtype=np.float64)
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def insert_track(conn: sqlite3.Connection, s: TrackSummary) -> None:
    """Insert one track's row (inside the caller's transaction); the embedding is stored
    normalised, so that a dot product is the cosine similarity."""
    blob = normalised(s.embedding).astype("<f4").tobytes()
    conn.execute(
        _INSERT,
        (
            s.wall_time, s.camera, s.track_id, s.global_id, s.class_id, s.label,
            s.first_seen, s.last_seen, s.crops, s.model, blob,
        ),
    )  # fmt: skip


def delete_old_tracks(conn: sqlite3.Connection, cutoff: float, chunk: int) -> int:
    """Delete up to ``chunk`` tracks that ended (``ts``) before ``cutoff``, in one
    transaction; how many went."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        return conn.execute(
            "DELETE FROM tracks WHERE id IN (SELECT id FROM tracks WHERE ts < ? LIMIT ?)",
            (cutoff, chunk),
        ).rowcount


# ---------------------------------------------------------------------- the in-memory index


@dataclass
class _Block:
    """The vectors of one model and dimension: rows ``[:n]`` of growing arrays."""

    dim: int
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    last_seen: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    vecs: Vector = field(init=False)
    n: int = 0

    def __post_init__(self) -> None:
        self.vecs = np.zeros((0, self.dim), np.float32)

    def append(self, ids: list[int], last_seen: list[float], blobs: list[bytes]) -> None:
        new = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), self.dim)
        end = self.n + len(ids)
        if end > len(self.ids):  # grow by doubling: appends cost O(1) per row on average
            cap = max(end, 2 * len(self.ids), 1024)
            self.ids = np.resize(self.ids, cap)
            self.last_seen = np.resize(self.last_seen, cap)
            vecs = np.zeros((cap, self.dim), np.float32)
            vecs[: self.n] = self.vecs[: self.n]
            self.vecs = vecs
        self.ids[self.n : end] = ids
        self.last_seen[self.n : end] = last_seen
        self.vecs[self.n : end] = new
        self.n = end

    def keep(self, live: npt.NDArray[np.int64]) -> None:
        """Drop the rows whose ids are not in ``live`` (sorted)."""
        mask = np.isin(self.ids[: self.n], live, assume_unique=True)
        if mask.all():
            return
        self.ids = self.ids[: self.n][mask]
        self.last_seen = self.last_seen[: self.n][mask]
        self.vecs = self.vecs[: self.n][mask]
        self.n = len(self.ids)

    def scores(self, query: Vector, since: float | None, exclude: int | None) -> tuple[Any, Any]:
        """``(ids, similarities)`` of the rows seen since ``since``, ``exclude`` left out."""
        sims = self.vecs[: self.n] @ query
        ids = self.ids[: self.n]
        mask = np.ones(self.n, bool)
        if since is not None:
            mask &= self.last_seen[: self.n] >= since
        if exclude is not None:
            mask &= ids != exclude
        return ids[mask], sims[mask]


class VectorIndex:
    """An in-memory copy of one store's track vectors, for exact search (module docstring).

    Thread-safe: ``search`` holds a lock while it follows the table and scans.
    """

    def __init__(self) -> None:
        self._blocks: dict[tuple[str, int], _Block] = {}
        self._max_id = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(b.n for b in self._blocks.values())

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Follow the table: read rows added since the last call, drop rows deleted."""
        (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM tracks").fetchone()
        if top < self._max_id:  # another file at the same path: start again
            self._blocks.clear()
            self._max_id = 0
        cur = conn.execute(
            "SELECT id, model, last_seen, embedding FROM tracks WHERE id > ? ORDER BY id",
            (self._max_id,),
        )
        while rows := cur.fetchmany(_LOAD_CHUNK):
            self._add(rows)
        (count,) = conn.execute("SELECT count(*) FROM tracks").fetchone()
        if count != len(self):  # the retention deleted rows
            ids = conn.execute("SELECT id FROM tracks ORDER BY id")
            live = np.fromiter((i for (i,) in ids), np.int64, count)
            for block in self._blocks.values():
                block.keep(live)

    def _add(self, rows: list[tuple[int, str, float, bytes]]) -> None:
        grouped: dict[tuple[str, int], tuple[list[int], list[float], list[bytes]]] = {}
        for row_id, model, last_seen, blob in rows:
            ids, seen, blobs = grouped.setdefault((model, len(blob) // 4), ([], [], []))
            ids.append(row_id)
            seen.append(last_seen)
            blobs.append(blob)
        for key, (ids, seen, blobs) in grouped.items():
            self._blocks.setdefault(key, _Block(key[1])).append(ids, seen, blobs)
        self._max_id = max(self._max_id, rows[-1][0])

    def search(
        self,
        conn: sqlite3.Connection,
        query: Vector,
        *,
        model: str | None,
        limit: int,
        since: float | None = None,
        exclude: int | None = None,
    ) -> list[tuple[int, float]]:
        """The ``limit`` nearest tracks to ``query`` as ``(row id, cosine similarity)``, best
        first: only ``model``'s vectors (None: every model whose vectors have the query's
        dimension), only tracks last seen at or after ``since``, never row ``exclude``."""
        query = normalised(query)
        with self._lock:
            self.refresh(conn)
            parts = [
                block.scores(query, since, exclude)
                for (name, dim), block in self._blocks.items()
                if dim == query.shape[0] and model in (None, name) and block.n
            ]
        if not parts:
            return []
        ids = np.concatenate([p[0] for p in parts])
        sims = np.concatenate([p[1] for p in parts])
        if len(ids) > limit:
            top = np.argpartition(-sims, limit - 1)[:limit]
            ids, sims = ids[top], sims[top]
        order = np.lexsort((ids, -sims))  # best first; equal similarity: the older track
        return [(int(ids[i]), float(sims[i])) for i in order]


# ---------------------------------------------------------------------- rows of an answer


@dataclass(frozen=True, slots=True)
class TrackRow:
    """One stored track, as a search names it."""

    id: int
    camera: str
    track_id: int
    global_id: int
    label: str
    first_seen: float
    last_seen: float
    crops: int
    model: str

    def answer(self, similarity: float | None, clips: list[dict[str, Any]]) -> dict[str, Any]:
        """The track as ``SearchHit`` (JSON)."""
        out = {
            "camera": self.camera,
            "track_id": self.track_id,
            "global_id": self.global_id,
            "label": self.label,
            "first_seen": iso_utc(self.first_seen),
            "last_seen": iso_utc(self.last_seen),
            "crops": self.crops,
            "model": self.model,
        }
        if similarity is not None:
            out["similarity"] = round(similarity, 6)
        return {**out, "clips": clips}


_TRACK_COLUMNS = "id, camera, track_id, global_id, label, first_seen, last_seen, crops, model"


def find_track(conn: sqlite3.Connection, camera: str, track_id: int) -> tuple[TrackRow, Vector]:
    """The newest stored track ``track_id`` of ``camera`` (a restarted tracker may reuse an
    id) and its vector.

    Raises:
        KeyError: no such track is stored.
    """
    row = conn.execute(
        f"SELECT {_TRACK_COLUMNS}, embedding FROM tracks WHERE camera = ? AND track_id = ? "
        "ORDER BY last_seen DESC, id DESC LIMIT 1",
        (camera, track_id),
    ).fetchone()
    if row is None:
        raise KeyError(f"no stored track {track_id} on camera {camera!r}")
    return TrackRow(*row[:-1]), np.frombuffer(row[-1], dtype="<f4").astype(np.float32)


def tracks_by_id(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, TrackRow]:
    """The tracks of ``ids`` that are still stored."""
    ids = list(ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {_TRACK_COLUMNS} FROM tracks WHERE id IN ({marks})", ids)
    return {r[0]: TrackRow(*r) for r in rows}


def clips_of(conn: sqlite3.Connection, track: TrackRow) -> list[dict[str, Any]]:
    """The clips of ``track``: clip rows of its camera whose ``tracker_ids`` hold it and
    whose span meets the track's (as ``rows._link`` links events), oldest first.

    Clip times are the record's RFC 3339 text, which compares in time order (one format).
    """
    low = track.first_seen - _CLIP_SLACK_S
    high = track.last_seen + _CLIP_SLACK_S
    rows = conn.execute(
        "SELECT clip_id, clip_url, crop_url, clip_deleted, json_extract(record, '$.start'), "
        "json_extract(record, '$.end') FROM events "
        "WHERE camera = ? AND kind = 'clip' AND ts BETWEEN ? AND ? "
        "AND json_extract(record, '$.start') <= ? AND json_extract(record, '$.end') >= ? "
        "AND EXISTS (SELECT 1 FROM json_each(record, '$.tracker_ids') WHERE value = ?) "
        "ORDER BY ts, id",
        (track.camera, low, high + _CLIP_WRITE_S, iso_utc(high), iso_utc(low), track.track_id),
    ).fetchall()
    return [
        {
            "clip_id": clip_id,
            "url": None if deleted else url,  # the files are gone: no link that would 404
            "crop_url": None if deleted else crop,
            "start": start,
            "end": end,
            "clip_deleted": bool(deleted),
        }
        for clip_id, url, crop, deleted, start, end in rows
    ]


def run_search(
    path: Path,
    index: VectorIndex,
    q: SearchQuery,
    vector: Vector | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A ``SearchAnswer``: the tracks nearest to stored track ``q.camera``/``q.track`` (of
    its model, itself left out), or to ``vector`` (of ``model``; None: any of its dimension).

    Raises:
        KeyError: the example track is not stored.
        StoreError: there is no event store at ``path`` (yet).
    """
    conn = connect_reader(path)
    try:
        example, exclude = None, None
        if vector is None:
            assert q.camera is not None and q.track is not None  # parse_search's promise
            row, vector = find_track(conn, q.camera, q.track)
            example, model, exclude = row.answer(None, clips_of(conn, row)), row.model, row.id
        hits = index.search(
            conn, vector, model=model, limit=q.limit, since=q.since, exclude=exclude
        )
        rows = tracks_by_id(conn, (i for i, _ in hits))
        found = [rows[i].answer(sim, clips_of(conn, rows[i])) for i, sim in hits if i in rows]
    finally:
        conn.close()
    return {"query": example, "tracks": found}
