"""Every figure of the Prometheus registry as JSON, grouped by camera and by sink.

``/api/stats`` is built from the same registry that ``/metrics`` exposes, sample by sample, so
the two can never disagree. Histogram buckets are left out (``_count`` and ``_sum`` stay).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from prometheus_client import CollectorRegistry

_PREFIX = "vidpipe_"


def _put(target: dict[str, Any], key: str, labels: dict[str, str], value: float) -> None:
    """Store one sample: a plain value, a ``{label value: value}`` map, or a record list."""
    if not labels:
        target[key] = value
    elif len(labels) == 1:
        target.setdefault(key, {})[next(iter(labels.values()))] = value
    else:
        target.setdefault(key, []).append({**labels, "value": value})


def registry_stats(registry: CollectorRegistry) -> dict[str, Any]:
    """The registry's samples as ``{"cameras": {...}, "sinks": {...}, "pipeline": {...}}``.

    A sample with a ``camera`` label goes under its camera, one with a ``sink`` label under its
    sink, the rest under ``pipeline``. Keys are sample names without the ``vidpipe_`` prefix
    (``frames_captured_total``); a sample with one more label becomes a map keyed by that
    label's value (``frames_dropped_total: {"too_old": 3.0}``).
    """
    cameras: dict[str, dict[str, Any]] = defaultdict(dict)
    sinks: dict[str, dict[str, Any]] = defaultdict(dict)
    pipeline: dict[str, Any] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith(("_created", "_bucket")):
                continue
            key = sample.name.removeprefix(_PREFIX)
            labels = dict(sample.labels)
            camera = labels.pop("camera", None)
            sink = labels.pop("sink", None)
            if camera is not None:
                target = cameras[camera]
            elif sink is not None:
                target = sinks[sink]
            else:
                target = pipeline
            _put(target, key, labels, float(sample.value))
    return {"cameras": dict(cameras), "sinks": dict(sinks), "pipeline": pipeline}
