"""Config of the sinks (the ``sinks:`` section): one class per ``type``, each declared in
``SINKS``; ``SinkConfig`` is their discriminated union.

A new sink type is a class here with ``@SINKS.config("name")`` and a factory in its stage
with ``@register_sink("name")`` (see ``vidpipe.sinks``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from vidpipe.config.base import SECRET, ConfigModel
from vidpipe.config.registry import SINKS


class SinkConfigBase(ConfigModel):
    """What every sink config has: its ``type``, the key of its registration."""

    type: str

    @property
    def class_filter(self) -> list[str] | None:
        """The class names this sink keeps (None: every class), checked against the labels."""
        return None


@SINKS.config("jsonl")
class JsonlSinkConfig(SinkConfigBase):
    """One JSON line per processed frame."""

    type: Literal["jsonl"] = "jsonl"
    path: Path = Field(description="output file (appended)")
    only_with_detections: bool = Field(False, description="skip frames with no detections")
    queue_size: int = Field(1024, ge=1, description="bounded queue; oldest dropped when full")
    batch_window_ms: int = Field(
        100,
        ge=0,
        le=10_000,
        description="write what gathered in this window at once (0: every line at once)",
    )


@SINKS.config("snapshot")
class SnapshotSinkConfig(SinkConfigBase):
    """Annotated JPEGs of frames with detections."""

    type: Literal["snapshot"] = "snapshot"
    dir: Path = Field(description="output directory")
    min_interval_s: float = Field(5.0, ge=0, description="per-camera rate limit")
    jpeg_quality: int = Field(85, ge=1, le=100)
    keep_last: int = Field(100, ge=1, description="files kept per camera")
    queue_size: int = Field(8, ge=1, description="bounded queue; oldest dropped when full")
    crop: bool = Field(
        False, description="also write each event clip's best-shot crop (cameras with clips)"
    )


class MqttTlsConfig(ConfigModel):
    """TLS towards the MQTT broker."""

    ca_file: Path | None = Field(None, description="CA bundle; default: the system's")
    cert_file: Path | None = Field(None, description="client certificate (mutual TLS)")
    key_file: Path | None = Field(None, description="client key (mutual TLS)")
    insecure: bool = Field(False, description="skip the host name check (testing only)")


@SINKS.config("mqtt")
class MqttSinkConfig(SinkConfigBase):
    """Detections and camera states published to an MQTT broker."""

    type: Literal["mqtt"] = "mqtt"
    host: str = Field(description="broker host name or address")
    port: int = Field(1883, ge=1, le=65535, description="broker port (8883 is usual for TLS)")
    topic_prefix: str = Field(
        "vidpipe", min_length=1, description="topics are <prefix>/<camera>/detections etc."
    )
    qos: Literal[0, 1, 2] = Field(1, description="MQTT quality of service of every message")
    client_id: str | None = Field(None, description="default: vidpipe-<host name>-<pid>")
    username: str | None = Field(None, description="broker user name")
    password: str | None = Field(
        None,
        description="broker password; use ${file:NAME} or ${VAR} so it stays out of the file",
        json_schema_extra=SECRET,
    )
    tls: MqttTlsConfig | None = Field(None, description="connect with TLS when set")
    keepalive_s: int = Field(30, ge=5, description="MQTT keepalive interval")
    reconnect_min_s: float = Field(0.5, gt=0, description="first reconnect delay")
    reconnect_max_s: float = Field(30.0, gt=0, description="reconnect delay cap")
    buffer_size: int = Field(
        1000, ge=1, description="messages kept while disconnected; oldest dropped (counted)"
    )
    only_with_detections: bool = Field(True, description="publish only frames with detections")
    queue_size: int = Field(256, ge=1, description="bounded queue; oldest dropped when full")


@SINKS.config("webhook")
class WebhookSinkConfig(SinkConfigBase):
    """Detection events POSTed as JSON to a URL."""

    type: Literal["webhook"] = "webhook"
    url: str = Field(description="http:// or https:// endpoint")
    timeout_s: float = Field(5.0, gt=0, description="per-request timeout")
    retries: int = Field(3, ge=0, le=10, description="extra attempts after a failed POST")
    backoff_initial_s: float = Field(0.5, gt=0, description="delay before the first retry")
    backoff_max_s: float = Field(10.0, gt=0, description="retry delay cap")
    classes: list[str] | None = Field(None, description="only these class names (default: all)")
    min_score: float = Field(0.0, ge=0, le=1, description="only detections scoring at least this")
    cooldown_s: float = Field(
        0.0, ge=0, description="per camera: no new event for this long after one was sent"
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="extra request headers (values are kept secret)",
        json_schema_extra=SECRET,
    )
    queue_size: int = Field(64, ge=1, description="bounded queue; oldest dropped when full")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.lower().startswith(("http://", "https://")):
            raise ValueError("webhook url must start with http:// or https://")
        return v

    @property
    def class_filter(self) -> list[str] | None:
        return self.classes


if TYPE_CHECKING:  # type checkers see the common base; pydantic gets the real union
    SinkConfig = SinkConfigBase
else:
    SinkConfig = SINKS.union()
