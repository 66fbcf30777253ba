"""``/api/v1/search``: the stored tracks most like an example (``vidpipe.events.vectors``).

* ``GET ?camera=C&track=T``: the example is a stored track; the answer leaves it out.
* ``POST`` with a JPEG (``Content-Type: image/jpeg``, a crop of one person or object): the
  example is what ``embed`` says of it. Without an embedder it is a 409 (this daemon runs no
  reid model; a 5xx would say the server failed). The body is read up to ``max_body_bytes``
  (413 above), by this handler: the server's default cap (1 MiB) would refuse an ordinary
  phone photo.

Searches run in worker threads, one at a time per index (``VectorIndex`` holds a lock), so a
slow disk or a large table never stalls the event loop that serves the live view. The
server's token middleware guards the routes like the rest: GET needs the read token; POST,
like every POST to the server, the admin token where one is set. Answers are
``SearchAnswer`` (``vidpipe.events.query``); errors are ``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
from aiohttp import web

from vidpipe.events.db import StoreError
from vidpipe.events.query import QueryError, SearchQuery, parse_search
from vidpipe.events.vectors import VectorIndex, embedding_problem, run_search
from vidpipe.web.server import QUERY_POSTS

log = logging.getLogger(__name__)

Embed = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]
#: The largest JPEG a POST may send.
MAX_BODY_BYTES = 4 * 1024 * 1024
PATH = "/api/v1/search"


class SearchRoutes:
    """Args:
    path: the event store's file.
    embed: BGR image ``(H, W, 3)`` uint8 -> its embedding ``(D,)`` (normalised or not); None:
        no embedder is configured, and ``POST`` answers 409. Called from worker threads.
    model: the embedder's name in ``models:``: a POST compares only that model's vectors
        (None: every stored vector of the embedding's dimension).
    max_body_bytes: the largest JPEG a POST may send.
    pending: the embedder is not known yet (the daemon's models still load; ``set_embedder``
        says it): ``POST`` answers 503 meanwhile.
    """

    def __init__(
        self,
        path: Path,
        embed: Embed | None = None,
        *,
        model: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        pending: bool = False,
    ) -> None:
        self.path = path
        self.embed = embed
        self.model = model
        self.pending = pending
        self.max_body_bytes = max_body_bytes
        self.index = VectorIndex()

    def set_embedder(self, embed: Embed | None, model: str | None) -> None:
        """The embedder of search by picture, once the models are open (None: there is none)."""
        self.embed, self.model, self.pending = embed, model, False

    def install(self, app: web.Application) -> None:
        """Add the routes to ``app`` (a ``RouteInstaller``)."""
        app.router.add_get(PATH, self.by_track)
        app.router.add_post(PATH, self.by_image)
        app[QUERY_POSTS].add(PATH)  # a search by picture changes nothing: the read token will do

    async def by_track(self, request: web.Request) -> web.Response:
        try:
            query = parse_search(request.query, by_track=True)
        except QueryError as exc:
            return _error(400, str(exc))
        return await self._answer(query, None)

    async def by_image(self, request: web.Request) -> web.Response:
        try:
            query = parse_search(request.query, by_track=False)
        except QueryError as exc:
            return _error(400, str(exc))
        if self.pending:
            return _error(503, "the models are still loading: try again in a few seconds")
        if self.embed is None:
            return _error(409, "no re-identification model is configured: search by image is off")
        if request.content_type != "image/jpeg":
            return _error(415, f"Content-Type {request.content_type!r}: send image/jpeg")
        body = await self._body(request)
        if body is None:
            return _error(413, f"the image is larger than {self.max_body_bytes} bytes")
        vector = await asyncio.to_thread(self._embed, body)
        if isinstance(vector, str):
            return _error(400 if vector.startswith("the body") else 503, vector)
        return await self._answer(query, vector)

    async def _body(self, request: web.Request) -> bytes | None:
        """The body, or None when it is longer than ``max_body_bytes``."""
        length = request.content_length
        if length is not None and length > self.max_body_bytes:
            return None
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _embed(self, body: bytes) -> npt.NDArray[np.float32] | str:
        """The JPEG's embedding, or why there is none."""
        data: npt.NDArray[np.uint8] = np.frombuffer(body, dtype=np.uint8)
        image = cv2.imdecode(data, cv2.IMREAD_COLOR)
        if image is None or image.size == 0:
            return "the body is not a JPEG image"
        assert self.embed is not None
        try:
            vector = np.asarray(self.embed(np.asarray(image, np.uint8)), np.float32).reshape(-1)
        except Exception as exc:  # the model failed: say so, the server goes on
            log.exception("search: the embedder failed")
            return f"the re-identification model failed: {exc}"
        why = embedding_problem(vector)
        return vector if why is None else f"the re-identification model gave no vector: {why}"

    async def _answer(self, query: SearchQuery, vector: Any) -> web.Response:
        model = self.model if vector is not None else None
        try:
            answer = await asyncio.to_thread(
                run_search, self.path, self.index, query, vector, model
            )
        except KeyError as exc:
            return _error(404, exc.args[0])
        except (StoreError, sqlite3.Error) as exc:  # no file yet, a newer one, locked, damaged
            return _error(503, f"event store unavailable: {exc}")
        return web.json_response(answer)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
