"""The control API's HTTP handlers under ``/api/v1`` (a ``RouteInstaller``).

Authentication is the server's (``vidpipe.web.server``): reads need a token, writes the admin
token. Every handler runs its operation in an executor: a change waits for the daemon's
reload lock and may start cameras, which must not stall the event loop that also serves
``/metrics`` and the live view.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler

from vidpipe.api.control import CameraControl, ControlError
from vidpipe.api.openapi import openapi_document

PREFIX = "/api/v1"
T = TypeVar("T")


class ApiRoutes:
    """``/api/v1``: cameras, config and the OpenAPI document."""

    def __init__(self, control: CameraControl) -> None:
        self.control = control
        self._openapi = json.dumps(openapi_document()).encode()

    def install(self, app: web.Application) -> None:
        """Add the routes to ``app`` (a ``RouteInstaller``)."""
        cam = f"{PREFIX}/cameras/{{name}}"
        routes = [
            ("GET", f"{PREFIX}/openapi.json", self.openapi),
            ("GET", f"{PREFIX}/config", self.config),
            ("GET", f"{PREFIX}/cameras", self.list_cameras),
            ("GET", cam, self.get_camera),
            ("PUT", cam, self.put_camera),
            ("PATCH", cam, self.patch_camera),
            ("DELETE", cam, self.delete_camera),
            ("POST", f"{cam}/pause", self.pause),
            ("POST", f"{cam}/resume", self.resume),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, _answers_errors(handler))

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def openapi(self, _request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    async def config(self, _request: web.Request) -> web.Response:
        return web.json_response(await self._run(self.control.config))

    async def list_cameras(self, _request: web.Request) -> web.Response:
        return web.json_response({"cameras": await self._run(self.control.cameras)})

    async def get_camera(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return _camera(await self._run(lambda: self.control.camera(name)))

    async def put_camera(self, request: web.Request) -> web.Response:
        name, body, if_match = request.match_info["name"], await _json(request), _if_match(request)
        view, created = await self._run(lambda: self.control.put(name, body, if_match))
        return _camera(view, 201 if created else 200)

    async def patch_camera(self, request: web.Request) -> web.Response:
        name, patch, if_match = request.match_info["name"], await _json(request), _if_match(request)
        return _camera(await self._run(lambda: self.control.patch(name, patch, if_match)))

    async def delete_camera(self, request: web.Request) -> web.Response:
        name, if_match = request.match_info["name"], _if_match(request)
        await self._run(lambda: self.control.delete(name, if_match))
        return web.Response(status=204)

    async def pause(self, request: web.Request) -> web.Response:
        return await self._set_paused(request, True)

    async def resume(self, request: web.Request) -> web.Response:
        return await self._set_paused(request, False)

    async def _set_paused(self, request: web.Request, paused: bool) -> web.Response:
        name, if_match = request.match_info["name"], _if_match(request)
        return _camera(await self._run(lambda: self.control.set_paused(name, paused, if_match)))


def _error(exc: ControlError) -> web.Response:
    return web.json_response(exc.body(), status=exc.status)


def _answers_errors(handler: Handler) -> Handler:
    """A refused request answers its status and ``{"error": ..., "problems": [...]}``."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except ControlError as exc:
            return _error(exc)

    return wrapped


def _camera(view: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(view, status=status, headers={"ETag": view["etag"]})


def _if_match(request: web.Request) -> str | None:
    return request.headers.get("If-Match")


async def _json(request: web.Request) -> Any:
    """The request's JSON body; a body that is not JSON is a 422 like any invalid one."""
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ControlError(422, f"<body>: not JSON: {exc}") from None
