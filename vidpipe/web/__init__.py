"""The daemon's HTTP server (aiohttp): metrics, health probes, and routes added by features."""

from vidpipe.web.server import RouteInstaller, WebServer, build_app

__all__ = ["RouteInstaller", "WebServer", "build_app"]
