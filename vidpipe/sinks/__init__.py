"""Sinks: where frame results go (JSON lines, snapshots, MQTT, webhooks), each on its thread.

``build_sinks`` turns the ``sinks:`` config section into sink objects; ``SinkPool`` runs them.
Each sink type is registered once, below, with ``@register_sink("type")``: its factory gets
the sink's name, its config (the class declared for that type in ``vidpipe.config.sinks``)
and a ``SinkContext``. A sink that wants camera state changes implements
``CameraStateListener``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from vidpipe.config import (
    SINKS,
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
from vidpipe.types import CameraState

__all__ = [
    "CameraStateListener",
    "DrawFn",
    "JsonlSink",
    "MqttSink",
    "Sink",
    "SinkContext",
    "SinkPool",
    "SnapshotSink",
    "WebhookSink",
    "build_sinks",
    "register_sink",
]


@runtime_checkable
class CameraStateListener(Protocol):
    """A sink that is told when a camera's capture state changes (e.g. MQTT's state topic).

    Called on one of the camera's capture threads: it must not block.
    """

    def camera_state(self, camera: str, state: CameraState) -> None: ...


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What the pipeline offers every sink factory."""

    draw: DrawFn  # draw(image, detections, labels) -> annotated image
    metrics: Metrics | None  # the sinks' own counters (MQTT, webhook)

    def need_metrics(self, name: str, kind: str) -> Metrics:
        if self.metrics is None:
            raise ValueError(f"sink {name}: build_sinks needs metrics for {kind} sinks")
        return self.metrics


_C = TypeVar("_C")
SinkFactory = Callable[[str, _C, SinkContext], Sink]


def register_sink(*types: str) -> Callable[[SinkFactory[_C]], SinkFactory[_C]]:
    """Decorator: the factory of the sink ``types`` (declared in ``vidpipe.config.sinks``)."""
    return SINKS.register(*types)


@register_sink("jsonl")
def _jsonl(name: str, cfg: JsonlSinkConfig, ctx: SinkContext) -> Sink:
    return JsonlSink(
        name,
        cfg.path,
        only_with_detections=cfg.only_with_detections,
        queue_size=cfg.queue_size,
        batch_window_s=cfg.batch_window_ms / 1000.0,
    )


@register_sink("snapshot")
def _snapshot(name: str, cfg: SnapshotSinkConfig, ctx: SinkContext) -> Sink:
    return SnapshotSink(
        name,
        cfg.dir,
        draw=ctx.draw,
        min_interval_s=cfg.min_interval_s,
        jpeg_quality=cfg.jpeg_quality,
        crop=cfg.crop,
        keep_last=cfg.keep_last,
        queue_size=cfg.queue_size,
    )


@register_sink("mqtt")
def _mqtt(name: str, cfg: MqttSinkConfig, ctx: SinkContext) -> Sink:
    return MqttSink(name, cfg, ctx.need_metrics(name, cfg.type))


@register_sink("webhook")
def _webhook(name: str, cfg: WebhookSinkConfig, ctx: SinkContext) -> Sink:
    return WebhookSink(name, cfg, ctx.need_metrics(name, cfg.type))


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
    ctx = SinkContext(draw, metrics)
    per_type = Counter(c.type for c in configs)
    sinks: list[Sink] = []
    for index, cfg in enumerate(configs):
        name = cfg.type if per_type[cfg.type] == 1 else f"{cfg.type}:{index}"
        factory: SinkFactory[SinkConfig] = SINKS.factory(cfg.type)
        sinks.append(factory(name, cfg, ctx))
    return sinks
