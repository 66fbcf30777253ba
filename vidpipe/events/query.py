"""Reading the event store: the parameters of ``GET /api/v1/events`` and the keyset query;
the parameters and answer of ``/api/v1/search`` (run by ``vectors.run_search``).

Results are newest first, ordered by ``(ts, id)``; a page ends with an opaque cursor, the
``(ts, id)`` of its last row, and the next page starts strictly below it. Unlike an offset,
the cursor stays right while new events arrive at the top, and every page costs one index
range scan however deep it is.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from vidpipe.events.db import connect_reader
from vidpipe.sinks.record import iso_utc

Kind = Literal["enter", "leave", "cross", "clip", "reid"]
KINDS: tuple[str, ...] = get_args(Kind)
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
_TEXT_FILTERS = ("camera", "label", "zone", "line")
PARAMS = (*_TEXT_FILTERS, "kind", "after", "before", "limit", "cursor")
#: SQLite's INTEGER: a row id past it cannot be bound (OverflowError), so no cursor holds one.
_INT64 = (-(2**63), 2**63 - 1)
_TIME = "RFC 3339 (2026-11-30T04:18:25Z; UTC without an offset) or Unix seconds"


class EventParams(BaseModel):
    """The query parameters of ``GET /api/v1/events``, for the OpenAPI document (each field
    one optional parameter). ``parse_query`` reads them; ``tests/component/test_events_openapi``
    holds the two to the same names and bounds."""

    camera: str = Field(description="only this camera's events (exact match)")
    kind: Kind = Field(description="only this kind")
    label: str = Field(description="only this class (exact match)")
    zone: str = Field(description="only events of this zone (enter, leave)")
    line: str = Field(description="only crossings of this line")
    after: AwareDatetime | float = Field(description=f"inclusive: {_TIME}")
    before: AwareDatetime | float = Field(description=f"exclusive: {_TIME}")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="events per page")
    cursor: str = Field(
        pattern=r"^[A-Za-z0-9_-]*$", description="the next_cursor of the previous page"
    )


class EventRow(BaseModel):
    """One event as ``GET /api/v1/events`` answers it (``_event``)."""

    model_config = ConfigDict(extra="forbid")
    id: int = Field(description="the row's id: later rows have larger ids")
    ts: AwareDatetime = Field(description="when it happened, RFC 3339 in UTC, milliseconds")
    camera: str
    kind: Kind
    label: str = Field(description='the class ("" for a clip without one)')
    tracker_id: int | None = Field(description="the track (a clip: its first trigger's)")
    zone: str | None = Field(description="enter, leave: the zone")
    line: str | None = Field(description="cross: the line")
    clip_id: str | None = Field(description="the clip that holds it, once written")
    clip_url: str | None = Field(description="that clip's MP4; null once it is deleted")
    crop_url: str | None = Field(description="the track's best-shot crop; null once deleted")
    clip_deleted: bool = Field(description="the clip retention deleted the clip's files")
    record: dict[str, Any] = Field(description="the event's v1 record (docs/record-format.md)")


class EventPage(BaseModel):
    """One page of ``GET /api/v1/events``, newest first."""

    model_config = ConfigDict(extra="forbid")
    events: list[EventRow]
    next_cursor: str | None = Field(description="the next page's cursor; null on the last")


class QueryError(ValueError):
    """A parameter is malformed or out of range; the message says which and why."""


@dataclass(frozen=True, slots=True)
class EventQuery:
    """One page of events: filters are exact matches; ``after``/``before`` are Unix seconds
    (``after`` inclusive, ``before`` exclusive)."""

    camera: str | None = None
    kind: str | None = None
    label: str | None = None
    zone: str | None = None
    line: str | None = None
    after: float | None = None
    before: float | None = None
    limit: int = DEFAULT_LIMIT
    cursor: tuple[float, int] | None = None


def parse_time(text: str, name: str) -> float:
    """RFC 3339 (``2026-11-30T04:18:25Z``; without an offset: UTC) or Unix seconds."""
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except (ValueError, OverflowError):
            raise QueryError(
                f"{name}: {text!r} is neither an RFC 3339 time (2026-11-30T04:18:25Z) nor Unix "
                "seconds"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    if not math.isfinite(value):
        raise QueryError(f"{name}: {text!r} is not a finite number of seconds")
    return value


def parse_limit(text: str | None, default: int, most: int) -> int:
    """A ``limit`` parameter: ``default`` when absent or empty, else 1 to ``most``."""
    if not text:
        return default
    try:
        limit = int(text)
    except ValueError:
        raise QueryError(f"limit: {text!r} is not an integer") from None
    if not 1 <= limit <= most:
        raise QueryError(f"limit: {limit} is not between 1 and {most}")
    return limit


def encode_cursor(ts: float, row_id: int) -> str:
    raw = json.dumps([ts, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[float, int]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        ts, row_id = json.loads(raw)
        if isinstance(row_id, bool) or not isinstance(row_id, int) or isinstance(ts, bool):
            raise TypeError
        if not isinstance(ts, int | float) or not _INT64[0] <= row_id <= _INT64[1]:
            raise TypeError
        if not math.isfinite(ts := float(ts)):
            raise TypeError
        return ts, row_id
    except (binascii.Error, ValueError, TypeError, OverflowError, RecursionError):
        raise QueryError("cursor: not a cursor this server returned (next_cursor)") from None


def parse_query(params: Mapping[str, str]) -> EventQuery:
    """The query of ``params`` (a request's query string).

    Raises:
        QueryError: an unknown parameter, a kind not in ``KINDS``, a bad time, limit or cursor.
    """
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise QueryError(f"unknown parameter(s) {unknown}; known: {', '.join(PARAMS)}")
    kind = params.get("kind") or None
    if kind is not None and kind not in KINDS:
        raise QueryError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    text = {k: params.get(k) or None for k in _TEXT_FILTERS}
    after = parse_time(params["after"], "after") if params.get("after") else None
    before = parse_time(params["before"], "before") if params.get("before") else None
    if after is not None and before is not None and after >= before:
        raise QueryError("after must be earlier than before")
    limit = parse_limit(params.get("limit"), DEFAULT_LIMIT, MAX_LIMIT)
    cursor = decode_cursor(params["cursor"]) if params.get("cursor") else None
    return EventQuery(kind=kind, after=after, before=before, limit=limit, cursor=cursor, **text)


def run_query(path: Path, q: EventQuery) -> dict[str, Any]:
    """One page: ``{"events": [...], "next_cursor": str | None}`` (None on the last page).

    Raises:
        StoreError: there is no event store at ``path`` (yet).
    """
    where, args = [], []
    for column in (*_TEXT_FILTERS, "kind"):
        value = getattr(q, column)
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if q.after is not None:
        where.append("ts >= ?")
        args.append(q.after)
    if q.before is not None:
        where.append("ts < ?")
        args.append(q.before)
    if q.cursor is not None:
        where.append("(ts < ? OR (ts = ? AND id < ?))")
        args += [q.cursor[0], q.cursor[0], q.cursor[1]]
    sql = (
        "SELECT id, ts, camera, kind, label, tracker_id, zone, line, clip_id, clip_url, "
        "crop_url, clip_deleted, record FROM events"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY ts DESC, id DESC LIMIT ?"
    )
    conn = connect_reader(path)
    try:
        rows = conn.execute(sql, [*args, q.limit + 1]).fetchall()
    finally:
        conn.close()
    more = len(rows) > q.limit
    rows = rows[: q.limit]
    last = rows[-1] if rows else None
    return {
        "events": [_event(r) for r in rows],
        "next_cursor": encode_cursor(last[1], last[0]) if more and last else None,
    }


def _event(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    rid, ts, camera, kind, label, tid, zone, line, clip_id, clip_url, crop_url, deleted, rec = row
    return {
        "id": rid,
        "ts": iso_utc(ts),
        "camera": camera,
        "kind": kind,
        "label": label,
        "tracker_id": tid,
        "zone": zone,
        "line": line,
        "clip_id": clip_id,
        # a deleted clip's files are gone: no link that would 404
        "clip_url": None if deleted else clip_url,
        "crop_url": None if deleted else crop_url,
        "clip_deleted": bool(deleted),
        "record": json.loads(rec),
    }


# ---------------------------------------------------------------------- search by example

SEARCH_PARAMS = ("camera", "track", "limit", "since")
DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 100


class SearchParams(BaseModel):
    """The query parameters of ``GET /api/v1/search`` (``camera`` and ``track`` required);
    ``POST`` takes ``limit`` and ``since`` only. ``parse_search`` reads them."""

    camera: str = Field(min_length=1, description="the example track's camera")
    track: int = Field(ge=0, le=_INT64[1], description="the example track's tracker id")
    limit: int = Field(
        DEFAULT_SEARCH_LIMIT, ge=1, le=MAX_SEARCH_LIMIT, description="tracks to answer"
    )
    since: AwareDatetime | float = Field(
        description=f"only tracks last seen at or after this time: {_TIME}"
    )


class SearchClip(BaseModel):
    """A clip that holds a track."""

    model_config = ConfigDict(extra="forbid")
    clip_id: str
    url: str | None = Field(description="the clip's MP4; null once it is deleted")
    crop_url: str | None = Field(description="the clip's best-shot crop; null once deleted")
    start: str = Field(description="the clip's first packet, RFC 3339 in UTC")
    end: str = Field(description="the clip's last packet, RFC 3339 in UTC")
    clip_deleted: bool = Field(description="the clip retention deleted the clip's files")


class SearchTrack(BaseModel):
    """A stored track: what the embedder said of it when it ended."""

    model_config = ConfigDict(extra="forbid")
    camera: str
    track_id: int = Field(description="the tracker's id on its camera")
    global_id: int = Field(description="its identity across cameras (re-identification)")
    label: str = Field(description="its class")
    first_seen: AwareDatetime = Field(description="its first embedded crop, RFC 3339 in UTC")
    last_seen: AwareDatetime = Field(description="its last embedded crop, RFC 3339 in UTC")
    crops: int = Field(description="crops averaged into its embedding")
    model: str = Field(description="the embedder (a models: name)")
    clips: list[SearchClip] = Field(description="clips that hold the track, oldest first")


class SearchHit(SearchTrack):
    """A track found, with its likeness to the example."""

    similarity: float = Field(ge=-1.0001, le=1.0001, description="cosine similarity")


class SearchAnswer(BaseModel):
    """What ``GET`` and ``POST /api/v1/search`` answer: the nearest tracks, best first."""

    model_config = ConfigDict(extra="forbid")
    query: SearchTrack | None = Field(description="GET: the example track; POST: null")
    tracks: list[SearchHit]


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A search: by a stored track (``camera`` and ``track``) or, both None, by an image."""

    camera: str | None = None
    track: int | None = None
    limit: int = DEFAULT_SEARCH_LIMIT
    since: float | None = None


def parse_search(params: Mapping[str, str], *, by_track: bool) -> SearchQuery:
    """The search of ``params``: ``by_track`` (GET) needs ``camera`` and ``track``; an image
    search (POST) takes neither.

    Raises:
        QueryError: an unknown or missing parameter, a bad track id, limit or time.
    """
    known = SEARCH_PARAMS if by_track else ("limit", "since")
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise QueryError(f"unknown parameter(s) {unknown}; known: {', '.join(known)}")
    camera, track = None, None
    if by_track:
        camera = params.get("camera") or None
        if camera is None or not params.get("track"):
            raise QueryError("camera and track are required: the example track")
        try:
            track = int(params["track"])
        except ValueError:
            raise QueryError(f"track: {params['track']!r} is not an integer") from None
        if not 0 <= track <= _INT64[1]:
            raise QueryError(f"track: {track} is not a tracker id (0 or more)")
    limit = parse_limit(params.get("limit"), DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
    since = parse_time(params["since"], "since") if params.get("since") else None
    return SearchQuery(camera, track, limit, since)
