"""``vidpipe events``: the daemon's event store, queried through ``GET /api/v1/events``.

A thin client (``vidpipe.apiclient``): the daemon does the filtering; this command follows the
pages' cursors until ``--limit`` events are shown, and prints a table or JSON lines.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any
from urllib.parse import urlencode

from vidpipe.apiclient import ApiError, add_client_arguments, client_from
from vidpipe.events.query import KINDS
from vidpipe.events.query import MAX_LIMIT as _PAGE_MAX  # the most the API returns per page
from vidpipe.sinks.record import iso_utc

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def when(text: str) -> str:
    """A time for ``--after``/``--before``: ``30m``, ``2h``, ``7d`` (that long ago), else
    passed on as it is (RFC 3339 or Unix seconds, checked by the daemon)."""
    m = _RELATIVE.fullmatch(text.strip())
    if m is None:
        return text
    return iso_utc(time.time() - float(m[1]) * _UNIT_S[m[2]])


def add_parser(sub: Any) -> None:
    """Add ``events`` to the ``vidpipe`` subcommands."""
    p = sub.add_parser("events", help="list stored zone, line and clip events, newest first")
    add_client_arguments(p)
    p.add_argument("--camera")
    p.add_argument("--kind", choices=KINDS)
    p.add_argument("--label", help="class name, e.g. person")
    p.add_argument("--zone")
    p.add_argument("--line")
    p.add_argument("--after", type=when, help="RFC 3339, Unix seconds, or 30m / 2h / 7d ago")
    p.add_argument("--before", type=when, help="as --after")
    p.add_argument("--limit", type=int, default=50, help="at most this many events (50)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_events)


def fetch(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Up to ``args.limit`` events, following the cursors across pages."""
    client = client_from(args)
    filters = {
        k: getattr(args, k)
        for k in ("camera", "kind", "label", "zone", "line", "after", "before")
        if getattr(args, k) is not None
    }
    events: list[dict[str, Any]] = []
    cursor = None
    while len(events) < args.limit:
        params = {**filters, "limit": min(_PAGE_MAX, args.limit - len(events))}
        if cursor:
            params["cursor"] = cursor
        page = client.request("GET", "/api/v1/events?" + urlencode(params)).body
        events += page["events"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return events


def cmd_events(args: argparse.Namespace) -> int:
    if args.limit < 1:
        print("vidpipe events: --limit must be at least 1", file=sys.stderr)
        return 2
    try:
        events = fetch(args)
    except ApiError as exc:
        print(f"vidpipe events: {exc}", file=sys.stderr)
        return 2 if exc.status == 400 else 1
    for e in events:
        print(json.dumps(e, separators=(",", ":")) if args.json else _line(e))
    return 0


def _line(e: dict[str, Any]) -> str:
    where = e.get("zone") or e.get("line") or ""
    track = "" if e.get("tracker_id") is None else f"#{e['tracker_id']}"
    clip = e.get("clip_url") or ("(clip deleted)" if e.get("clip_deleted") else "")
    cols = [e["ts"], e["camera"], e["kind"], e.get("label") or "-", track, where, clip]
    return "  ".join(c for c in cols if c)
