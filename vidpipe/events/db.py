"""The event store's SQLite file: opening it, its schema and the migrations between versions.

Facts this module is built around:

* WAL mode: the writer never blocks readers (each HTTP request reads on its own connection)
  and a commit is one append to the ``-wal`` file, so a process killed mid-write leaves the
  database as of its last commit. ``synchronous=FULL`` adds an fsync per commit, so a
  committed event also survives a power cut; the writer commits batches, so that is one
  fsync per batch, not per event.
* The schema's version is SQLite's own ``PRAGMA user_version``. ``MIGRATIONS[i]`` takes the
  file from version ``i`` to ``i + 1``; each step and its new version commit together, so a
  crash during a migration leaves the old version, which is migrated again at the next start.
  Add a step at the end; never edit one that has shipped.
* ``tracks`` holds each track's summary and embedding (``vectors``), written in the same
  transactions as the events, so a vector is exactly as durable as an event row.
* Times are stored as Unix seconds (``REAL``) and shown as the v1 record's RFC 3339 text.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

#: How long a connection waits for another's lock (a second process on the same file, such as
#: two shards sharing one) before an operation fails.
BUSY_TIMEOUT_MS = 5000

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: one row per zone enter/leave, line crossing and clip
    (
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            ts REAL NOT NULL,
            camera TEXT NOT NULL,
            kind TEXT NOT NULL,
            label TEXT NOT NULL,
            tracker_id INTEGER,
            zone TEXT,
            line TEXT,
            clip_id TEXT,
            clip_url TEXT,
            crop_url TEXT,
            crop_file TEXT,
            clip_deleted INTEGER NOT NULL DEFAULT 0,
            record TEXT NOT NULL
        )""",
        "CREATE INDEX events_newest ON events (ts, id)",
        "CREATE INDEX events_camera ON events (camera, kind, ts, id)",
        "CREATE INDEX events_clip ON events (camera, clip_id)",
    ),
    # 2: one row per track summary, its embedding a float32 BLOB (vidpipe.events.vectors);
    # AUTOINCREMENT: an id is never reused, so a reader's cache can follow new rows by id
    (
        """CREATE TABLE tracks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            camera TEXT NOT NULL,
            track_id INTEGER NOT NULL,
            global_id INTEGER NOT NULL,
            class_id INTEGER NOT NULL,
            label TEXT NOT NULL,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL,
            crops INTEGER NOT NULL,
            model TEXT NOT NULL,
            embedding BLOB NOT NULL
        )""",
        "CREATE INDEX tracks_track ON tracks (camera, track_id, last_seen)",
        "CREATE INDEX tracks_ts ON tracks (ts)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(Exception):
    """The event store's file cannot be used (newer schema, not a database, no access)."""


def connect_writer(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the store for writing, in WAL mode, migrated to the newest
    schema.

    Raises:
        StoreError: the file is not an SQLite database, or comes from a newer vidpipe.
        OSError: the directory cannot be created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # autocommit mode: transactions are explicit (BEGIN ... COMMIT), never implicit
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"{path}: cannot switch to WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        migrate(conn, str(path))
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def connect_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection (one per query: WAL lets readers run beside the writer).

    Raises:
        StoreError: the file does not exist or is not a current event store.
    """
    if not path.is_file():
        raise StoreError(f"{path}: no event store")
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path}: schema version {version}, this vidpipe reads {SCHEMA_VERSION}")
    return conn


def migrate(conn: sqlite3.Connection, where: str = "event store") -> int:
    """Apply the migrations the file lacks, each in its own transaction; the new version."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: schema version {version} is newer than this vidpipe's {SCHEMA_VERSION} "
            "(written by a newer release): upgrade, or point events.path elsewhere"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have migrated while this one waited for the lock
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= target:
                conn.execute("ROLLBACK")
                continue
            for statement in MIGRATIONS[target - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
