"""The supervisor's HTTP routes besides ``/metrics`` and ``/api/v1``: the status page and
the live view, served by the children and passed through (a ``RouteInstaller``).

* ``/api/cameras``: every child's tiles, in config order, so the page shows every camera;
* ``/api/stats``: every child's cameras; each child's sinks and pipeline under ``shards``;
* ``/api/clips``: every child's list, one entry per camera;
* ``/cameras/{name}/...`` (MJPEG, latest JPEG) and ``/clips/{camera}/...``: the child that
  runs the camera, streamed through;
* anything else the page needs (``/``, ``/static/...``, ``/login``, ``/api/v1/events``, whose
  store the children share): the first ready child.

The client's own Authorization header and cookie are passed on: the supervisor checked them
already, and every child holds the same tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from vidpipe.supervisor.children import Children

_PASSED_HEADERS = ("Authorization", "Cookie", "Content-Type", "If-Match")
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=5, sock_read=30)


class ProxyRoutes:
    """Args: children: the supervised processes; owner: a camera's shard index (None: no
    process runs it); order: the configured camera names, in config order."""

    def __init__(
        self,
        children: Children,
        owner: Callable[[str], int | None],
        order: Callable[[], list[str]],
    ) -> None:
        self.children = children
        self.owner = owner
        self.order = order
        # one pool of loopback connections for every request, not a session (and a new
        # connection) per request: the page polls the children every second
        self._session: aiohttp.ClientSession | None = None

    def install(self, app: web.Application) -> None:
        """Add the routes to ``app`` (a ``RouteInstaller``)."""
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        app.router.add_get("/api/cameras", self.api_cameras)
        app.router.add_get("/api/stats", self.api_stats)
        app.router.add_get("/api/clips", self.api_clips)
        app.router.add_get("/cameras/{name}/{rest:.*}", self.camera)
        app.router.add_get("/clips/{name}/{rest:.*}", self.camera)
        for path in ("/", "/login", "/static/{file}", "/api/v1/events"):
            app.router.add_get(path, self.any_child)
        app.router.add_post("/login", self.any_child)

    async def _open(self, _app: web.Application) -> None:
        self._session = aiohttp.ClientSession(timeout=_TIMEOUT)

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise web.HTTPServiceUnavailable(text="the server is starting")
        return self._session

    # -- merged answers ------------------------------------------------------------------------

    async def _gather(self, request: web.Request) -> dict[int, Any]:
        ports = sorted(self.children.serving().items())  # cameras stream before READY
        answers = await asyncio.gather(
            *(self._json(request, port) for _, port in ports), return_exceptions=True
        )
        return {i: a for (i, _), a in zip(ports, answers, strict=True) if isinstance(a, dict)}

    async def _json(self, request: web.Request, port: int) -> Any:
        async with self._client().get(_url(port, request), headers=_headers(request)) as resp:
            return await resp.json() if resp.status == 200 else None

    async def api_cameras(self, request: web.Request) -> web.Response:
        rank = {name: i for i, name in enumerate(self.order())}
        tiles = [t for a in (await self._gather(request)).values() for t in a.get("cameras", [])]
        tiles.sort(key=lambda t: rank.get(t.get("name"), len(rank)))
        return web.json_response({"cameras": tiles})

    async def api_stats(self, request: web.Request) -> web.Response:
        answers = await self._gather(request)
        cameras: dict[str, Any] = {}
        for a in answers.values():
            cameras.update(a.get("cameras", {}))
        shards = {
            str(i): {"sinks": a.get("sinks", {}), "pipeline": a.get("pipeline", {})}
            for i, a in answers.items()
        }
        return web.json_response({"cameras": cameras, "shards": shards})

    async def api_clips(self, request: web.Request) -> web.Response:
        seen: dict[str, Any] = {}
        for a in (await self._gather(request)).values():
            for entry in a.get("cameras", []):
                seen.setdefault(entry.get("name"), entry)  # the clip folders may be shared
        return web.json_response({"cameras": list(seen.values())})

    # -- passed through ------------------------------------------------------------------------

    async def camera(self, request: web.Request) -> web.StreamResponse:
        index = self.owner(request.match_info["name"])
        port = self.children.serving().get(index) if index is not None else None
        if port is None:
            raise web.HTTPNotFound(text="unknown camera, or its process is restarting")
        return await self._pass(request, port)

    async def any_child(self, request: web.Request) -> web.StreamResponse:
        ports = sorted(self.children.ports().items())
        if not ports:
            return web.json_response({"error": "no process is ready yet"}, status=503)
        return await self._pass(request, ports[0][1])

    async def _pass(self, request: web.Request, port: int) -> web.StreamResponse:
        """Stream the child's answer back as it comes (MJPEG never ends)."""
        body = await request.read() if request.can_read_body else None
        async with self._client().request(
            request.method,
            _url(port, request),
            headers=_headers(request),
            data=body,
            allow_redirects=False,
        ) as upstream:
            resp = web.StreamResponse(status=upstream.status)
            for name in ("Content-Type", "Cache-Control", "Location", "Set-Cookie", "X-Frame-Seq"):
                for value in upstream.headers.getall(name, []):
                    resp.headers.add(name, value)
            await resp.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
            except (ConnectionError, aiohttp.ClientError):
                pass  # the viewer left, or the child stopped: the stream ends
            return resp


def _url(port: int, request: web.Request) -> str:
    return f"http://127.0.0.1:{port}{request.rel_url}"


def _headers(request: web.Request) -> dict[str, str]:
    return {h: request.headers[h] for h in _PASSED_HEADERS if h in request.headers}
