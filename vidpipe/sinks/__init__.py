"""Sinks: where frame results go (JSON lines, snapshots), each on its own thread.

``build_sinks`` turns the ``sinks:`` config section into sink objects; ``SinkPool`` runs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from vidpipe.config import JsonlSinkConfig, SinkConfig, SnapshotSinkConfig
from vidpipe.sinks.base import Sink, SinkPool
from vidpipe.sinks.jsonl import JsonlSink
from vidpipe.sinks.snapshot import DrawFn, SnapshotSink

__all__ = ["DrawFn", "JsonlSink", "Sink", "SinkPool", "SnapshotSink", "build_sinks"]


def build_sinks(configs: Sequence[SinkConfig], *, draw: DrawFn) -> list[Sink]:
    """Create the configured sinks.

    A sink is named after its type (``"jsonl"``); when several sinks share a type, each name
    gets the sink's index in the config list (``"jsonl:0"``, ``"jsonl:2"`` for ``sinks[0]`` and
    ``sinks[2]``), so a metric label leads straight back to the config entry.

    Args:
        configs: the ``sinks:`` section of the config.
        draw: ``draw(image, detections, labels) -> annotated image`` for snapshot sinks.

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
        else:  # pragma: no cover - the config union is exhaustive
            raise TypeError(f"unknown sink config {type(cfg).__name__}")
    return sinks
