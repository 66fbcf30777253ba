"""The study's meters of every point (``vidpipe.bench.worker.Probe``), made in the worker:
CPU by thread group over the window, the buffer pool's allocations at its edges (none may
be made in a steady state), one real scrape of vidpipe's /metrics (the server is on under
load), where a frame's latency went in the window (vidpipe: capture to result against
submit to completion of its inference, from the daemon's own histograms), and an inference
ceiling's stage costs after it stopped."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from benchmarks.threads import thread_cpu_percent, thread_cpu_s
from vidpipe.bench.common import PointResult, cores
from vidpipe.quantiles import bucket_quantile

#: the daemon's histograms whose window quantiles a point reports (name -> info key)
_LATENCY_SPLIT = {
    "vidpipe_end_to_end_latency_seconds": "capture_to_result",
    "vidpipe_inference_latency_seconds": "inference",
}


class StudyProbe:
    def __init__(self) -> None:
        self._threads: dict[int, float] = {}
        self._t0 = 0.0
        self._alloc0: int | None = None
        self._latency0: dict[str, dict[float, float]] = {}

    def before(self, contender: Any) -> None:
        self._alloc0 = _allocations(contender)
        self._latency0 = _latency_buckets(contender)
        self._threads, self._t0 = thread_cpu_s(), time.monotonic()

    def after(self, contender: Any, result: PointResult) -> None:
        threads, window = thread_cpu_s(), time.monotonic() - self._t0
        result.info["thread_cpu_percent"] = thread_cpu_percent(self._threads, threads, window)
        alloc1 = _allocations(contender)
        if self._alloc0 is not None and alloc1 is not None:
            result.allocations = {"before": self._alloc0, "after": alloc1}
        daemon = getattr(contender, "daemon", None)  # vidpipe's contender
        if daemon is not None:
            result.info["metrics_scrape_ok"] = _scrape_ok(daemon.http_port)
            result.info["latency_split_ms"] = _latency_split(self._latency0, contender)

    def finish(self, contender: Any, result: PointResult) -> None:
        stage_costs = getattr(contender, "stage_costs", None)  # the ceiling's stage bound
        if stage_costs is None:
            return
        result.info["stages"] = stage_costs(result.cpu_ms_per_frame or 0.0)
        frames = result.frames
        wall_ms = 1000.0 * result.window_s * cores() / frames if frames else None
        result.info["infer_wall_ms_x_cores"] = wall_ms


def _scrape_ok(port: int | None) -> bool:
    """One real scrape of /metrics (outside the window) to prove the server is on."""
    if not port:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return b"vidpipe_frames_inferred_total" in resp.read()
    except OSError:
        return False


def _latency_buckets(contender: Any) -> dict[str, dict[float, float]]:
    """Cumulative buckets of ``_LATENCY_SPLIT``'s histograms, summed over their labels
    (cameras, models), from the daemon's registry; {} for another contender."""
    daemon = getattr(contender, "daemon", None)
    if daemon is None:
        return {}
    out: dict[str, dict[float, float]] = {name: {} for name in _LATENCY_SPLIT}
    for metric in daemon.metrics.registry.collect():
        for sample in metric.samples:
            base = sample.name.removesuffix("_bucket")
            if base == sample.name or base not in out:
                continue
            edge = float(sample.labels["le"])
            out[base][edge] = out[base].get(edge, 0.0) + sample.value
    return out


def _latency_split(
    before: dict[str, dict[float, float]], contender: Any
) -> dict[str, dict[str, float | None]]:
    """p50 and p95 (ms, a bucket's upper bound) of each histogram over the window: where the
    latency went when p95 fails (in the inference, or before it was submitted)."""
    after = _latency_buckets(contender)
    out: dict[str, dict[str, float | None]] = {}
    for name, key in _LATENCY_SPLIT.items():
        if name not in after:
            continue
        b0, b1 = before.get(name, {}), after[name]
        out[key] = {
            f"p{int(q * 100)}": None if (v := bucket_quantile(b0, b1, q)) is None else v * 1e3
            for q in (0.5, 0.95)
        }
    return out


def _allocations(contender: Any) -> int | None:
    """The buffer pool's allocations so far, for a contender that has one (vidpipe)."""
    allocations = getattr(contender, "allocations", None)
    return None if allocations is None else allocations()
