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


InferenceConfig = Annotated[OpenVINOConfig, Field(discriminator="type")]


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


# --------------------------------------------------------------------------------------------
# Loading

MAX_CONFIG_BYTES = 1 << 20
"""Larger files are refused: no real config comes close, and PyYAML is slow on huge input."""
MAX_VALUES = 20_000
"""Aliases can expand a small file into a huge tree ("billion laughs"): stop building here."""
MAX_DEPTH = 32
"""No config section nests deeper than a few levels; deeper is junk (and recursion)."""

_VAR = re.compile(r"\$\{([^}]*)\}")
_CORE = "tag:yaml.org,2002:"
_PLAIN_TAGS = {_CORE + "map", _CORE + "seq"}
_TIMESTAMP = _CORE + "timestamp"  # no field is a date: "2024-01-31" stays the text written
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")} | {_TIMESTAMP}
_TAG_MODELS: dict[str, type[BaseModel]] = {
    "jsonl": JsonlSinkConfig,
    "snapshot": SnapshotSinkConfig,
    "mqtt": MqttSinkConfig,
    "webhook": WebhookSinkConfig,
    "openvino": OpenVINOConfig,
}  # discriminator tags that pydantic puts into error locations
_PATH_PREFIX = re.compile(r"((?:[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*|\[\d+\])*): (.*)", re.S)
Path_ = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """Safe loader; we walk the node tree ourselves to keep line numbers and catch dup keys."""


class _TooBig(Exception):
    """The document nests too deeply or expands to more than MAX_VALUES values."""


def _fmt_path(path: Iterable[str | int]) -> str:
    """``cameras[0].name``; a key that is not a plain name is quoted: ``capture['a b']``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", p):
            out += f"[{p!r}]"
        else:
            out += f".{p}" if out else p
    return out or "<root>"


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """A PyYAML error as ``line L, column C: ...``.

    PyYAML's own text quotes the offending source line, which may hold a secret that was never
    registered (the parse failed before we could), so only its problem and position are kept.
    """
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character
        shown = f"U+{char:04X}" if isinstance(char, int) else repr(char)
        return f"line {line}: invalid YAML: character {shown} is not allowed"
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"invalid YAML: {exc}"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    text = exc.problem or exc.context or "syntax error"
    if exc.problem and exc.context:
        start = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        text += f" ({exc.context}{start})"
    return f"{where}invalid YAML: {text}"


def _read_credential(name: str, env: dict[str, str]) -> str:
    """The secret in ``$CREDENTIALS_DIRECTORY/name``; raises ValueError saying what is wrong."""
    base = env.get("CREDENTIALS_DIRECTORY")
    if not base:
        raise ValueError(f"${{file:{name}}} needs $CREDENTIALS_DIRECTORY, which is unset")
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise ValueError(f"bad credential name {name!r}: one file name in $CREDENTIALS_DIRECTORY")
    target = Path(base) / name
    try:
        secret = target.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"credential {name!r} not found in $CREDENTIALS_DIRECTORY") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"credential {name!r} cannot be read: {reason}") from None
    redact.register_secret(secret)
    return secret


def _substitute(value: str, where: str, problems: list[str], env: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        try:
            if name.startswith("file:"):
                return _read_credential(name[5:], env)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"bad variable reference ${{{name}}}")
            if name not in env:
                raise ValueError(f"environment variable {name} is not set")
            return env[name]
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            return ""

    return _VAR.sub(repl, value)


class _Builder:
    """Turn a composed YAML node tree into Python data, recording each path's line.

    Only plain mappings, sequences and core scalars are accepted; keys are taken as written
    (``1:`` and ``on:`` are the keys "1" and "on"), so a duplicate is a duplicate however it is
    spelled, and no constructor ever runs on a key.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: dict[Path_, int] = {}
        self.problems: list[str] = []
        self.env = env
        self.loader = _Loader("")
        self._active: set[int] = set()  # nodes on the current path: an alias cycle revisits one
        self._count = 0

    def build(self, node: yaml.Node, path: Path_) -> Any:
        line = node.start_mark.line + 1
        self.lines.setdefault(path, line)
        where = f"{_fmt_path(path)} (line {line})"
        self._count += 1
        if self._count > MAX_VALUES:
            raise _TooBig(f"<root>: more than {MAX_VALUES} values (aliases expanding?)")
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, where)
        if node.tag not in _PLAIN_TAGS:
            self.problems.append(f"{where}: YAML tag {node.tag!r} is not allowed")
            return None
        if len(path) >= MAX_DEPTH or id(node) in self._active:
            what = "an alias refers to itself" if id(node) in self._active else "nested too deeply"
            self.problems.append(f"{where}: {what}")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.build(v, (*path, i)) for i, v in enumerate(node.value)]
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            where = f"{_fmt_path(path)} (line {key_node.start_mark.line + 1})"
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(f"{where}: a key must be a plain string, not a {key_node.id}")
                continue
            if key_node.tag == _CORE + "merge":
                self.problems.append(f"{where}: YAML merge keys ('<<') are not supported")
                continue
            if key_node.tag not in _SCALAR_TAGS:
                self.problems.append(f"{where}: YAML tag {key_node.tag!r} is not allowed")
                continue
            key = key_node.value
            if key in out:
                self.problems.append(
                    f"{_fmt_path((*path, key))} (line {key_node.start_mark.line + 1}): "
                    f"duplicate key {key!r}"
                )
                continue
            out[key] = self.build(value_node, (*path, key))
        return out

    def _scalar(self, node: yaml.ScalarNode, where: str) -> Any:
        if node.tag not in _SCALAR_TAGS:
            self.problems.append(f"{where}: YAML tag {node.tag!r} is not allowed")
            return None
        try:
            value = node.value if node.tag == _TIMESTAMP else self.loader.construct_object(node)
        # PyYAML's scalar constructors raise bare built-in errors for malformed values
        # ("!!int x", "!!int" with no digits, "!!bool maybe", ints of more than 4300 digits)
        except (yaml.YAMLError, ValueError, LookupError, AttributeError, OverflowError) as exc:
            detail = getattr(exc, "problem", None) or f"{type(exc).__name__}: {exc}"
            self.problems.append(f"{where}: cannot read {node.tag.rsplit(':', 1)[-1]}: {detail}")
            return None
        if not isinstance(value, str):
            return value
        if "\0" in value:
            self.problems.append(f"{where}: contains a NUL character")
            return None
        value = _substitute(value, where, self.problems, self.env)
        if "://" in value:
            pw = redact.url_password(value)
            if pw:
                redact.register_secret(pw)
        return value


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models inside an annotation (through list[...], unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) or () for m in _models_in(arg)]


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Path_, type[BaseModel] | None]:
    """A pydantic error location as a YAML path, and the model holding its last key.

    Pydantic adds discriminator tags (``jsonl``) and union member names (``str``, ``int``) to
    locations; neither is a key of the file, so both are dropped.
    """
    model: Any = Config
    parent: type[BaseModel] | None = None
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, int):
            out.append(part)
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue  # a union member name below a plain value
        if part in _TAG_MODELS and part not in model.model_fields:
            model = _TAG_MODELS[part]
            continue
        parent = model
        out.append(str(part))
        field = model.model_fields.get(str(part))
        model = next(iter(_models_in(field.annotation)), None) if field else None
    return tuple(out), parent


def _kind(value: Any) -> str:
    """What a YAML reader would call ``value`` (never the value: it may be a secret)."""
    kinds = [(bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string")]
    kinds += [(list, "a list"), (dict, "a mapping"), (type(None), "null")]
    return next((name for t, name in kinds if isinstance(value, t)), type(value).__name__)


def _describe(err: Any) -> tuple[Path_, str]:
    """One pydantic error as (path, message)."""
    loc, parent = _clean_loc(tuple(err["loc"]))
    msg = str(err["msg"]).removeprefix("Value error, ")
    found = _PATH_PREFIX.fullmatch(msg) if not loc else None
    if found and found.group(1).split(".")[0].split("[")[0] in Config.model_fields:
        # a whole-config validator names the path itself, e.g. "cameras[1].name: duplicate ..."
        tokens = re.findall(r"([A-Za-z_]\w*)|\[(\d+)\]", found.group(1))
        loc = tuple(int(i) if i else name for name, i in tokens)
        msg = found.group(2)
    kind = err["type"]
    if kind == "extra_forbidden":
        msg = "unknown key" + (_closest(str(loc[-1]), parent.model_fields) if parent else "")
    elif kind == "missing":
        msg = "required key is missing"
    elif kind == "union_tag_invalid":
        msg = f"unknown type {err['input'].get('type')!r}: use {err['ctx']['expected_tags']}"
    elif kind == "union_tag_not_found":
        field = Config.model_fields.get(str(loc[0])) if loc else None
        models = _models_in(field.annotation) if field else []
        tags = ", ".join(repr(t) for t, m in _TAG_MODELS.items() if m in models)
        msg = f"required key 'type' is missing (one of {tags})"
    elif kind.endswith(("_type", "_parsing")) or kind in {"dict_type", "model_type"}:
        msg += f", got {_kind(err['input'])}"
    return loc, msg


def _where(loc: Path_, lines: dict[Path_, int]) -> str:
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
    return _fmt_path(loc) + (f" (line {line})" if line else "")


def _closest(name: str, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _validation_problems(exc: ValidationError, lines: dict[Path_, int]) -> list[str]:
    """One line per path; a union's alternatives ("a string", "an integer") joined by 'or'."""
    merged: dict[Path_, list[str]] = {}
    for err in exc.errors():
        loc, msg = _describe(err)
        if msg not in merged.setdefault(loc, []):
            merged[loc].append(msg)
    return [f"{_where(loc, lines)}: {'; or '.join(msgs)}" for loc, msgs in merged.items()]


def _check_depth(text: str) -> None:
    """Refuse deep nesting while streaming events, before PyYAML builds (and recurses on) it.

    PyYAML's scanner costs O(depth) per token on deeply nested flow collections, so a 1 MiB
    line of ``[`` would take minutes to compose; streamed, it stops at the first level too many.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<root>"
                raise _TooBig(f"{where}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_config(text: str, source: str = "config", env: dict[str, str] | None = None) -> Config:
    """Parse and validate YAML text. Raises ConfigError listing every problem."""
    env = dict(os.environ) if env is None else env
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([f"<root>: larger than {MAX_CONFIG_BYTES} bytes"], source)
    builder = _Builder(env)
    try:
        _check_depth(text)
        node = yaml.compose(text, Loader=_Loader)
        if node is None:
            raise ConfigError(["<root>: the file is empty"], source)
        data = builder.build(node, ())
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, text)], source) from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise ConfigError([f"<root>: nested deeper than {MAX_DEPTH} levels"], source) from None
    except _TooBig as exc:
        raise ConfigError([str(exc)], source) from None
    if builder.problems:
        raise ConfigError(builder.problems, source)
    if not isinstance(data, dict):
        raise ConfigError([f"<root>: expected a mapping of sections, got {_kind(data)}"], source)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_problems(exc, builder.lines), source) from None


def load_config(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> Config:
    """Read, substitute and validate a YAML config file. Raises ConfigError."""
    p = Path(path)
    try:
        with p.open("rb") as f:  # bounded read: the path may be a pipe or /dev/zero
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([f"cannot read config: {reason}"], str(p)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError([f"<root>: larger than {MAX_CONFIG_BYTES} bytes"], str(p))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problem = f"line {line}: not UTF-8 text (byte {raw[exc.start]:#04x})"
        raise ConfigError([problem], str(p)) from None
    return parse_config(text, str(p), env)
