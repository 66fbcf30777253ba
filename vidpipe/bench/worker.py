"""Run ONE benchmark point in this process and write its result as JSON.

``python -m vidpipe.bench.worker SPEC.json RESULT.json``

The contender is built from its registered ``module:callable`` (``common.ContenderEntry``),
passed in the environment by the harness (``VIDPIPE_BENCH_FACTORY``, and
``VIDPIPE_BENCH_SYS_PATH`` for contenders outside the package, such as ``benchmarks/``).

The protocol is the same for every contender: build and start it (timed as ``startup_s``),
let it run ``warmup_s``, take a snapshot (frames, process CPU time, RSS, buffer-pool
allocations), sleep ``seconds``, take another, stop. fps and CPU% come from the difference
between the two snapshots only.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from vidpipe.bench.common import FACTORY_ENV, SYS_PATH_ENV, PointResult, PointSpec
from vidpipe.bench.meters import Snapshot, cores, loadavg_1m, thread_cpu_percent, thread_cpu_s
from vidpipe.quantiles import quantile

log = logging.getLogger("vidpipe.bench.worker")

_MB = 1024.0 * 1024.0
READY_TIMEOUT_S = 30.0


class Contender(Protocol):
    """What the worker needs from a contender."""

    name: str
    precision: str
    errors: list[str]

    def start(self) -> None: ...
    def frames(self) -> int: ...
    def per_camera(self) -> list[int]: ...
    def latencies_ms(self, t0: float, t1: float, t0_wall: float, t1_wall: float) -> list[float]: ...
    def allocations(self) -> int | None: ...
    def info(self) -> dict[str, Any]: ...
    def stop(self, timeout_s: float = 10.0) -> None: ...


def make_contender(spec: PointSpec, factory: str, sys_path: str | None = None) -> Contender:
    """Build the contender of ``spec`` with ``factory`` (``"module:callable"``).

    Args:
        spec: the point.
        factory: the contender's registered factory (``ContenderEntry.factory``).
        sys_path: a directory to put on ``sys.path`` first (``ContenderEntry.sys_path``).
    """
    if sys_path and sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    module, _, attr = factory.partition(":")
    build: Callable[[PointSpec], Contender] = getattr(importlib.import_module(module), attr)
    return build(spec)


def _wait_ready(contender: Contender, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every camera delivers (RTSP cameras connect one by one) before warming up."""
    ready = getattr(contender, "ready", None)
    if ready is None:
        return
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.1)


def _window_rate(n0: int, n1: int, window_s: float) -> float:
    return (n1 - n0) / window_s if window_s > 0 else 0.0


def measure(spec: PointSpec, factory: str, sys_path: str | None = None) -> PointResult:
    """Run the point and return its result (errors are recorded, not raised)."""
    result = PointResult(spec=spec.to_dict(), loadavg_start=loadavg_1m())
    t_build = time.monotonic()
    contender = make_contender(spec, factory, sys_path)
    try:
        contender.start()
        _wait_ready(contender)
        result.startup_s = time.monotonic() - t_build
        time.sleep(spec.warmup_s)
        counters = getattr(contender, "camera_counters", None)
        cams0 = contender.per_camera()
        alloc0 = contender.allocations()
        counters0 = counters() if counters else None
        threads0 = thread_cpu_s()
        s0 = Snapshot.take(contender.frames())
        time.sleep(spec.seconds)
        s1 = Snapshot.take(contender.frames())
        threads1 = thread_cpu_s()
        counters1 = counters() if counters else None
        cams1 = contender.per_camera()
        alloc1 = contender.allocations()
        result.info = contender.info()
        result.info["thread_cpu_percent"] = thread_cpu_percent(
            threads0, threads1, s1.t_mono - s0.t_mono
        )
        if counters0 is not None:
            result.info["camera_counters"] = {"before": counters0, "after": counters1}
    finally:
        contender.stop()
    window = s1.t_mono - s0.t_mono
    cpu = s1.cpu_s - s0.cpu_s
    frames = s1.frames - s0.frames
    result.window_s = window
    result.frames = frames
    result.fps = _window_rate(s0.frames, s1.frames, window)
    result.cpu_percent = 100.0 * cpu / window / cores() if window > 0 else 0.0
    others = max(0.0, (s1.machine_busy_s - s0.machine_busy_s) - cpu)
    result.others_cpu_percent = 100.0 * others / window / cores() if window > 0 else 0.0
    result.cpu_ms_per_frame = 1000.0 * cpu / frames if frames else None
    result.per_camera_fps = [_window_rate(a, b, window) for a, b in zip(cams0, cams1, strict=True)]
    result.rss_mb = {"start": s0.rss / _MB, "end": s1.rss / _MB}
    if alloc0 is not None and alloc1 is not None:
        result.allocations = {"before": alloc0, "after": alloc1}
    lat = contender.latencies_ms(s0.t_mono, s1.t_mono, s0.t_wall, s1.t_wall)
    result.latency_ms = {"p50": quantile(lat, 0.50), "p95": quantile(lat, 0.95), "n": len(lat)}
    result.precision = contender.precision
    stage_costs = getattr(contender, "stage_costs", None)  # a reference: the stage bound
    if stage_costs is not None:
        result.info["stages"] = stage_costs(result.cpu_ms_per_frame or 0.0)
        result.info["infer_wall_ms_x_cores"] = (
            1000.0 * window * cores() / frames if frames else None
        )
    if contender.errors:
        result.error = "; ".join(contender.errors[:5])
    close = getattr(contender, "close", None)
    if close is not None:
        close()
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m vidpipe.bench.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec = PointSpec.from_dict(json.loads(Path(args[0]).read_text()))
    factory = os.environ.get(FACTORY_ENV, "")
    try:
        if not factory:
            raise ValueError(f"{FACTORY_ENV} is not set (the harness sets it)")
        result = measure(spec, factory, os.environ.get(SYS_PATH_ENV) or None)
    except Exception as exc:  # the harness records the failure and goes on
        log.exception("point %s failed", spec.contender)
        result = PointResult(spec=spec.to_dict(), error=f"{type(exc).__name__}: {exc}")
    Path(args[1]).write_text(json.dumps(result.to_dict(), indent=1))
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
