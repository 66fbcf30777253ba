"""The HTTP server's settings: the port and its tokens, and the live view it serves."""

from __future__ import annotations

from pydantic import Field

from vidpipe.config.base import SECRET, ConfigModel


class LiveViewConfig(ConfigModel):
    """The live web view on the HTTP server: status page, MJPEG and snapshot endpoints."""

    enabled: bool = Field(True, description="serve /, /cameras/... and /api/...")
    max_fps: float = Field(5.0, gt=0, le=60, description="MJPEG frame-rate cap per viewer")
    jpeg_quality: int = Field(75, ge=1, le=100, description="JPEG quality of the live frames")
    stalled_after_s: float = Field(
        2.0, gt=0, description="a streaming camera with no new frame for this long shows stalled"
    )


class HttpConfig(ConfigModel):
    """The daemon's one HTTP server: /metrics, /healthz, /readyz (and the live view)."""

    enabled: bool = True
    host: str = Field("127.0.0.1", description="bind address; loopback unless you mean it")
    port: int = Field(9108, ge=0, le=65535, description="0 picks a free port")
    token: str | None = Field(
        None,
        min_length=16,
        description="bearer token required on every endpoint but /healthz and /readyz; "
        "use ${file:NAME} or ${VAR} so it stays out of the file",
        json_schema_extra=SECRET,
    )
    admin_token: str | None = Field(
        None,
        min_length=16,
        description="bearer token that may also change cameras through /api/v1 (http.token "
        "may only read); without it, writes are allowed only with no token at all on a "
        "loopback host. Use ${file:NAME} or ${VAR}",
        json_schema_extra=SECRET,
    )
    live: LiveViewConfig = Field(
        default_factory=LiveViewConfig, description="live view (status page, MJPEG)"
    )
