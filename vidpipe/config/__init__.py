"""Configuration: the pydantic schema and ``load_config(path)``, at the bottom of the imports.

Every model forbids unknown keys. Errors name the YAML path and line. ``${VAR}`` is replaced
from the environment and ``${file:NAME}`` from ``$CREDENTIALS_DIRECTORY`` (systemd
``LoadCredential=``); both are read once, when the file is loaded, never per frame.

Modules: ``base`` (``ConfigError``, the shared model base), ``registry`` (the sink, backend
and decoder types, keyed by ``type``), ``inference`` (``model:`` and ``inference:``),
``sinks`` (``sinks:``), ``scene`` (tracking, zones, lines), ``schema`` (``Config`` and the
other sections) and ``load`` (YAML -> ``Config``). This package imports no pipeline stage.
"""

from vidpipe.config.base import SECRET, ConfigError, ConfigModel
from vidpipe.config.clips import ClipsConfig, ClipTriggers, CropConfig
from vidpipe.config.http import HttpConfig, LiveViewConfig
from vidpipe.config.inference import (
    DEFAULT_ENGINE_CACHE,
    GpuAdvanced,
    GpuConfig,
    InferenceConfig,
    InferenceConfigBase,
    ModelConfig,
    OpenVINOAdvanced,
    OpenVINOConfig,
)
from vidpipe.config.load import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    load_config,
    parse_config,
    register_secrets,
)
from vidpipe.config.registry import BACKENDS, CAPTURE_DECODERS, MODEL_TYPES, SINKS, Kind
from vidpipe.config.scene import LineConfig, Point, TrackingConfig, ZoneConfig, check_scene
from vidpipe.config.schema import (
    CameraConfig,
    CaptureConfig,
    Config,
    InputConfig,
    LoggingConfig,
    MotionConfig,
    SchedulerConfig,
    ShardingConfig,
)
from vidpipe.config.sinks import (
    JsonlSinkConfig,
    MqttSinkConfig,
    MqttTlsConfig,
    SinkConfig,
    SinkConfigBase,
    SnapshotSinkConfig,
    WebhookSinkConfig,
)

__all__ = [
    "BACKENDS",
    "CAPTURE_DECODERS",
    "DEFAULT_ENGINE_CACHE",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "MODEL_TYPES",
    "SECRET",
    "SINKS",
    "CameraConfig",
    "CaptureConfig",
    "ClipTriggers",
    "ClipsConfig",
    "Config",
    "ConfigError",
    "ConfigModel",
    "CropConfig",
    "GpuAdvanced",
    "GpuConfig",
    "HttpConfig",
    "InferenceConfig",
    "InferenceConfigBase",
    "InputConfig",
    "JsonlSinkConfig",
    "Kind",
    "LineConfig",
    "LiveViewConfig",
    "LoggingConfig",
    "ModelConfig",
    "MotionConfig",
    "MqttSinkConfig",
    "MqttTlsConfig",
    "OpenVINOAdvanced",
    "OpenVINOConfig",
    "Point",
    "SchedulerConfig",
    "ShardingConfig",
    "SinkConfig",
    "SinkConfigBase",
    "SnapshotSinkConfig",
    "TrackingConfig",
    "WebhookSinkConfig",
    "ZoneConfig",
    "check_scene",
    "load_config",
    "parse_config",
    "register_secrets",
]
