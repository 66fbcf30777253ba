"""Configuration: the pydantic schema and ``load_config(path)``, at the bottom of the imports.

Every model forbids unknown keys. Errors name the YAML path and line. ``${VAR}`` is replaced
from the environment and ``${file:NAME}`` from ``$CREDENTIALS_DIRECTORY`` (systemd
``LoadCredential=``); both are read once, when the file is loaded, never per frame.

Modules: ``base`` (``ConfigError``, the shared model base), ``inference`` (``model:`` and
``inference:``), ``scene`` (tracking, zones, lines), ``schema`` (``Config`` and the other
sections) and ``load`` (YAML -> ``Config``). This package imports no pipeline stage.
"""

from vidpipe.config.base import ConfigError, ConfigModel
from vidpipe.config.inference import (
    DEFAULT_ENGINE_CACHE,
    GpuConfig,
    InferenceConfig,
    ModelConfig,
    OpenVINOConfig,
)
from vidpipe.config.load import MAX_CONFIG_BYTES, MAX_DEPTH, MAX_VALUES, load_config, parse_config
from vidpipe.config.scene import LineConfig, Point, TrackingConfig, ZoneConfig, check_scene
from vidpipe.config.schema import (
    CameraConfig,
    CaptureConfig,
    Config,
    HttpConfig,
    JsonlSinkConfig,
    LiveViewConfig,
    LoggingConfig,
    MqttSinkConfig,
    MqttTlsConfig,
    SchedulerConfig,
    SinkConfig,
    SnapshotSinkConfig,
    WebhookSinkConfig,
)

__all__ = [
    "DEFAULT_ENGINE_CACHE",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "CameraConfig",
    "CaptureConfig",
    "Config",
    "ConfigError",
    "ConfigModel",
    "GpuConfig",
    "HttpConfig",
    "InferenceConfig",
    "JsonlSinkConfig",
    "LineConfig",
    "LiveViewConfig",
    "LoggingConfig",
    "ModelConfig",
    "MqttSinkConfig",
    "MqttTlsConfig",
    "OpenVINOConfig",
    "Point",
    "SchedulerConfig",
    "SinkConfig",
    "SnapshotSinkConfig",
    "TrackingConfig",
    "WebhookSinkConfig",
    "ZoneConfig",
    "check_scene",
    "load_config",
    "parse_config",
]
