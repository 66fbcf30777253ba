"""The study probe's latency split: quantiles of the daemon's own histograms over the window
only (what was observed before the window must not count)."""

from __future__ import annotations

import types

from benchmarks.probes import StudyProbe
from vidpipe.bench.common import PointResult
from vidpipe.metrics import Metrics


def _contender(metrics: Metrics) -> types.SimpleNamespace:
    daemon = types.SimpleNamespace(metrics=metrics, http_port=None)
    return types.SimpleNamespace(daemon=daemon)


def test_latency_split_counts_the_window_only() -> None:
    metrics = Metrics()
    contender = _contender(metrics)
    for _ in range(100):  # before the window: slow frames that must not count
        metrics.camera("a").e2e_latency.observe(2.0)
        metrics.model("m").latency.observe(1.5)
    probe = StudyProbe()
    probe.before(contender)
    for i in range(100):  # in the window: two cameras, most frames fast, a tail at 250 ms
        cam = metrics.camera("a" if i % 2 else "b")
        cam.e2e_latency.observe(0.25 if i >= 90 else 0.015)
        metrics.model("m").latency.observe(0.04)
    result = PointResult(spec={})
    probe.after(contender, result)
    split = result.info["latency_split_ms"]
    # bucket upper bounds: 15 ms falls in (10, 20], 250 ms in (200, 300], 40 ms in (30, 50]
    assert split["capture_to_result"] == {"p50": 20.0, "p95": 300.0}
    assert split["inference"] == {"p50": 50.0, "p95": 50.0}


def test_latency_split_without_observations_is_none() -> None:
    metrics = Metrics()
    contender = _contender(metrics)
    probe = StudyProbe()
    probe.before(contender)
    result = PointResult(spec={})
    probe.after(contender, result)
    assert result.info["latency_split_ms"]["capture_to_result"] == {"p50": None, "p95": None}
