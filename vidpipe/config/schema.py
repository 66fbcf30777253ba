"""The config schema: the whole ``Config`` and its sections (cameras, sinks, HTTP, ...).

The model, inference and scene (tracking, zones, lines) sections are in their own modules of
this package; the loader that reads YAML into a ``Config`` is ``vidpipe.config.load``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from vidpipe.config.base import ConfigModel
from vidpipe.config.clips import ClipsConfig, merge_clip_defaults
from vidpipe.config.events import EventsConfig
from vidpipe.config.http import HttpConfig
from vidpipe.config.inference import GpuConfig, InferenceConfig, ModelConfig, OpenVINOConfig
from vidpipe.config.inputs import InputConfig, check_scheme, detect_urls, is_stream
from vidpipe.config.models import (
    DEFAULT_DETECTOR,
    NamedModelConfig,
    ReidConfig,
    SecondaryConfig,
    check_detector_choice,
    check_model_references,
    detectors_of,
)
from vidpipe.config.registry import CAPTURE_DECODERS
from vidpipe.config.scene import LineConfig, TrackingConfig, ZoneConfig, check_scene
from vidpipe.config.sinks import SinkConfig

PositiveFloat = Annotated[float, Field(gt=0)]


class SchedulerConfig(ConfigModel):
    """The shared preprocessing + submission stage."""

    max_frame_age_ms: float = Field(
        1000, gt=0, description="frames older than this when a slot frees up are dropped"
    )


class ShardingConfig(ConfigModel):
    """How ``vidpipe run --shard i/n`` splits the cameras between processes."""

    assignment: Literal["rendezvous", "balanced"] = Field(
        "rendezvous",
        description="rendezvous: each camera by its name alone (adding a camera moves no "
        "other); balanced: shards differ by at most one camera (an added camera may move a "
        "few others)",
    )


CAPTURE_DECODERS.declare("pyav", "nvdec")

if TYPE_CHECKING:
    Decoder = str
else:
    Decoder = CAPTURE_DECODERS.literal()
"""A capture decoder: the type its module registers (``vidpipe.capture.decoders``)."""


class MotionConfig(ConfigModel):
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


class CaptureConfig(ConfigModel):
    """Defaults for every camera's capture worker."""

    decoder: Decoder = Field(
        "pyav",
        description="every camera's decoder unless it sets its own: pyav (libav on the CPU, "
        "frames in host memory) or nvdec (PyNvVideoCodec on the GPU, frames stay on the GPU "
        "that runs the camera's batches; needs inference type torch)",
    )
    hwaccel: Literal["none", "auto", "cuda", "vaapi", "qsv"] = Field(
        "none",
        description="hardware decode device; auto tries cuda, vaapi, qsv; a device that does "
        "not exist falls back to software (one log line)",
    )
    open_timeout_ms: int = Field(5000, gt=0, description="connect + stream probe timeout")
    read_timeout_ms: int = Field(5000, gt=0, description="one packet read timeout")
    stall_timeout_s: float = Field(10.0, gt=0, description="no new frame for this long = stall")
    backoff_initial_s: float = Field(0.5, gt=0, description="first reconnect delay")
    backoff_max_s: float = Field(30.0, gt=0, description="reconnect delay cap")
    decoder_threads: int = Field(1, ge=0, description="FFmpeg decoder threads per camera")
    skip_unused_frames: bool = Field(
        True,
        description="let the decoder skip the non-reference frames that would only be "
        "dropped (pyav), and a decode process (nvdec_processes) let go uncopied and unsent the "
        "frames that would: with detect_fps below the stream's rate, those detection would not "
        "use (counted as decimated); on a live camera, one that would replace a frame still "
        "waiting for inference (counted as mailbox_full; in a decode process, file cameras "
        "only, and a realtime one there waits for inference to take its last frame before it "
        "reads the next)",
    )
    shed_gops: bool = Field(
        True,
        description="live cameras past what inference takes (pyav, and nvdec without "
        "read-ahead): decode only the keyframe of some groups of pictures instead of frames "
        "that would be shed after decoding; they are counted as captured and dropped "
        "(gop_shed). It keeps inference fed where decoding is what runs out, at the cost of "
        "shares per camera that are less even (docs/sizing.md). false decodes every frame "
        "and sheds after decoding: one GPU process past its count then collapses "
        "(docs/gpu.md), and a CPU box infers a fifth less",
    )
    shed_gop_max_s: float = Field(
        4.0,
        gt=0,
        description="never shed a group of pictures longer than this (the camera would see "
        "nothing new for as long)",
    )
    convert_at_model_size: bool = Field(
        True,
        description="pyav cameras: convert a frame for the model at the model's input size, "
        "plane by plane, with the GPU letterbox's sampling (so a camera's detections do not "
        "depend on its decoder); the whole frame is converted only when a sink needs it. "
        "false: convert every whole frame and resize it (more CPU at 1080p, and detections "
        "agree less with an NVDEC camera of the same stream)",
    )
    nvdec_group_size: int = Field(
        1,
        ge=1,
        le=64,
        description="realtime nvdec file cameras read by one thread, in turn (1: a thread "
        "each). Fewer threads wait less for Python's GIL (benchmarks/README.md, GPU); live "
        "streams always keep a thread each",
    )
    nvdec_prefetch: int = Field(
        0,
        ge=0,
        le=64,
        description="nvdec file cameras: frames PyNvVideoCodec's ThreadedDecoder decodes "
        "ahead on a C++ thread of its own, off the GIL the batcher needs (0: decode on the "
        "camera's thread). Live streams always decode on their camera's thread",
    )
    nvdec_processes: int = Field(
        0,
        ge=0,
        le=64,
        description="nvdec cameras demux and decode in this many decode processes of their "
        "own, each with its own GIL; frames come back through GPU memory both processes see "
        "(0: on the camera threads of the daemon's process). For one process given more "
        "cameras than it infers (docs/gpu.md); nothing reads ahead then (nvdec_prefetch)",
    )
    # 8: one more than the 7 NVDEC engines of an H100/H200, so every engine has a decoder
    # starting while the rest wait. 32 cameras of a process start in 4 turns, not in the one
    # herd that left 26 of 160 cameras without a first frame in 10 s on the H200
    # (``capture/open_gate.py``). The limit is per process: 5 shards start up to 40 at once.
    nvdec_open_concurrency: int = Field(
        8,
        ge=1,
        description="nvdec cameras of a process that may be starting at once (from open to "
        "their first frame); the others wait their turn, which the stall watchdog does not "
        "count as open time",
    )
    analyze_duration_ms: int = Field(
        500,
        ge=0,
        description="how long FFmpeg probes a stream on open (its default 5 s made RTSP opens "
        "take 2.8 s each); 0 keeps FFmpeg's default",
    )
    motion: MotionConfig = Field(
        default_factory=MotionConfig, description="motion gate of cameras that set none"
    )


class CameraConfig(ConfigModel):
    """One camera."""

    name: str = Field(
        min_length=1, max_length=64, description="unique name; used in metrics and file names"
    )
    url: str = Field(
        min_length=1,
        description="rtsp://, rtsps://, or a video file path; the one input, for detection and "
        "clips alike. With inputs: leave it out (it is then the detect input's URL)",
    )
    inputs: list[InputConfig] | None = Field(
        None,
        description="instead of url: the camera's streams by role, e.g. a sub-stream to "
        "detect on and the main stream to record clips from (exactly one detect input, at "
        "most one record input)",
    )
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
    detector: str | None = Field(
        None,
        description="the detector this camera runs: a name in models: (default: model:, or "
        "the one detector in models:)",
    )
    secondary: list[SecondaryConfig] | None = Field(
        None, description="models run on crops of this camera's tracks (replaces secondary:)"
    )
    enabled: bool = Field(True, description="false keeps the camera in the file but off")
    paused: bool = Field(
        False,
        description="capture and inference stopped, the camera still listed (state paused); "
        "what POST /api/v1/cameras/{name}/pause sets",
    )
    decoder: Decoder | None = Field(None, description="this camera's decoder (capture.decoder)")
    gpu: int | None = Field(
        None,
        ge=0,
        description="nvdec cameras: the CUDA device that decodes this camera and runs its "
        "batches, one of inference.devices (default 0)",
    )
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
    clips: ClipsConfig = Field(
        default_factory=ClipsConfig,
        description="event clips and crops; keys not given come from the top-level clips",
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

    @model_validator(mode="before")
    @classmethod
    def _url_from_inputs(cls, data: Any) -> Any:
        """With ``inputs:``, ``url`` is the detect input's, so that detection runs exactly as
        on a camera with ``url:`` alone. Whether there is exactly one detect input, and no
        ``url:`` beside ``inputs:``, is checked by ``Config`` (it knows the YAML path)."""
        if not isinstance(data, dict) or not isinstance(data.get("inputs"), list):
            return data
        if "url" in data:
            return data  # refused by Config._inputs_or_url, with the camera's path
        urls = detect_urls(data["inputs"])
        url = urls[0] if urls and isinstance(urls[0], str) and urls[0] else None
        try:
            check_scheme(url or "")
        except ValueError:
            url = None  # a bad scheme: the input reports it, not the url copied from it
        # without a detect input, a placeholder: Config names the problem, not "url: missing"
        return {**data, "url": url or "(no detect input)"}

    @field_validator("url")
    @classmethod
    def _url_kind(cls, v: str) -> str:
        return check_scheme(v)

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
        return is_stream(self.url)

    @property
    def record_input(self) -> InputConfig | None:
        """The input clips are recorded from when it is not the detect input (None: clips
        come from the detect input's packets, as with ``url:`` alone)."""
        for inp in self.inputs or ():
            if "record" in inp.roles and "detect" not in inp.roles:
                return inp
        return None


class LoggingConfig(ConfigModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class Config(ConfigModel):
    """The whole daemon configuration."""

    model: ModelConfig | None = Field(
        None, description="the detector of every camera that names no other (detector:)"
    )
    models: dict[str, NamedModelConfig] = Field(
        default_factory=dict,
        description="named models: detectors that cameras pick with detector:, embedders "
        "(reid) that secondary: stages run on crops",
    )
    secondary: list[SecondaryConfig] = Field(
        default_factory=list,
        description="models run on crops of tracked objects, on every camera that sets none",
    )
    reid: ReidConfig = Field(
        default_factory=ReidConfig, description="re-identification of tracks across cameras"
    )
    inference: InferenceConfig = Field(default_factory=OpenVINOConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    sharding: ShardingConfig = Field(default_factory=ShardingConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    sinks: list[SinkConfig] = Field(default_factory=list)
    shutdown_timeout_s: float = Field(10.0, gt=0, description="drain limit on SIGTERM")
    clips: ClipsConfig = Field(
        default_factory=ClipsConfig, description="event clips: every camera's defaults"
    )
    events: EventsConfig = Field(
        default_factory=EventsConfig, description="the event store: zone, line and clip events"
    )
    cameras: list[CameraConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _inputs_or_url(cls, data: Any) -> Any:
        cameras = data.get("cameras") if isinstance(data, dict) else None
        for i, cam in enumerate(cameras if isinstance(cameras, list) else ()):
            if isinstance(cam, dict) and "inputs" in cam and "url" in cam:
                if cam["url"] in detect_urls(cam["inputs"]):
                    continue  # a camera as the API shows it, sent back: url is the detect's
                raise ValueError(
                    f"cameras[{i}].url: camera {cam.get('name')!r}: give url or inputs, not "
                    "both (with inputs, the detect input's url is the camera's)"
                )
        return data

    @model_validator(mode="after")
    def _input_roles(self) -> Config:
        for i, cam in enumerate(self.cameras):
            if cam.inputs is None:
                continue
            where = f"cameras[{i}].inputs"
            roles: list[str] = [r for inp in cam.inputs for r in inp.roles]
            for role, least in (("detect", 1), ("record", 0)):
                n = roles.count(role)
                if not least <= n <= 1:
                    want = "exactly one" if least else "at most one"
                    raise ValueError(
                        f"{where}: camera {cam.name!r}: {want} input may have role {role!r} "
                        f"(found {n})"
                    )
            record = cam.record_input
            if record is not None and not record.is_stream:
                j = cam.inputs.index(record)
                raise ValueError(
                    f"{where}[{j}].url: camera {cam.name!r}: a record input must be a live "
                    "stream (rtsp:// or rtsps://); a file can only be the detect input"
                )
        return self

    @model_validator(mode="before")
    @classmethod
    def _default_backend_type(cls, data: Any) -> Any:
        data = merge_clip_defaults(data)
        inference = data.get("inference") if isinstance(data, dict) else None
        if isinstance(inference, dict) and "type" not in inference:
            data = {**data, "inference": {"type": "openvino", **inference}}
        return data

    def events_enabled(self) -> bool:
        """Whether the event store runs: ``events.enabled``, or when that is null, whether any
        camera makes events (zones, lines or clips)."""
        if self.events.enabled is not None:
            return self.events.enabled
        return any(cam.zones or cam.lines or cam.clips.enabled for cam in self.cameras)

    def decoder_of(self, camera: CameraConfig) -> str:
        """The camera's decoder: its own setting, else ``capture.decoder``."""
        return camera.decoder or self.capture.decoder

    @model_validator(mode="after")
    def _nvdec_where_it_works(self) -> Config:
        """NVDEC frames stay on the GPU: only a GPU backend that letterboxes them can take
        them (type torch), and only on one of its devices."""
        for i, cam in enumerate(self.cameras):
            if self.decoder_of(cam) != "nvdec":
                if cam.gpu is not None:
                    raise ValueError(
                        f"cameras[{i}].gpu: camera {cam.name!r}: gpu applies to nvdec cameras "
                        "only (set decoder: nvdec, or remove gpu)"
                    )
                continue
            where = f"cameras[{i}].decoder" if cam.decoder else "capture.decoder"
            if (cam.motion or self.capture.motion).enabled:
                raise ValueError(
                    f"{where}: camera {cam.name!r} decodes with nvdec, but its motion gate "
                    "compares pictures on the CPU: turn motion off for it, or use decoder pyav"
                )
            if not isinstance(self.inference, GpuConfig) or self.inference.type != "torch":
                raise ValueError(
                    f"{where}: camera {cam.name!r} decodes with nvdec, whose frames stay on "
                    f"the GPU, but inference type {self.inference.type!r} cannot take them: "
                    "use inference type torch, or decoder pyav"
                )
            gpu = 0 if cam.gpu is None else cam.gpu
            if gpu not in self.inference.devices:
                field = f"cameras[{i}].gpu" if cam.gpu is not None else where
                raise ValueError(
                    f"{field}: camera {cam.name!r} would decode on GPU {gpu}, which is not in "
                    f"inference.devices {self.inference.devices}: set gpu to one of them"
                )
        return self

    @model_validator(mode="after")
    def _model_on_its_backend(self) -> Config:
        for name, model in self.detectors().items():
            problem = model.backend_problem(self.inference)
            if problem and name != DEFAULT_DETECTOR:
                problem = problem.replace("model.", f"models.{name}.", 1)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _models_named(self) -> Config:
        check_model_references(self)
        return self

    def detectors(self) -> dict[str, ModelConfig]:
        """Every detector by name: ``model:`` as ``default``, then those of ``models:``."""
        return detectors_of(self.model, self.models)

    def default_detector(self) -> ModelConfig:
        """``model:``, or the first detector of ``models:`` (``vidpipe detect``, ``optimize``)."""
        return next(iter(self.detectors().values()))

    def detector_of(self, camera: CameraConfig) -> str:
        """The name of the detector ``camera`` runs (checked when the config was built)."""
        return check_detector_choice(
            camera.name, "detector", camera.detector, self.detectors(), self.models
        )

    def secondary_of(self, camera: CameraConfig) -> list[SecondaryConfig]:
        """The secondary stages of ``camera``: its own, else the top-level ones."""
        return list(self.secondary if camera.secondary is None else camera.secondary)

    @model_validator(mode="after")
    def _clip_windows(self) -> Config:
        # the leading path lets _describe point at the line; the message names the camera
        problem = self.clips.window_problem()
        if problem:
            raise ValueError(f"clips: {problem}")
        for i, cam in enumerate(self.cameras):
            problem = cam.clips.window_problem() or cam.clips.crop_problem(
                cam.record_input is not None
            )
            if problem:
                raise ValueError(f"cameras[{i}].clips: camera {cam.name!r}: {problem}")
        return self

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
