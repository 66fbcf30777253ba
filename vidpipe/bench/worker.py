"""Run ONE benchmark point in this process and write its result as JSON.

``python -m vidpipe.bench.worker SPEC.json RESULT.json``

The contender is built from its registered ``module:callable`` (``common.ContenderEntry``),
named in the environment by the harness (``VIDPIPE_BENCH_FACTORY``, and
``VIDPIPE_BENCH_SYS_PATH`` for contenders outside the package, such as ``benchmarks/``), and
so are the probes the harness's extensions add to every point (``VIDPIPE_BENCH_PROBES``).
Build and start the contender (``startup_s``), let it run ``warmup_s``, take a snapshot
(frames, CPU time, RSS), sleep ``seconds``, take another, stop: fps and CPU % come from the
difference between the two snapshots only.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from vidpipe.bench import common
from vidpipe.bench.common import PointResult, PointSpec, Snapshot, cores
from vidpipe.quantiles import quantile

log = logging.getLogger("vidpipe.bench.worker")

_MB = 1024.0 * 1024.0


class Contender(Protocol):
    """What the worker needs from a contender."""

    name: str
    precision: str
    errors: list[str]

    def start(self) -> None: ...
    def frames(self) -> int: ...
    def per_camera(self) -> list[int]: ...
    def latencies_ms(self, t0: float, t1: float, t0_wall: float, t1_wall: float) -> list[float]: ...
    def info(self) -> dict[str, Any]: ...
    def stop(self, timeout_s: float = 10.0) -> None: ...


class Probe(Protocol):
    """A meter an extension adds to every point (``harness.Extension.probes``)."""

    def before(self, contender: Any) -> None: ...  # at the window's start
    def after(self, contender: Any, result: PointResult) -> None: ...  # at its end, running
    def finish(self, contender: Any, result: PointResult) -> None: ...  # stopped, result made


def load(factory: str, sys_path: str | None = None) -> Any:
    """``module:callable`` imported, with ``sys_path`` first on ``sys.path`` when given."""
    if sys_path and sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_contender(spec: PointSpec, factory: str, sys_path: str | None = None) -> Contender:
    """Build the contender of ``spec`` with its registered ``factory`` (``ContenderEntry``)."""
    return load(factory, sys_path)(spec)


def _wait_ready(contender: Contender, timeout_s: float = 30.0) -> None:
    """Wait until every camera delivers (RTSP cameras connect one by one) before warming up."""
    ready = getattr(contender, "ready", None)
    deadline = time.monotonic() + timeout_s
    while ready is not None and not ready() and time.monotonic() < deadline:
        time.sleep(0.1)


def _rate(n0: float, n1: float, window_s: float) -> float:
    return (n1 - n0) / window_s if window_s > 0 else 0.0


def measure(
    spec: PointSpec, contender: Contender, probes: list[Probe], result: PointResult
) -> None:
    """Run the point's window and fill ``result`` (the contender is stopped on the way out)."""
    t_build = time.monotonic()
    try:
        contender.start()
        _wait_ready(contender)
        result.startup_s = time.monotonic() - t_build
        time.sleep(spec.warmup_s)
        counters = getattr(contender, "camera_counters", None)
        cams0, counters0 = contender.per_camera(), counters() if counters else None
        for probe in probes:
            probe.before(contender)
        s0 = Snapshot.take(contender.frames())
        time.sleep(spec.seconds)
        s1 = Snapshot.take(contender.frames())
        result.info = contender.info()
        for probe in probes:
            probe.after(contender, result)
        if counters is not None:
            result.info["camera_counters"] = {"before": counters0, "after": counters()}
        cams1 = contender.per_camera()
    finally:
        contender.stop()
    window, cpu = s1.t_mono - s0.t_mono, s1.cpu_s - s0.cpu_s
    result.window_s, result.frames = window, s1.frames - s0.frames
    result.fps = _rate(s0.frames, s1.frames, window)
    result.cpu_percent = _rate(0.0, 100.0 * cpu / cores(), window)
    others = max(0.0, (s1.machine_busy_s - s0.machine_busy_s) - cpu)
    result.others_cpu_percent = _rate(0.0, 100.0 * others / cores(), window)
    result.cpu_ms_per_frame = 1000.0 * cpu / result.frames if result.frames else None
    result.per_camera_fps = [_rate(a, b, window) for a, b in zip(cams0, cams1, strict=True)]
    result.rss_mb = {"start": s0.rss / _MB, "end": s1.rss / _MB}
    lat = contender.latencies_ms(s0.t_mono, s1.t_mono, s0.t_wall, s1.t_wall)
    result.latency_ms = {"p50": quantile(lat, 0.50), "p95": quantile(lat, 0.95), "n": len(lat)}
    result.precision = contender.precision
    for probe in probes:
        probe.finish(contender, result)
    if contender.errors:
        result.error = "; ".join(contender.errors[:5])
    getattr(contender, "close", lambda: None)()


def run(spec: PointSpec) -> PointResult:
    """Build the contender and the probes the environment names, and measure the point."""
    factory = os.environ.get(common.FACTORY_ENV, "")
    if not factory:
        raise ValueError(f"{common.FACTORY_ENV} is not set (the harness sets it)")
    probe_path = os.environ.get(common.PROBE_PATH_ENV) or None
    names = [n for n in os.environ.get(common.PROBES_ENV, "").split(",") if n]
    probes: list[Probe] = [load(name, probe_path)() for name in names]
    result = PointResult(spec=spec.to_dict(), loadavg_start=common.loadavg_1m())
    measure(
        spec, make_contender(spec, factory, os.environ.get(common.SYS_PATH_ENV)), probes, result
    )
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m vidpipe.bench.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec = PointSpec.from_dict(json.loads(Path(args[0]).read_text()))
    try:
        result = run(spec)
    except Exception as exc:  # the harness records the failure and goes on
        log.exception("point %s failed", spec.contender)
        result = PointResult(spec=spec.to_dict(), error=f"{type(exc).__name__}: {exc}")
    Path(args[1]).write_text(json.dumps(result.to_dict(), indent=1))
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
