"""Events as rows of the store: what the writer inserts, and how a clip links its events.

A zone or line event is stored when it happens; the clip it triggered is written seconds
later. When the clip's row arrives, the events of its tracks within its time span get the
clip's id and URL, and each track's own best-shot crop when one was written, so that every
event row can lead to its clip. A re-identification (``reid``) is a row of the newer track,
without a label (a match has no class of its own); its record names both tracks.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from vidpipe.sinks.record import event_record
from vidpipe.types import ClipEvent, ReidEvent, TrackEvent

_INSERT = (
    "INSERT INTO events (ts, camera, kind, label, tracker_id, zone, line, clip_id, clip_url, "
    "crop_url, crop_file, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Slack around a clip's span when linking events: its start and end come from packet times,
#: which may differ from the result wall times of its triggers by a frame or two.
_LINK_SLACK_S = 2.0


def insert(conn: sqlite3.Connection, event: TrackEvent | ClipEvent | ReidEvent) -> None:
    """Insert one event's row (inside the caller's transaction); a clip also links its events."""
    record = json.dumps(event_record(event), separators=(",", ":"))
    conn.execute(_INSERT, (event.wall_time, event.camera, *_columns(event), record))
    if isinstance(event, ClipEvent):
        _link(conn, event)


def _columns(event: TrackEvent | ClipEvent | ReidEvent) -> tuple[Any, ...]:
    """The row's kind, label, track, zone, line, clip id, clip URL, crop URL and crop file."""
    if isinstance(event, ReidEvent):
        return ("reid", "", event.track_id, None, None, None, None, None, None)
    if isinstance(event, ClipEvent):
        tid = event.tracker_ids[0] if event.tracker_ids else None
        return (
            "clip",
            event.label,
            tid,
            None,
            None,
            event.clip_id,
            event.url,
            event.crop_url,
            event.crop_file,
        )
    zone, line = (None, event.where) if event.kind == "cross" else (event.where, None)
    return (event.kind, event.label, event.tracker_id, zone, line, None, None, None, None)


def _link(conn: sqlite3.Connection, clip: ClipEvent) -> None:
    crop_dir = Path(clip.crop_file).parent if clip.crop_file else None
    url_base = clip.url.rsplit("/", 1)[0] + "/"
    for tid in clip.tracker_ids:
        crop_file = crop_url = None
        if crop_dir is not None:
            name = f"{clip.clip_id}.t{tid}.jpg"
            if (crop_dir / name).is_file():
                crop_file, crop_url = str(crop_dir / name), url_base + name
        conn.execute(
            "UPDATE events SET clip_id = ?, clip_url = ?, crop_url = ?, crop_file = ? "
            "WHERE camera = ? AND kind != 'clip' AND clip_id IS NULL AND tracker_id = ? "
            "AND ts BETWEEN ? AND ?",
            (
                clip.clip_id,
                clip.url,
                crop_url,
                crop_file,
                clip.camera,
                tid,
                clip.start - _LINK_SLACK_S,
                clip.end + _LINK_SLACK_S,
            ),
        )
