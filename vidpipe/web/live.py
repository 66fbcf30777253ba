"""The live web view: status page, MJPEG streams, latest JPEGs and JSON figures.

Routes (installed on the daemon's one HTTP server through ``LiveRoutes.install``):

* ``/``: the status page (static files shipped in the package, no CDN);
* ``/static/{file}``: its script and style sheet;
* ``/login``: with ``http.token`` set, a form that trades the token for an HttpOnly cookie;
* ``/cameras/{name}/stream.mjpeg``: annotated MJPEG, frame rate capped per viewer;
* ``/cameras/{name}/latest.jpg``: the latest annotated frame;
* ``/cameras/{name}/snapshot.jpg``: the same, held for ``SNAPSHOT_INTERVAL_S`` (the page's
  tiles: every viewer of a camera shares one JPEG per interval, whatever their number);
* ``/api/cameras``: one status record per camera (what a tile shows);
* ``/api/stats``: every figure of ``/metrics`` as JSON, grouped by camera and sink.

Camera names are looked up in the set of running cameras only, so an unknown name, or one that tries
path tricks, is a 404 before anything else happens; static files come from a fixed table.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from aiohttp import web

from vidpipe.config import LiveViewConfig
from vidpipe.metrics import Metrics
from vidpipe.sinks.live import LiveJpeg, LiveView
from vidpipe.web.server import TOKEN_COOKIE
from vidpipe.web.stats import registry_stats

log = logging.getLogger(__name__)

#: ``camera name -> CaptureWorker.stats()`` of the running cameras.
CaptureStats = Callable[[], Mapping[str, Mapping[str, Any]]]

BOUNDARY = "vidpipeframe"
#: How often an MJPEG viewer checks for a newer frame once its rate cap allows one.
_POLL_S = 0.05

#: How long a snapshot is served before a newer frame is encoded: at most one encode per
#: camera per interval for all the tiles showing it (the page refreshes them every 3 s).
SNAPSHOT_INTERVAL_S = 2.0

_STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def _load_static() -> dict[str, tuple[bytes, str]]:
    """``file name -> (bytes, content type)`` of the page's files, read once from the package."""
    folder = resources.files("vidpipe.web") / "static"
    files = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in _STATIC_TYPES:
            files[entry.name] = (entry.read_bytes(), _STATIC_TYPES[suffix])
    if "index.html" not in files:
        raise RuntimeError("vidpipe.web/static/index.html is missing from the package")
    return files


class LiveRoutes:
    """The live view's HTTP handlers.

    Args:
        live: the live-view sink holding each camera's latest result.
        cameras: returns the running cameras' names, in config order (a reload may change
            them); any other name is a 404.
        capture_stats: returns ``CaptureWorker.stats()`` per camera name.
        metrics: the registry ``/api/stats`` reports and the viewer gauge.
        cfg: frame-rate cap, stall threshold.
        token: the server's bearer token; ``POST /login`` trades it for a cookie (browsers
            cannot send the header with images).
    """

    def __init__(
        self,
        live: LiveView,
        cameras: Callable[[], Sequence[str]],
        capture_stats: CaptureStats,
        metrics: Metrics,
        cfg: LiveViewConfig,
        token: str | None = None,
    ) -> None:
        self.live = live
        self.token = token
        self.cameras = cameras
        self.capture_stats = capture_stats
        self.metrics = metrics
        self.cfg = cfg
        self._static = _load_static()
        self._snapshots: dict[str, tuple[float, LiveJpeg]] = {}  # camera -> (loop time, JPEG)

    def install(self, app: web.Application) -> None:
        """Add the routes to ``app`` (a ``RouteInstaller``)."""
        app.router.add_get("/", self.index)
        app.router.add_get("/login", self.login_page)
        app.router.add_post("/login", self.login)
        app.router.add_get("/static/{file}", self.static)
        app.router.add_get("/cameras/{name}/stream.mjpeg", self.stream)
        app.router.add_get("/cameras/{name}/latest.jpg", self.latest)
        app.router.add_get("/cameras/{name}/snapshot.jpg", self.snapshot)
        app.router.add_get("/api/cameras", self.api_cameras)
        app.router.add_get("/api/stats", self.api_stats)

    # -- pages -------------------------------------------------------------------------------

    async def index(self, _request: web.Request) -> web.Response:
        return self._file("index.html")

    async def static(self, request: web.Request) -> web.Response:
        return self._file(request.match_info["file"])

    async def login_page(self, _request: web.Request) -> web.Response:
        if self.token is None:
            raise web.HTTPSeeOther("/")
        return web.Response(body=self._login_page(error=False), content_type="text/html")

    async def login(self, request: web.Request) -> web.Response:
        """Check the posted token (constant time); on success set the cookie and go to ``/``."""
        if self.token is None:
            raise web.HTTPSeeOther("/")
        form = await request.post()
        given = str(form.get("token", "")).encode("utf-8", "replace")
        if not hmac.compare_digest(given, self.token.encode()):
            page = self._login_page(error=True)
            return web.Response(body=page, status=401, content_type="text/html")
        resp = web.HTTPSeeOther("/")
        resp.set_cookie(
            TOKEN_COOKIE,
            self.token,
            httponly=True,
            samesite="Strict",
            secure=request.secure,
            path="/",
        )
        raise resp

    def _login_page(self, *, error: bool) -> bytes:
        """The login form, its style sheet inlined: only /login is open before signing in."""
        page = self._static["login.html"][0]
        link = b'<link rel="stylesheet" href="/static/app.css">'
        page = page.replace(link, b"<style>" + self._static["app.css"][0] + b"</style>")
        if error:
            page = page.replace(b'<p class="error" hidden>', b'<p class="error">')
        return page

    def _file(self, name: str) -> web.Response:
        found = self._static.get(name)
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(
            body=body, content_type=content_type, headers={"Cache-Control": "no-cache"}
        )

    # -- images ------------------------------------------------------------------------------

    def _camera(self, request: web.Request) -> str:
        name = request.match_info["name"]
        if name not in self.cameras():
            raise web.HTTPNotFound(text="unknown camera")
        return name

    async def latest(self, request: web.Request) -> web.Response:
        """The latest annotated frame; 503 before the camera's first result."""
        name = self._camera(request)
        frame = await asyncio.get_running_loop().run_in_executor(None, self.live.jpeg, name)
        return _jpeg_response(name, frame)

    async def snapshot(self, request: web.Request) -> web.Response:
        """The latest annotated frame as of at most ``SNAPSHOT_INTERVAL_S`` ago; 503 before the
        camera's first result. Encodes only when asked, and only when the held one is older."""
        name = self._camera(request)
        loop = asyncio.get_running_loop()
        now = loop.time()
        held = self._snapshots.get(name)
        if held is None or now - held[0] >= SNAPSHOT_INTERVAL_S:
            frame = await loop.run_in_executor(None, self.live.jpeg, name)
            if frame is not None:
                held = (now, frame)
                self._snapshots[name] = held
                if len(self._snapshots) > len(self.cameras()):  # cameras removed by a reload
                    running = set(self.cameras())
                    for gone in [n for n in self._snapshots if n not in running]:
                        del self._snapshots[gone]
        return _jpeg_response(name, None if held is None else held[1])

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Annotated MJPEG: a newer frame at most every ``1 / max_fps`` s, for this viewer."""
        name = self._camera(request)
        resp = web.StreamResponse(
            headers={
                "Content-Type": f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                "Cache-Control": "no-store",
            }
        )
        await resp.prepare(request)
        viewers = self.metrics.live_viewers.labels(camera=name)
        viewers.inc()
        try:
            await self._send_frames(request, resp, name)
        except ConnectionError:
            pass  # the viewer left (a server stop cancels the task: that propagates)
        finally:
            viewers.dec()
        return resp

    async def _send_frames(self, request: web.Request, resp: web.StreamResponse, name: str) -> None:
        loop = asyncio.get_running_loop()
        interval_s = 1.0 / self.cfg.max_fps
        sent = 0  # version of the last frame sent
        next_due = loop.time()
        while request.transport is not None and not request.transport.is_closing():
            wait_s = next_due - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            if self.live.version(name) == sent:
                await asyncio.sleep(_POLL_S)
                continue
            frame = await loop.run_in_executor(None, self.live.jpeg, name)
            if frame is None or frame.version == sent:
                await asyncio.sleep(_POLL_S)
                continue
            head = (
                f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                f"Content-Length: {len(frame.data)}\r\nX-Frame-Seq: {frame.seq}\r\n\r\n"
            )
            await resp.write(head.encode() + frame.data + b"\r\n")
            sent = frame.version
            next_due = loop.time() + interval_s

    # -- JSON --------------------------------------------------------------------------------

    async def api_cameras(self, _request: web.Request) -> web.Response:
        return web.json_response({"cameras": self.camera_records()})

    async def api_stats(self, _request: web.Request) -> web.Response:
        return web.json_response(registry_stats(self.metrics.registry))

    def camera_records(self) -> list[dict[str, Any]]:
        """What each tile shows, one record per camera, in config order."""
        capture = self.capture_stats()
        figures = registry_stats(self.metrics.registry)["cameras"]
        return [self._record(n, capture.get(n, {}), figures.get(n, {})) for n in self.cameras()]

    def _record(
        self, name: str, capture: Mapping[str, Any], figures: Mapping[str, Any]
    ) -> dict[str, Any]:
        raw_state = str(capture.get("state", "starting"))
        age = capture.get("last_frame_age_s")
        state = raw_state
        if raw_state == "streaming" and age is not None and age > self.cfg.stalled_after_s:
            state = "stalled"  # the watchdog has not fired yet, but nothing new arrives
        drops = figures.get("frames_dropped_total", {})
        live = self.live.stats(name)
        return {
            "name": name,
            "state": state,
            "capture_state": raw_state,
            "streaming": state == "streaming",
            "fps_in": round(float(capture.get("fps_in", 0.0)), 2),
            "fps_out": live["fps_out"],
            "latency_p95_ms": live["latency_p95_ms"],
            "drops": int(sum(drops.values())),
            "drops_by_reason": drops,
            "frames_captured": int(figures.get("frames_captured_total", 0)),
            "frames_inferred": int(figures.get("frames_inferred_total", 0)),
            "motion_ratio": figures.get("motion_ratio"),  # None: no motion gate
            "reconnects": int(figures.get("camera_reconnects_total", 0)),
            "last_error": capture.get("last_error", ""),
            "last_frame_age_s": None if age is None else round(float(age), 3),
            "frame": live["frame"],
            "last_detections": live["last_detections"],
            "last_detection_time": live["last_detection_time"],
            "stream_url": f"/cameras/{name}/stream.mjpeg",
            "latest_url": f"/cameras/{name}/latest.jpg",
            "snapshot_url": f"/cameras/{name}/snapshot.jpg",
            # cameras with a record input: [{role, state, ...}] of the detect and record inputs
            **({"inputs": capture["inputs"]} if "inputs" in capture else {}),
        }


def _jpeg_response(name: str, frame: LiveJpeg | None) -> web.Response:
    """A camera's encoded frame (``LiveView.jpeg``), or 503 before its first result."""
    if frame is None:
        return web.json_response(
            {"error": f"camera {name!r} has no frame yet"},
            status=503,
            headers={"Retry-After": "1"},
        )
    return web.Response(
        body=frame.data,
        content_type="image/jpeg",
        headers={"Cache-Control": "no-store", "X-Frame-Seq": str(frame.seq)},
    )
