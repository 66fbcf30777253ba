"""Configuration: pydantic models; ``load_config(path)`` (in ``config_load``) re-exported.

Every model forbids unknown keys. Errors name the YAML path and line. ``${VAR}`` is replaced
from the environment and ``${file:NAME}`` from ``$CREDENTIALS_DIRECTORY`` (systemd
``LoadCredential=``); both are read once, here, never per frame.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vidpipe import redact
from vidpipe.infer.gpu import GpuConfig
from vidpipe.track.config import LineConfig, TrackingConfig, ZoneConfig, check_scene


class ConfigError(Exception):
    """An invalid configuration. ``problems`` lists every error found, each with its path."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = [redact.redact_text(p) for p in problems]
        self.source = source
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def __str__(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class _Model(BaseModel):
    # inf/nan are never a sensible rate, timeout or threshold ("timeout_s: .inf" would hang)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


PositiveFloat = Annotated[float, Field(gt=0)]


class ModelConfig(_Model):
    """The detection model."""

    path: Path = Field(description="ONNX or OpenVINO IR file of the detector")
    labels: Path | None = Field(None, description="class names, one per line, in class-id order")
    type: Literal["yolox", "yolov8", "ssd"] = Field(
        "yolox", description="output decoder: yolox, yolov8 (Ultralytics export) or ssd"
    )
    score_threshold: float = Field(0.3, ge=0, le=1, description="default minimum score")
    iou_threshold: float = Field(0.45, gt=0, le=1, description="NMS IoU threshold")


class OpenVINOConfig(_Model):
    """OpenVINO inference backend (asynchronous request pool)."""

    type: Literal["openvino"] = "openvino"
    device: str = Field("CPU", description="OpenVINO device name: CPU, GPU, NPU, AUTO:...")
    hint: Literal["throughput", "latency"] = Field("throughput", description="performance hint")
    precision: Literal["auto", "f32", "bf16", "f16"] = Field(
        "auto", description="inference precision; auto = the device's best (logged, exported)"
    )
    num_requests: int | None = Field(
        None,
        ge=1,
        le=64,
        description="request pool size; default 2 x OPTIMAL_NUMBER_OF_INFER_REQUESTS with the "
        "throughput hint (twice the device's concurrency), 1 x with the latency hint",
    )
    num_streams: int | None = Field(None, ge=1, description="override NUM_STREAMS")
    preprocess_in_graph: bool = Field(
        True, description="u8 NHWC input; layout and u8->f32 conversion done by OpenVINO"
    )


InferenceConfig = Annotated[OpenVINOConfig | GpuConfig, Field(discriminator="type")]


class SchedulerConfig(_Model):
    """The shared preprocessing + submission stage."""

    max_frame_age_ms: float = Field(
        1000, gt=0, description="frames older than this when a slot frees up are dropped"
    )


class MotionConfig(_Model):
    """The motion gate of a camera: frames in which nothing moved are not inferred."""

    enabled: bool = Field(False, description="skip inference on frames with no motion")
    threshold: int = Field(
        25,
        ge=1,
        le=255,
        description="grey-level change (0-255) for a pixel to count as moving, compared with "
        "the last inferred frame on a blurred 160-pixel-wide copy",
    )
    min_area: float = Field(
        0.002, gt=0, le=1, description="fraction of the picture that must move to infer a frame"
    )
    max_skip_s: float = Field(
        2.0,
        gt=0,
        le=3600,
        description="infer at least this often even without motion, so objects standing still "
        "stay known (media time for files)",
    )


class CaptureConfig(_Model):
    """Defaults for every camera's capture worker."""

    open_timeout_ms: int = Field(5000, gt=0, description="OpenCV open timeout")
    read_timeout_ms: int = Field(5000, gt=0, description="OpenCV read timeout")
    stall_timeout_s: float = Field(10.0, gt=0, description="no new frame for this long = stall")
    backoff_initial_s: float = Field(0.5, gt=0, description="first reconnect delay")
    backoff_max_s: float = Field(30.0, gt=0, description="reconnect delay cap")
    decoder_threads: int = Field(1, ge=0, description="FFmpeg decoder threads per camera")
    analyze_duration_ms: int = Field(
        500,
        ge=0,
        description="how long FFmpeg probes a stream on open (its default 5 s made RTSP opens "
        "take 2.8 s each, and OpenCV opens one camera at a time); 0 keeps FFmpeg's default",
    )
    motion: MotionConfig = Field(
        default_factory=MotionConfig, description="motion gate of cameras that set none"
    )


class CameraConfig(_Model):
    """One camera."""

    name: str = Field(
        min_length=1, max_length=64, description="unique name; used in metrics and file names"
    )
    url: str = Field(min_length=1, description="rtsp://, rtsps://, or a video file path")
    loop: bool = Field(False, description="for files: start again at the end")
    realtime: bool = Field(
        False,
        description="for files: play at the clip's own frame rate, like a live camera (newest "
        "frame kept, drops counted) instead of as fast as inference takes frames",
    )
    detect_fps: float | None = Field(
        None, gt=0, description="run detection at most this often; decoding continues"
    )
    classes: list[str | int] | None = Field(
        None, description="only report these classes (names or ids)"
    )
    score_threshold: float | None = Field(None, ge=0, le=1, description="override model's")
    enabled: bool = Field(True, description="false keeps the camera in the file but off")
    motion: MotionConfig | None = Field(
        None, description="motion gate (replaces capture.motion as a whole); default: that"
    )
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig, description="object tracking (track ids in results)"
    )
    zones: list[ZoneConfig] = Field(
        default_factory=list, description="polygon zones: enter/leave events, object gauge"
    )
    lines: list[LineConfig] = Field(
        default_factory=list, description="directed lines: cross events and counters"
    )

    @field_validator("name")
    @classmethod
    def _name_chars(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", v):
            raise ValueError(
                "camera name may use only letters, digits, '_', '-', '.' and must start with a "
                "letter or digit"
            )
        return v

    @field_validator("url")
    @classmethod
    def _url_kind(cls, v: str) -> str:
        if "://" in v and not v.lower().startswith(("rtsp://", "rtsps://", "file://")):
            scheme = v.split("://", 1)[0]
            raise ValueError(f"unsupported URL scheme {scheme!r}: use rtsp://, rtsps:// or a file")
        return v

    @model_validator(mode="after")
    def _realtime_for_files(self) -> CameraConfig:
        if self.realtime and self.is_stream:
            raise ValueError("realtime applies to files only (a live stream is real time)")
        check_scene(self.tracking, self.zones, self.lines)
        return self

    @property
    def tracks(self) -> bool:
        """Whether this camera tracks objects (tracking.enabled, or any zone or line)."""
        return self.tracking.enabled or bool(self.zones or self.lines)

    @property
    def is_stream(self) -> bool:
        return self.url.lower().startswith(("rtsp://", "rtsps://"))


class JsonlSinkConfig(_Model):
    """One JSON line per processed frame."""

    type: Literal["jsonl"] = "jsonl"
    path: Path = Field(description="output file (appended)")
    only_with_detections: bool = Field(False, description="skip frames with no detections")
    queue_size: int = Field(1024, ge=1, description="bounded queue; oldest dropped when full")


class SnapshotSinkConfig(_Model):
    """Annotated JPEGs of frames with detections."""

    type: Literal["snapshot"] = "snapshot"
    dir: Path = Field(description="output directory")
    min_interval_s: float = Field(5.0, ge=0, description="per-camera rate limit")
    jpeg_quality: int = Field(85, ge=1, le=100)
    keep_last: int = Field(100, ge=1, description="files kept per camera")
    queue_size: int = Field(8, ge=1, description="bounded queue; oldest dropped when full")


class MqttTlsConfig(_Model):
    """TLS towards the MQTT broker."""

    ca_file: Path | None = Field(None, description="CA bundle; default: the system's")
    cert_file: Path | None = Field(None, description="client certificate (mutual TLS)")
    key_file: Path | None = Field(None, description="client key (mutual TLS)")
    insecure: bool = Field(False, description="skip the host name check (testing only)")


class MqttSinkConfig(_Model):
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
        None, description="broker password; use ${file:NAME} or ${VAR} so it stays out of the file"
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

    @field_validator("password")
    @classmethod
    def _register_password(cls, v: str | None) -> str | None:
        if v is not None:
            redact.register_secret(v)
        return v


class WebhookSinkConfig(_Model):
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
        default_factory=dict, description="extra request headers (values are kept secret)"
    )
    queue_size: int = Field(64, ge=1, description="bounded queue; oldest dropped when full")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.lower().startswith(("http://", "https://")):
            raise ValueError("webhook url must start with http:// or https://")
        return v

    @field_validator("headers")
    @classmethod
    def _register_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for value in v.values():
            redact.register_secret(value)
        return v


SinkConfig = Annotated[
    JsonlSinkConfig | SnapshotSinkConfig | MqttSinkConfig | WebhookSinkConfig,
    Field(discriminator="type"),
]


class LiveViewConfig(_Model):
    """The live web view on the HTTP server: status page, MJPEG and snapshot endpoints."""

    enabled: bool = Field(True, description="serve /, /cameras/... and /api/...")
    max_fps: float = Field(5.0, gt=0, le=60, description="MJPEG frame-rate cap per viewer")
    jpeg_quality: int = Field(75, ge=1, le=100, description="JPEG quality of the live frames")
    stalled_after_s: float = Field(
        2.0, gt=0, description="a streaming camera with no new frame for this long shows stalled"
    )


class HttpConfig(_Model):
    """The daemon's one HTTP server: /metrics, /healthz, /readyz (and the live view)."""

    enabled: bool = True
    host: str = Field("127.0.0.1", description="bind address; loopback unless you mean it")
    port: int = Field(9108, ge=0, le=65535, description="0 picks a free port")
    token: str | None = Field(
        None,
        min_length=16,
        description="bearer token required on every endpoint but /healthz and /readyz; "
        "use ${file:NAME} or ${VAR} so it stays out of the file",
    )
    live: LiveViewConfig = Field(
        default_factory=LiveViewConfig, description="live view (status page, MJPEG)"
    )

    @field_validator("token")
    @classmethod
    def _register_token(cls, v: str | None) -> str | None:
        if v is not None:
            redact.register_secret(v)
        return v


class LoggingConfig(_Model):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class Config(_Model):
    """The whole daemon configuration."""

    model: ModelConfig
    inference: InferenceConfig = Field(default_factory=OpenVINOConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    sinks: list[SinkConfig] = Field(default_factory=list)
    shutdown_timeout_s: float = Field(10.0, gt=0, description="drain limit on SIGTERM")
    cameras: list[CameraConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _default_backend_type(cls, data: Any) -> Any:
        inference = data.get("inference") if isinstance(data, dict) else None
        if isinstance(inference, dict) and "type" not in inference:
            data = {**data, "inference": {"type": "openvino", **inference}}
        return data

    @model_validator(mode="after")
    def _unique_cameras(self) -> Config:
        seen: dict[str, int] = {}
        for i, cam in enumerate(self.cameras):
            if cam.name in seen:
                # the leading path lets _describe point at the second camera's line
                raise ValueError(
                    f"cameras[{i}].name: duplicate camera name {cam.name!r} (also "
                    f"cameras[{seen[cam.name]}].name)"
                )
            seen[cam.name] = i
        return self


# The loader lives in its own module; ``vidpipe.config`` stays the one import for both.
from vidpipe.config_load import (  # noqa: E402
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    load_config,
    parse_config,
)

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "CameraConfig",
    "CaptureConfig",
    "Config",
    "ConfigError",
    "HttpConfig",
    "JsonlSinkConfig",
    "LiveViewConfig",
    "LoggingConfig",
    "ModelConfig",
    "MotionConfig",
    "MqttSinkConfig",
    "MqttTlsConfig",
    "OpenVINOConfig",
    "SchedulerConfig",
    "SnapshotSinkConfig",
    "WebhookSinkConfig",
    "load_config",
    "parse_config",
]
