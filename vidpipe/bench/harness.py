"""The plan of a run and its execution, one fresh ``python -m vidpipe.bench.worker`` process
per point, so that no point inherits another's threads, caches or memory.

The product registers the ``vidpipe`` contender only. ``benchmarks/`` registers the other
designs and vidpipe's variants (``common.register_contender``) and extends every run through
an ``Extension``: the order of the points (alternated repeats, the inference ceiling around
each clip), its analyses of the points, its report sections and the plot.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vidpipe.bench import common
from vidpipe.bench.common import PointSpec

SCHEMA = 1

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    """Everything a run needs; ``SUITES`` gives the defaults."""

    suite: str = "full"
    #: None: every registered default contender (``common.default_contenders()``).
    contenders: tuple[str, ...] | None = None
    cameras: tuple[int, ...] = (1, 4, 8)
    clips: tuple[str, ...] = (
        "car-detection.mp4",
        "car-detection-1080p.mp4",
        "bottle-detection.mp4",
    )
    seconds: float = 5.0
    warmup_s: float = 2.0
    repeats: int = 2
    precision: str | None = None
    assets: Path | None = None
    mode: str = "throughput"  # throughput | density | both
    realtime: bool = False  # throughput mode: cameras paced at the clip's frame rate
    model: Path | None = None  # None: the assets' yolox_nano.onnx; or an IR (.xml), e.g. INT8
    density_clip: str = "car-detection.mp4"
    density_detect_fps: tuple[float, ...] | None = None  # None: the stream's rate, then 5
    # density cameras start at different points of the clip (False: all at its first frame)
    density_staggered: bool = True
    # density: run these camera counts only instead of searching (None: search 1..96)
    density_cameras: tuple[int, ...] | None = None
    # density: those counts ascending, each once (False: in the order given, repeats kept)
    density_ascending: bool = True
    # density: a sub-stream clip served beside the main one, for dual-stream contenders
    density_sub_clip: str | None = None
    # density: every search this many times, the contenders' order alternating (ABBA)
    density_repeats: int = 1


SUITES: dict[str, BenchOptions] = {
    "smoke": BenchOptions("smoke", None, (1,), ("car-detection.mp4",), 2.0, 1.0, 1),
    "full": BenchOptions(),
}


@dataclass
class RunContext:
    """Resolved paths and facts shared by every point of a run."""

    options: BenchOptions
    model: Path
    labels: Path
    precision: str
    clips: dict[str, Path]
    clip_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``PointSpec.extra`` of every point (``Extension.prepare``)
    extra: dict[str, Any] = field(default_factory=dict)

    def spec_fields(self) -> dict[str, Any]:
        """The ``PointSpec`` fields every point of the run shares (model, precision, ...)."""
        return {
            "precision": self.precision,
            "model": str(self.model),
            "labels": str(self.labels),
            "extra": dict(self.extra),
        }


class Extension:
    """What ``benchmarks/`` adds to every run and report (``register_extension``); each hook
    here leaves the run as it is."""

    #: contender -> its label in reports; the keys' order is the order of the report's rows
    labels: Mapping[str, str] = {}
    #: ``module:callable`` of meters made in every point's worker (``worker.Probe``), and the
    #: directory to import them from
    probes: tuple[str, ...] = ()
    probe_path: str | None = None

    def plan(self, ctx: RunContext, points: list[PointSpec], say: Progress) -> list[PointSpec]:
        """The points to run, in order, given the product's plan."""
        return points

    def prepare(self, ctx: RunContext, say: Progress) -> dict[str, Any]:
        """Runs before the first point; returns entries for every point's ``PointSpec.extra``."""
        return {}

    def analyse(self, doc: dict[str, Any]) -> None:
        """Adds what it derives from the points to the result document (run again when a
        stored result is rendered anew)."""

    def sections(self, doc: dict[str, Any]) -> list[str]:
        """Sections after the throughput tables."""
        return []

    def write(self, doc: dict[str, Any], out_dir: Path, stem: str) -> dict[str, Path]:
        """Files written beside the JSON and the Markdown, by kind."""
        return {}


_EXTENSIONS: list[Extension] = []


def register_extension(extension: Extension) -> None:
    """Add ``extension`` to every later run and report; one of the same type is replaced
    (registering again reconfigures)."""
    _EXTENSIONS[:] = [e for e in _EXTENSIONS if type(e) is not type(extension)]
    _EXTENSIONS.append(extension)


def extensions() -> tuple[Extension, ...]:
    return tuple(_EXTENSIONS)


def prepare(options: BenchOptions) -> RunContext:
    """Resolve the assets, make derived clips, pick the precision (FileNotFoundError or
    RuntimeError: an asset or clip cannot be had)."""
    from vidpipe.assets import default_assets_dir

    assets = options.assets or default_assets_dir()
    model = options.model or assets / "models" / "yolox_nano.onnx"
    if not model.is_file():
        raise FileNotFoundError(f"model not found: {model}")
    names = list(options.clips) if options.mode != "density" else []
    if options.mode != "throughput":
        density = [options.density_clip, options.density_sub_clip]
        names += [n for n in density if n is not None and n not in names]
    cache = common.cache_dir()
    clips = {name: common.resolve_clip(name, assets / "videos", cache) for name in names}
    precision = options.precision or common.default_precision()
    ctx = RunContext(options, model, assets / "models" / "coco80.txt", precision, clips)
    for name, path in clips.items():
        geometry = zip(
            ("width", "height", "fps", "frames"), common.clip_geometry(path), strict=True
        )
        ctx.clip_info[name] = {"path": str(path), **dict(geometry)}
    return ctx


def spec_of(ctx: RunContext, contender: str, clip: str, cameras: int, repeat: int) -> PointSpec:
    """The point of ``contender`` on ``clip`` with ``cameras`` cameras in this run."""
    o = ctx.options
    return PointSpec(contender, str(ctx.clips[clip]), clip, cameras, o.seconds, o.warmup_s,
                     repeat=repeat, realtime=o.realtime, **ctx.spec_fields())  # fmt: skip


def plan(ctx: RunContext, say: Progress) -> list[PointSpec]:
    """Every point of a throughput run, in execution order: per clip, camera count and repeat,
    each contender; then as the extensions reorder it."""
    o = ctx.options
    contenders = selected_contenders(o)
    points = [
        spec_of(ctx, c, clip, n, r)
        for clip in o.clips
        for n in o.cameras
        for r in range(o.repeats)
        for c in contenders
    ]
    for extension in extensions():
        points = extension.plan(ctx, points, say)
    return points


def run_point(spec: PointSpec, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """Run one point in a fresh process; a crash or timeout becomes an ``error`` result."""
    tag = f"{spec.contender}-{Path(spec.clip_name).stem}-{spec.cameras}-{spec.repeat}"
    spec_file, out_file, log_file = (workdir / f"{tag}.{x}" for x in ("spec.json", "json", "log"))
    spec_file.write_text(json.dumps(spec.to_dict()))
    cmd = [sys.executable, "-m", "vidpipe.bench.worker", str(spec_file), str(out_file)]
    entry = common.contender(spec.contender)
    env = dict(os.environ)
    env[common.FACTORY_ENV], env[common.SYS_PATH_ENV] = entry.factory, entry.sys_path or ""
    env[common.PROBES_ENV] = ",".join(p for e in extensions() for p in e.probes)
    env[common.PROBE_PATH_ENV] = next((e.probe_path for e in extensions() if e.probe_path), "")
    failed = {"spec": spec.to_dict(), "fps": 0.0}
    with log_file.open("w") as log:
        try:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s,
                           check=False, env=env)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {**failed, "error": f"timed out after {timeout_s:.0f} s"}
    if not out_file.is_file():
        return {**failed, "error": "worker wrote no result: " + log_file.read_text()[-1500:]}
    result: dict[str, Any] = json.loads(out_file.read_text())
    if result.get("error"):
        result["log_tail"] = log_file.read_text()[-1500:]
    return result


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (contender, clip, cameras): medians over the repeats."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for p in points:
        s = p["spec"]
        groups.setdefault((s["contender"], s["clip_name"], s["cameras"]), []).append(p)
    rows = []
    for (contender, clip, cams), pts in groups.items():
        ok = [p for p in pts if not p.get("error")]
        rows.append({
            "contender": contender,
            "clip": clip,
            "cameras": cams,
            "fps": _median(p["fps"] for p in ok),
            "fps_repeats": [round(p["fps"], 2) for p in ok],
            "cpu_percent": _median(p["cpu_percent"] for p in ok),
            "cpu_ms_per_frame": _median(p.get("cpu_ms_per_frame") for p in ok),
            "others_cpu_percent": max((p.get("others_cpu_percent", 0.0) for p in ok), default=None),
            "latency_p50_ms": _median(p["latency_ms"].get("p50") for p in ok),
            "latency_p95_ms": _median(p["latency_ms"].get("p95") for p in ok),
            "precision": ",".join(sorted({p["precision"] for p in ok})) or None,
            "rss_mb_start": _median(p["rss_mb"].get("start") for p in ok),
            "rss_mb_end": _median(p["rss_mb"].get("end") for p in ok),
            "min_camera_fps": _median(min(p["per_camera_fps"]) for p in ok if p["per_camera_fps"]),
            "errors": [p["error"] for p in pts if p.get("error")],
        })  # fmt: skip
    return rows


def run(options: BenchOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Run the whole plan and return the result document (``report`` renders it)."""
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t_start = time.monotonic()
    ctx = prepare(options)
    machine = common.machine_info()
    for extension in extensions():
        ctx.extra.update(extension.prepare(ctx, say))
    specs = plan(ctx, say) if options.mode != "density" else []
    cpu = f"{machine['cpu_model']} x{machine['cores']}"
    say(f"vidpipe bench: {len(specs)} points, precision {ctx.precision}, {cpu}")
    timeout = options.warmup_s + options.seconds + 240
    with tempfile.TemporaryDirectory(prefix="vidpipe-bench-") as tmp:
        points = [_run_point(i, specs, Path(tmp), timeout, say) for i in range(len(specs))]
        density = None
        if options.mode != "throughput":
            from vidpipe.bench.density import run_density

            density = run_density(ctx, options.density_clip, run_point, say)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": ["vidpipe", "bench", *sys.argv[2:]] if sys.argv[1:2] == ["bench"] else sys.argv,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
        "machine": machine,
        "precision": ctx.precision,
        "clips": ctx.clip_info,
        "model": str(ctx.model),
        "summary": summarize(points),
        "points": points,
        "density": density,
        "wall_s": time.monotonic() - t_start,
    }
    for extension in extensions():
        extension.analyse(doc)
    return doc


def _run_point(
    i: int, specs: Sequence[PointSpec], tmp: Path, timeout_s: float, say: Progress
) -> dict[str, Any]:
    """Run point ``i`` of the plan in a worker process and say how it went in one line."""
    spec = specs[i]
    result = run_point(spec, tmp, timeout_s)
    p95 = (result.get("latency_ms") or {}).get("p95") or 0
    error = f"  ERROR {result['error']}" if result.get("error") else ""
    say(
        f"[{i + 1}/{len(specs)}] {spec.contender:9s} {spec.clip_name} N={spec.cameras} "
        f"r{spec.repeat}: {result.get('fps', 0):.1f} fps, cpu {result.get('cpu_percent', 0):.0f}% "
        f"(others {result.get('others_cpu_percent', 0):.0f}%), p95 {p95:.0f} ms{error}"
    )
    return result


def selected_contenders(options: BenchOptions) -> tuple[str, ...]:
    """The contenders a run measures: ``options.contenders`` that are registered, or the
    registered defaults."""
    if options.contenders is None:
        return common.default_contenders()
    return tuple(c for c in options.contenders if c in common.all_contenders())


def with_overrides(base: BenchOptions, **changes: Any) -> BenchOptions:
    """``base`` with every change that is not None."""
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
