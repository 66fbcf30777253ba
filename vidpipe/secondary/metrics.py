"""The secondary stage's metrics, on the pipeline's registry (``Metrics.registry``).

Defined here rather than in ``vidpipe.metrics`` so that the stage is one package; defined once
per registry (a second stage built on the same registry, as tests and a restart of the stage
do, gets the same series).
"""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vidpipe.metrics import Metrics

#: Why a crop was not embedded (``vidpipe_secondary_dropped_total{reason}``).
SECONDARY_DROPS = (
    "secondary_busy",  # its model's queue was full (queue_size crops waiting)
    "no_image",  # the result carried no frame to cut it from
    "inference_error",  # the model failed on it
    "shutdown",  # still queued or in flight when the stage closed
)

_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, SecondaryMetrics] = (
    weakref.WeakKeyDictionary()
)


class SecondaryMetrics:
    """Crops submitted, embedded and dropped, their latency, re-identification matches."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.submitted = Counter(
            "vidpipe_secondary_crops_submitted",
            "Crops of tracked objects queued for a secondary model",
            ["model"],
            registry=r,
        )
        self.embedded = Counter(
            "vidpipe_secondary_crops_embedded",
            "Crops a secondary model embedded",
            ["model"],
            registry=r,
        )
        self.dropped = Counter(
            "vidpipe_secondary_dropped",
            "Crops due but not embedded, by reason",
            ["model", "reason"],
            registry=r,
        )
        self.latency = Histogram(
            "vidpipe_secondary_latency_seconds",
            "Seconds from a crop queued to its embedding",
            ["model"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=r,
        )
        self.queue_depth = Gauge(
            "vidpipe_secondary_queue_depth",
            "Crops waiting for a secondary model",
            ["model"],
            registry=r,
        )
        self.tracks = Gauge(
            "vidpipe_secondary_tracks",
            "Tracks whose crops a secondary model holds (alive, or ended and not summarised)",
            ["model"],
            registry=r,
        )
        self.reid_matches = Counter(
            "vidpipe_reid_matches",
            "Tracks that took the global id of a track on another camera",
            ["model"],
            registry=r,
        )

    def activate(self, model: str) -> None:
        """Create every series of ``model`` at zero (``rate()`` needs the zero)."""
        for counter in (self.submitted, self.embedded, self.reid_matches):
            counter.labels(model=model)
        for reason in SECONDARY_DROPS:
            self.dropped.labels(model=model, reason=reason)
        self.latency.labels(model=model)
        self.queue_depth.labels(model=model).set(0)
        self.tracks.labels(model=model).set(0)


def secondary_metrics(metrics: Metrics) -> SecondaryMetrics:
    """The secondary stage's metrics on ``metrics``' registry (defined on the first call)."""
    found = _BY_REGISTRY.get(metrics.registry)
    if found is None:
        found = _BY_REGISTRY[metrics.registry] = SecondaryMetrics(metrics.registry)
    return found
