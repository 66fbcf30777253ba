"""Sinks: where frame results go (JSON lines, snapshots), each on its own thread.

``build_sinks`` turns the ``sinks:`` config section into sink objects; ``SinkPool`` runs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from vidpipe.config import (
    JsonlSinkConfig,
    MqttSinkConfig,
    SinkConfig,
    SnapshotSinkConfig,
    WebhookSinkConfig,
)
from vidpipe.metrics import Metrics
from vidpipe.sinks.base import Sink, SinkPool
from vidpipe.sinks.jsonl import JsonlSink
from vidpipe.sinks.mqtt import MqttSink
from vidpipe.sinks.snapshot import DrawFn, SnapshotSink
from vidpipe.sinks.webhook import WebhookSink

__all__ = [
    "DrawFn",
    "JsonlSink",
    "MqttSink",
    "Sink",
    "SinkPool",
    "SnapshotSink",
    "WebhookSink",
    "build_sinks",
]


def build_sinks(
    configs: Sequence[SinkConfig], *, draw: DrawFn, metrics: Metrics | None = None
) -> list[Sink]:
    """Create the configured sinks.

    A sink is named after its type (``"jsonl"``); when several sinks share a type, each name
    gets the sink's index in the config list (``"jsonl:0"``, ``"jsonl:2"`` for ``sinks[0]`` and
    ``sinks[2]``), so a metric label leads straight back to the config entry.

    Args:
        configs: the ``sinks:`` section of the config.
        draw: ``draw(image, detections, labels) -> annotated image`` for snapshot sinks.
        metrics: the registry of the MQTT and webhook sinks' own counters (required when
            the config has such sinks).

    Returns:
        One sink per config entry, in config order.
    """
    per_type = Counter(c.type for c in configs)
    sinks: list[Sink] = []
    for index, cfg in enumerate(configs):
        name = cfg.type if per_type[cfg.type] == 1 else f"{cfg.type}:{index}"
        if isinstance(cfg, JsonlSinkConfig):
            sinks.append(
                JsonlSink(
                    name,
                    cfg.path,
                    only_with_detections=cfg.only_with_detections,
                    queue_size=cfg.queue_size,
                )
            )
        elif isinstance(cfg, SnapshotSinkConfig):
            sinks.append(
                SnapshotSink(
                    name,
                    cfg.dir,
                    draw=draw,
                    min_interval_s=cfg.min_interval_s,
                    jpeg_quality=cfg.jpeg_quality,
                    keep_last=cfg.keep_last,
                    queue_size=cfg.queue_size,
                )
            )
        elif isinstance(cfg, MqttSinkConfig | WebhookSinkConfig):
            if metrics is None:
                raise ValueError(f"sink {name}: build_sinks needs metrics for {cfg.type} sinks")
            if isinstance(cfg, MqttSinkConfig):
                sinks.append(MqttSink(name, cfg, metrics))
            else:
                sinks.append(WebhookSink(name, cfg, metrics))
        else:  # pragma: no cover - the config union is exhaustive
            raise TypeError(f"unknown sink config {type(cfg).__name__}")
    return sinks
