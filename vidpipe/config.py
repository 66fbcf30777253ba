"""Configuration: pydantic models and ``load_config(path)``.

Every model forbids unknown keys. Errors name the YAML path and line. ``${VAR}`` is replaced
from the environment and ``${file:NAME}`` from ``$CREDENTIALS_DIRECTORY`` (systemd
``LoadCredential=``); both are read once, here, never per frame.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vidpipe import redact
from vidpipe.infer.gpu import GpuConfig


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
    model_config = ConfigDict(extra="forbid", frozen=True)


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
        return self

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


SinkConfig = Annotated[JsonlSinkConfig | SnapshotSinkConfig, Field(discriminator="type")]


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
                raise ValueError(
                    f"duplicate camera name {cam.name!r} (cameras[{seen[cam.name]}] and "
                    f"cameras[{i}])"
                )
            seen[cam.name] = i
        return self


# --------------------------------------------------------------------------------------------
# Loading


_VAR = re.compile(r"\$\{([^}]*)\}")
Path_ = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """Safe loader; we walk the node tree ourselves to keep line numbers and catch dup keys."""


def _fmt_path(path: Iterable[str | int]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def _substitute(value: str, where: str, problems: list[str], env: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.startswith("file:"):
            cred = name[5:]
            base = env.get("CREDENTIALS_DIRECTORY")
            if not base:
                problems.append(
                    f"{where}: ${{{name}}} needs $CREDENTIALS_DIRECTORY, which is unset"
                )
                return ""
            target = Path(base) / cred
            if "/" in cred or not target.is_file():
                problems.append(f"{where}: credential {cred!r} not found in $CREDENTIALS_DIRECTORY")
                return ""
            secret = target.read_text().strip()
            redact.register_secret(secret)
            return secret
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            problems.append(f"{where}: bad variable reference ${{{name}}}")
            return ""
        if name not in env:
            problems.append(f"{where}: environment variable {name} is not set")
            return ""
        return env[name]

    return _VAR.sub(repl, value)


_PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


class _Builder:
    """Turn a composed YAML node tree into Python data, recording each path's line."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: dict[Path_, int] = {}
        self.problems: list[str] = []
        self.env = env
        self.loader = _Loader("")

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.lines[path] = node.start_mark.line + 1
        where = f"{_fmt_path(path)} (line {node.start_mark.line + 1})"
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.tag not in _PLAIN_TAGS:
            self.problems.append(f"{where}: YAML tag {node.tag!r} is not allowed")
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node)
                if not isinstance(key, str | int):
                    self.problems.append(f"{where}: mapping key {key!r} is not a string")
                    continue
                if key in out:
                    self.problems.append(
                        f"{_fmt_path((*path, key))} (line {key_node.start_mark.line + 1}): "
                        f"duplicate key {key!r}"
                    )
                    continue
                out[str(key)] = self.build(value_node, (*path, str(key)))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, (*path, i)) for i, v in enumerate(node.value)]
        try:
            value = self.loader.construct_object(node)
        except yaml.YAMLError as exc:
            self.problems.append(f"{where}: {getattr(exc, 'problem', None) or exc}")
            return None
        if isinstance(value, str):
            value = _substitute(value, where, self.problems, self.env)
            if "://" in value:
                pw = redact.url_password(value)
                if pw:
                    redact.register_secret(pw)
        return value


def _closest(name: str, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that a validation error location points into."""
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                # discriminator tags appear in loc (e.g. 'jsonl')
                model = {
                    "jsonl": JsonlSinkConfig,
                    "snapshot": SnapshotSinkConfig,
                    "openvino": OpenVINOConfig,
                    "tensorrt": GpuConfig,
                    "torch": GpuConfig,
                }.get(str(part))
                continue
            model = _inner_model(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _describe(err: Any, lines: dict[Path_, int]) -> str:
    _tags = ("jsonl", "snapshot", "openvino", "tensorrt", "torch")
    loc = tuple(p for p in err["loc"] if p not in _tags)
    line = None
    for n in range(len(loc), -1, -1):
        line = lines.get(loc[:n])
        if line is not None:
            break
    where = _fmt_path(loc) + (f" (line {line})" if line else "")
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        parent = _model_at(tuple(err["loc"][:-1]))
        hint = _closest(str(loc[-1]), parent.model_fields) if parent else ""
        msg = f"unknown key{hint}"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "union_tag_invalid":
        msg = msg.replace("Input tag", "type")
    return f"{where}: {msg}"


def parse_config(text: str, source: str = "config", env: dict[str, str] | None = None) -> Config:
    """Parse and validate YAML text. Raises ConfigError listing every problem."""
    env = dict(os.environ) if env is None else env
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError([f"invalid YAML: {exc}"], source) from None
    if node is None:
        raise ConfigError(["<root>: the file is empty"], source)
    builder = _Builder(env)
    try:
        data = builder.build(node, ())
    except yaml.YAMLError as exc:  # e.g. !!python/object tags refused by the safe constructor
        raise ConfigError([f"invalid YAML: {exc}"], source) from None
    if builder.problems:
        raise ConfigError(builder.problems, source)
    if not isinstance(data, dict):
        raise ConfigError(["<root>: expected a mapping of sections"], source)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_describe(e, builder.lines) for e in exc.errors()], source) from None


def load_config(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> Config:
    """Read, substitute and validate a YAML config file. Raises ConfigError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read config: {exc}"], str(p)) from None
    return parse_config(text, str(p), env)
