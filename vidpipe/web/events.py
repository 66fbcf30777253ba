"""``GET /api/v1/events``: the event store, newest first, a page at a time (``vidpipe.events``).

Each request reads on its own read-only connection, in a worker thread: WAL lets readers run
beside the writer, and a slow disk never stalls the event loop that serves the live view. The
server's token middleware guards the route like the rest. Its parameters and answer are in
the control API's OpenAPI document (``vidpipe.api.openapi``, from ``vidpipe.events.query``'s
models); a bad parameter is a 400 and a store that cannot be read a 503, both
``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from aiohttp import web

from vidpipe.events.db import StoreError
from vidpipe.events.query import QueryError, parse_query, run_query


class EventRoutes:
    """Args: path: the event store's file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def install(self, app: web.Application) -> None:
        """Add the route to ``app`` (a ``RouteInstaller``)."""
        app.router.add_get("/api/v1/events", self.events)

    async def events(self, request: web.Request) -> web.Response:
        try:
            query = parse_query(request.query)
        except QueryError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        try:
            page = await asyncio.to_thread(run_query, self.path, query)
        except (StoreError, sqlite3.Error) as exc:  # no file yet, a newer one, locked, damaged
            return web.json_response({"error": f"event store unavailable: {exc}"}, status=503)
        return web.json_response(page)
