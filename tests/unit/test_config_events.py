"""Config of the live view, MQTT and webhook sinks: defaults, errors with their YAML path."""

from __future__ import annotations

import textwrap

import pytest

from vidpipe.config import ConfigError, MqttSinkConfig, WebhookSinkConfig, parse_config
from vidpipe.redact import redact_text


def parse(body: str, env: dict[str, str] | None = None):
    return parse_config("model: {path: m.onnx}\n" + textwrap.dedent(body), env=env or {})


def test_defaults_and_a_full_example() -> None:
    cfg = parse(
        """
        http: {live: {max_fps: 2}}
        sinks:
          - {type: mqtt, host: broker, tls: {ca_file: /etc/ca.pem}}
          - {type: webhook, url: "https://h.example/x", classes: [person], cooldown_s: 30}
        """
    )
    assert cfg.http.live.enabled and cfg.http.live.max_fps == 2
    mqtt, hook = cfg.sinks
    assert isinstance(mqtt, MqttSinkConfig) and isinstance(hook, WebhookSinkConfig)
    assert (mqtt.port, mqtt.qos, mqtt.topic_prefix) == (1883, 1, "vidpipe")
    assert hook.classes == ["person"] and hook.retries == 3


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "sinks: [{type: mqtt, host: b, qso: 1}]",
            "sinks[0].qso (line 2): unknown key (did you mean 'qos'?)",
        ),
        ("sinks: [{type: mqtt, host: b, qos: 3}]", "sinks[0].qos"),
        ("sinks: [{type: mqtt}]", "sinks[0].host (line 2): required key is missing"),
        ("sinks: [{type: webhook, url: 'ftp://x/y'}]", "must start with http:// or https://"),
        ("sinks: [{type: webhook, url: 'http://x', min_score: 2}]", "sinks[0].min_score"),
        ("sinks: [{type: mqttt, host: b}]", "'mqtt'"),
        ("http: {live: {max_fps: 0}}", "http.live.max_fps"),
        ("http: {live: {fps: 3}}", "http.live.fps (line 2): unknown key"),
    ],
)
def test_errors_name_the_path(body: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(body)
    assert expected in str(err.value)


def test_mqtt_password_and_webhook_headers_are_secrets() -> None:
    parse(
        """
        sinks:
          - {type: mqtt, host: b, username: u, password: "${PW}"}
          - {type: webhook, url: "http://h/x", headers: {X-Key: "hook-key-0815"}}
        """,
        env={"PW": "mqtt-secret-4711"},
    )
    assert redact_text("pw mqtt-secret-4711 key hook-key-0815") == "pw *** key ***"


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_zone_and_line_points_refuse_inf_and_nan(value: str) -> None:
    """A point at infinity cannot be drawn or tested; the scene models share the schema's base."""
    with pytest.raises(ConfigError) as err:
        parse(
            f"""
            cameras:
              - name: c
                url: clip.mp4
                zones: [{{name: z, points: [[0, 0], [1, 0], [{value}, 1]]}}]
            """
        )
    assert "cameras[0].zones[0].points" in str(err.value)
