"""Clip routes: ``/clips/<camera>/<file>`` (the MP4 with byte ranges, crops, sidecar) and
``/api/clips`` (each camera's recent clips, for the status page).

Only complete clips are served (those whose sidecar exists), and only files whose names are a
clip's (``vidpipe.clips.store.CLIP_FILE``): any other name, an unknown camera or id, and every
path trick are a 404. The server's token middleware guards these routes like the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from vidpipe.clips.store import clip_file, recent

_TYPES = {".mp4": "video/mp4", ".jpg": "image/jpeg", ".json": "application/json"}
#: Clips per camera that ``/api/clips`` lists.
RECENT_CLIPS = 12


class ClipRoutes:
    """Args: camera_dirs: returns each recording camera's clip directory (reloads change it)."""

    def __init__(self, camera_dirs: Callable[[], dict[str, Path]]) -> None:
        self.camera_dirs = camera_dirs

    def install(self, app: web.Application) -> None:
        """Add the routes to ``app`` (a ``RouteInstaller``)."""
        app.router.add_get("/clips/{camera}/{file}", self.clip)
        app.router.add_get("/api/clips", self.api_clips)

    async def clip(self, request: web.Request) -> web.StreamResponse:
        camera_dir = self.camera_dirs().get(request.match_info["camera"])
        if camera_dir is None:
            raise web.HTTPNotFound(text="unknown camera")
        name = request.match_info["file"]
        path = await asyncio.to_thread(clip_file, camera_dir, name)
        if path is None:
            raise web.HTTPNotFound(text="unknown clip")
        # FileResponse answers Range requests (206), which <video> needs to seek
        return web.FileResponse(path, headers={"Content-Type": _TYPES[path.suffix]})

    async def api_clips(self, _request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(self.listing))

    def listing(self) -> dict[str, Any]:
        """``{"cameras": [{"name", "clips": [...]}]}``: each camera's sidecars, newest first.

        A sidecar is the clip's v1 record (``url``, ``crop_url`` included) plus its files'
        details; one written before sidecars held the record gets its URLs here.
        """
        cameras = []
        for name, camera_dir in self.camera_dirs().items():
            clips = []
            for side in recent(camera_dir, RECENT_CLIPS):
                base = f"/clips/{name}/"
                crops = side.get("crops") or []
                urls = {
                    "url": base + str(side.get("file")),
                    "crop_url": base + crops[0]["file"] if crops else None,
                }
                clips.append({**urls, **side})
            cameras.append({"name": name, "clips": clips})
        return {"cameras": cameras}
