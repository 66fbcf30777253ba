"""The type registries: one declaration in the config package, one factory in the stage."""

from __future__ import annotations

import pytest
from pydantic import Field

import vidpipe.capture  # registers the capture sources
import vidpipe.infer.backends
import vidpipe.postprocess.decode
import vidpipe.sinks  # noqa: F401  (registers the sink factories)
from vidpipe import redact
from vidpipe.config import (
    BACKENDS,
    CAPTURE_DECODERS,
    MODEL_TYPES,
    SECRET,
    SINKS,
    Config,
    ConfigError,
    ConfigModel,
    Kind,
    parse_config,
    register_secrets,
)

BASE = "model:\n  path: m.onnx\n"


@pytest.mark.parametrize(
    "kind", [SINKS, BACKENDS, MODEL_TYPES, CAPTURE_DECODERS], ids=lambda k: k.what
)
def test_every_declared_type_has_an_implementation(kind: Kind) -> None:
    assert kind.tags
    assert kind.unimplemented() == []


def test_the_unions_are_built_from_the_declarations() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + "sinks:\n  - {type: jsonx, path: x}\n")
    assert "'jsonl', 'snapshot', 'mqtt', 'webhook'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_config("model:\n  path: m.onnx\n  type: yolo\n")
    assert "'yolox', 'yolov8', 'ssd' or 'nanodet'" in str(err.value)
    assert parse_config(BASE + "inference: {type: torch}\n").inference.type == "torch"


def test_a_new_type_is_one_declaration_and_one_registration() -> None:
    kind = Kind("test sink")

    @kind.config("echo")
    class EchoConfig(ConfigModel):
        type: str = "echo"

    @kind.config("null")
    class NullConfig(ConfigModel):
        type: str = "null"

    assert kind.unimplemented() == ["echo", "null"]
    kind.register("echo")(lambda name: f"echo {name}")
    assert kind.factory("echo")("a") == "echo a"
    assert kind.models() == {"echo": EchoConfig, "null": NullConfig}
    with pytest.raises(LookupError, match="no implementation registered for test sink type 'null'"):
        kind.factory("null")
    with pytest.raises(ValueError, match="'nope' is not declared"):
        kind.register("nope")(print)
    with pytest.raises(ValueError, match="registered twice"):
        kind.register("echo")(print)
    with pytest.raises(ValueError, match="declared twice"):
        kind.declare("echo")


def test_parsing_registers_no_secret_and_secrets_lists_them() -> None:
    """Validation has no side effects: ``secrets()`` names them, registering is explicit."""
    cfg = Config.model_validate(
        {
            "model": {"path": "m.onnx"},
            "http": {"token": "Token-Canary-0123456789"},
            "sinks": [
                {"type": "mqtt", "host": "b", "password": "Mqtt-Canary-4711"},
                {"type": "webhook", "url": "https://h/x", "headers": {"X-Key": "Hook-Canary-0815"}},
            ],
            "cameras": [{"name": "c", "url": "rtsp://u:Url-Canary-1@cam/x"}],
        }
    )
    text = "Token-Canary-0123456789 Mqtt-Canary-4711 Hook-Canary-0815 Url-Canary-1"
    assert redact.redact_text(text) == text
    assert cfg.secrets() == set(text.split())
    register_secrets(cfg.secrets())
    assert redact.redact_text(text) == "*** *** *** ***"


def test_secret_marker_reaches_nested_sections() -> None:
    class Inner(ConfigModel):
        key: str = Field("Inner-Canary", json_schema_extra=SECRET)
        plain: str = "not-a-secret"

    class Outer(ConfigModel):
        inner: list[Inner] = Field(default_factory=lambda: [Inner()])

    assert Outer().secrets() == {"Inner-Canary"}
