"""One aiohttp server in its own thread: ``/metrics``, ``/healthz``, ``/readyz``, and more.

It binds to 127.0.0.1 unless told otherwise. With a token configured, every route except the
two probes and ``/login`` needs ``Authorization: Bearer <token>``, or the ``vidpipe_token``
cookie that the live view's ``/login`` sets for browsers; every comparison runs in constant
time (``hmac.compare_digest``). The probes stay open so that container and cluster health
checks work without the secret; they reveal only "ok" or the reason for not being ok.

Two tokens: ``http.token`` reads, ``http.admin_token`` reads and writes. A write (any method
but GET, HEAD and OPTIONS) needs the admin token in the Authorization header: never the
cookie, so that a page on another site cannot make a logged-in browser change cameras. With
no token at all, writes are allowed on a loopback bind only (the default development setup);
otherwise, without an admin token, they are refused with a message saying to set one. A POST
that only reads (a route in ``QUERY_POSTS``: search by picture) is a read.

Features add their routes through ``RouteInstaller`` callables, so this module knows nothing
about them.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from vidpipe.health import Health

log = logging.getLogger(__name__)

RouteInstaller = Callable[[web.Application], None]


class Exposed(Protocol):
    """What ``/metrics`` serves: a pipeline's ``Metrics``, or a supervisor's merged ones."""

    @property
    def registry(self) -> CollectorRegistry: ...


OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login"})
#: Browsers cannot send an Authorization header with <img> and page loads: /login sets this
#: cookie (HttpOnly, SameSite=Strict) holding the token, accepted in place of the header.
TOKEN_COOKIE = "vidpipe_token"


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
QUERY_POSTS: web.AppKey[set[str]] = web.AppKey("query_posts", set)
"""Paths whose POST only reads (a query with a body, such as a search by picture): a route
installer adds its path here, and the read token suffices for it."""


def _matches(given: str | None, secret: str | None) -> bool:
    if given is None or secret is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode())


def _unauthorized() -> web.Response:
    return web.json_response(
        {"error": "missing or wrong bearer token"},
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="vidpipe"'},
    )


def _auth_middleware(token: str | None, admin_token: str | None, loopback: bool) -> Middleware:
    """Reads: ``token`` or ``admin_token`` (header or cookie); writes: ``admin_token`` in
    the header only."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        header = request.headers.get("Authorization")
        bearer = header.removeprefix("Bearer ") if header and header.startswith("Bearer ") else None
        admin = _matches(bearer, admin_token)
        reader = admin or _matches(bearer, token)
        if not reader and token is not None:  # the cookie a browser got from /login
            reader = _matches(request.cookies.get(TOKEN_COOKIE), token)
        query = request.method == "POST" and request.path in request.app[QUERY_POSTS]
        if request.method in SAFE_METHODS or query:
            if reader or (token is None and admin_token is None):
                return await handler(request)
            if request.path == "/":
                raise web.HTTPSeeOther("/login")  # a browser: ask for the token
            return _unauthorized()
        if admin or (token is None and admin_token is None and loopback):
            return await handler(request)
        if not reader and (token is not None or admin_token is not None):
            return _unauthorized()
        why = "this token may only read" if reader and admin_token else "writes are refused"
        return web.json_response(
            {"error": f"{why}: changes need http.admin_token, sent as 'Authorization: Bearer'"},
            status=403,
        )

    return check


def build_app(
    metrics: Exposed,
    health: Health,
    token: str | None = None,
    installers: Sequence[RouteInstaller] = (),
    *,
    admin_token: str | None = None,
    loopback: bool = True,
) -> web.Application:
    """The aiohttp application with the core routes and every installer's routes.

    ``loopback``: the server binds to a loopback address only (writes without any token)."""
    app = web.Application(middlewares=[_auth_middleware(token, admin_token, loopback)])
    app[QUERY_POSTS] = set()

    async def metrics_handler(_request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        status = health.check()
        return web.json_response(
            {"ok": status.ok, "reason": status.reason}, status=200 if status.ok else 503
        )

    async def readyz(_request: web.Request) -> web.Response:
        ready = health.ready
        return web.json_response({"ready": ready}, status=200 if ready else 503)

    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    for install in installers:
        install(app)
    return app


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


class WebServer:
    """Runs an aiohttp application on its own event loop thread."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the bound port. Raises OSError if the port is taken."""
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            self._loop.run_until_complete(site.start())
        except BaseException:
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()
            raise
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vidpipe-http", daemon=True
        )
        self._thread.start()
        return self.port

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the server's loop thread (thread-safe)."""
        self._loop.call_soon_threadsafe(fn)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close connections and stop the loop thread (idempotent)."""
        if self._thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        try:
            fut.result(timeout_s)
        except Exception as exc:  # pragma: no cover - shutdown best effort, logged
            log.warning("HTTP server did not close cleanly: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("HTTP server thread still alive after %.1f s", timeout_s)
        else:
            self._loop.close()
        self._thread = None
