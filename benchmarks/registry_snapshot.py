"""What reading the daemon's counters costs the measured process, as the GPU daemon bench
reads them at both edges of its window: one ``get_sample_value`` per camera and counter
(each one collects the whole registry) against one pass (``gpu_daemon._snapshot``).

Usage: ``python -m benchmarks.registry_snapshot [--cameras 40,120] [--repeats 3]``. The
registry is the daemon's own (``vidpipe.metrics.Metrics``) with a series per camera in every
per-camera metric; the GIL is held for the whole read either way, so the time is how long
every camera thread of the daemon waits.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from benchmarks.gpu_daemon import _snapshot
from vidpipe.metrics import Metrics


def daemon_registry(cameras: int) -> Any:
    """The daemon's registry with a child per camera in each metric labelled by camera."""
    metrics = Metrics()
    for metric in vars(metrics).values():
        names = getattr(metric, "_labelnames", ())
        if "camera" not in names:
            continue
        for i in range(cameras):
            metric.labels(**{n: f"cam{i}" if n == "camera" else "x" for n in names})
    return metrics.registry


def per_camera_reads(registry: Any, cameras: list[str]) -> None:
    """The bench before: two lookups per camera, four totals, one pass for the buckets."""
    for name in cameras:
        labels = {"camera": name}
        registry.get_sample_value("vidpipe_frames_captured_total", labels)
        registry.get_sample_value("vidpipe_frames_inferred_total", labels)
    for name in ("vidpipe_batch_size_count", "vidpipe_batch_size_sum"):
        registry.get_sample_value(name)
    for name in ("sum", "count"):
        registry.get_sample_value(f"vidpipe_inference_latency_seconds_{name}")
    for metric in registry.collect():
        for _ in metric.samples:
            pass


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cameras", default="40,120")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    for n in (int(c) for c in args.cameras.split(",")):
        registry = daemon_registry(n)
        names = [f"cam{i}" for i in range(n)]
        row: dict[str, Any] = {"cameras": n}
        for name, read in (("per_camera_ms", per_camera_reads), ("one_pass_ms", _snapshot)):
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                read(registry, names)
                times.append(1000 * (time.perf_counter() - t0))
            row[name] = round(sorted(times)[len(times) // 2], 1)
        row["ratio"] = round(row["per_camera_ms"] / row["one_pass_ms"], 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
