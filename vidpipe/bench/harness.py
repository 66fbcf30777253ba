"""The benchmark plan and its execution: suites, alternating repeats, one process per point.

Order of a run, per clip, with the contenders of ``benchmarks/`` registered::

    ceiling (repeat 0)                                    (references: once per clip)
    for each camera count N:
        repeat 0: vidpipe, naive, single, model_api      (registration order)
        repeat 1: model_api, single, naive, vidpipe      (reversed: linear drift cancels)
        ...
    ceiling (repeat 1) ...

The product registers the ``vidpipe`` contender only; ``benchmarks/`` registers the other
designs and vidpipe's variants (``common.register_contender``) and adds its analyses to the
run and the report (``register_extension``).

Each point is a fresh ``python -m vidpipe.bench.worker`` process, so no contender inherits
another's threads, caches or memory.
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
from vidpipe.bench.common import (
    FACTORY_ENV,
    SYS_PATH_ENV,
    PointSpec,
    cache_dir,
    clip_geometry,
    default_precision,
    resolve_clip,
)
from vidpipe.bench.meters import machine_info

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
    score_threshold: float = 0.3
    iou_threshold: float = 0.45
    mode: str = "throughput"  # throughput | density | both
    realtime: bool = False  # throughput mode: cameras paced at the clip's frame rate
    model: Path | None = None  # None: the assets' yolox_nano.onnx; or an IR (.xml), e.g. INT8
    density_clip: str = "car-detection.mp4"
    density_detect_fps: tuple[float, ...] | None = None  # None: the stream's rate, then 5
    # density cameras start at different points of the clip (False: all at its first frame)
    density_staggered: bool = True
    # density: run these camera counts only instead of searching (None: search 1..96)
    density_cameras: tuple[int, ...] | None = None


SUITES: dict[str, BenchOptions] = {
    "smoke": BenchOptions(
        suite="smoke",
        cameras=(1,),
        clips=("car-detection.mp4",),
        seconds=2.0,
        warmup_s=1.0,
        repeats=1,
    ),
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
        o = self.options
        return {
            "precision": self.precision,
            "model": str(self.model),
            "labels": str(self.labels),
            "score_threshold": o.score_threshold,
            "iou_threshold": o.iou_threshold,
            "extra": dict(self.extra),
        }


class Extension:
    """What ``benchmarks/`` adds to every run and report (``register_extension``): analyses
    of the points and the sections that show them. Each hook here does nothing."""

    #: contender -> its label in reports; the keys' order is the order of the report's rows
    labels: Mapping[str, str] = {}

    def prepare(self, ctx: RunContext, say: Progress) -> dict[str, Any]:
        """Runs before the first point; returns entries for every point's ``PointSpec.extra``."""
        return {}

    def analyse(self, doc: dict[str, Any]) -> None:
        """Adds to the result document what it derives from the points (also run again when
        a stored result is rendered anew)."""

    def header(self, doc: dict[str, Any]) -> list[str]:
        """Lines at the end of the report's header."""
        return []

    def clip_lines(self, doc: dict[str, Any], clip: str) -> list[str]:
        """Lines under a clip's throughput heading, before its table."""
        return []

    def sections(self, doc: dict[str, Any]) -> list[str]:
        """Sections after the throughput tables."""
        return []

    def write(self, doc: dict[str, Any], out_dir: Path, stem: str) -> dict[str, Path]:
        """Files written beside the JSON and the Markdown, by kind."""
        return {}


_EXTENSIONS: list[Extension] = []


def register_extension(extension: Extension) -> None:
    """Add ``extension`` to every later run and report; an extension of the same type is
    replaced (registering again reconfigures)."""
    _EXTENSIONS[:] = [e for e in _EXTENSIONS if type(e) is not type(extension)]
    _EXTENSIONS.append(extension)


def extensions() -> tuple[Extension, ...]:
    return tuple(_EXTENSIONS)


def prepare(options: BenchOptions) -> RunContext:
    """Resolve the assets, make derived clips, pick the precision.

    Raises:
        FileNotFoundError, RuntimeError: an asset or clip cannot be had.
    """
    from vidpipe.assets import default_assets_dir

    assets = options.assets or default_assets_dir()
    model = options.model or assets / "models" / "yolox_nano.onnx"
    if not model.is_file():
        raise FileNotFoundError(f"model not found: {model}")
    cache = cache_dir()
    names = list(options.clips) if options.mode != "density" else []
    if options.mode != "throughput" and options.density_clip not in names:
        names.append(options.density_clip)
    clips = {name: resolve_clip(name, assets / "videos", cache) for name in names}
    ctx = RunContext(
        options=options,
        model=model,
        labels=assets / "models" / "coco80.txt",
        precision=options.precision or default_precision(),
        clips=clips,
    )
    for name, path in clips.items():
        w, h, fps, frames = clip_geometry(path)
        ctx.clip_info[name] = {
            "path": str(path),
            "width": w,
            "height": h,
            "fps": fps,
            "frames": frames,
        }
    return ctx


def plan(ctx: RunContext) -> list[PointSpec]:
    """Every point of the run, in execution order (see the module docstring)."""
    o = ctx.options
    chosen = selected_contenders(o)
    pipelines = [c for c in common.pipelines() if c in chosen]
    refs = [c for c in common.references() if c in chosen]
    points: list[PointSpec] = []

    def spec(contender: str, clip: str, cameras: int, repeat: int) -> PointSpec:
        return PointSpec(
            contender=contender,
            clip=str(ctx.clips[clip]),
            clip_name=clip,
            cameras=cameras,
            seconds=o.seconds,
            warmup_s=o.warmup_s,
            repeat=repeat,
            realtime=o.realtime,
            **ctx.spec_fields(),
        )

    # references bracket each clip's block: the first half of their repeats before, the rest after
    before = range((o.repeats + 1) // 2)
    after = range((o.repeats + 1) // 2, o.repeats)
    for clip in o.clips:
        points += [spec(c, clip, 1, r) for r in before for c in refs]
        for n in o.cameras:
            for r in range(o.repeats):
                order = pipelines if r % 2 == 0 else list(reversed(pipelines))
                points += [spec(c, clip, n, r) for c in order]
        points += [spec(c, clip, 1, r) for r in after for c in refs]
    return points


def run_point(spec: PointSpec, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """Run one point in a fresh process; a crash or timeout becomes an ``error`` result."""
    tag = f"{spec.contender}-{Path(spec.clip_name).stem}-{spec.cameras}-{spec.repeat}"
    spec_file, out_file, log_file = (
        workdir / f"{tag}.{ext}" for ext in ("spec.json", "json", "log")
    )
    spec_file.write_text(json.dumps(spec.to_dict()))
    cmd = [sys.executable, "-m", "vidpipe.bench.worker", str(spec_file), str(out_file)]
    entry = common.contender(spec.contender)
    env = {**os.environ, FACTORY_ENV: entry.factory, SYS_PATH_ENV: entry.sys_path or ""}
    with log_file.open("w") as log:
        try:
            subprocess.run(
                cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False, env=env
            )
        except subprocess.TimeoutExpired:
            return {
                "spec": spec.to_dict(),
                "error": f"timed out after {timeout_s:.0f} s",
                "fps": 0.0,
            }
    if out_file.is_file():
        result: dict[str, Any] = json.loads(out_file.read_text())
        if result.get("error"):
            result["log_tail"] = log_file.read_text()[-1500:]
        return result
    return {
        "spec": spec.to_dict(),
        "fps": 0.0,
        "error": "worker wrote no result: " + log_file.read_text()[-1500:],
    }


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (contender, clip, cameras): medians over the repeats."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    # References are measured without cameras
    reference_names = set(common.references())
    for p in points:
        s = p["spec"]
        cams = 0 if s["contender"] in reference_names else s["cameras"]
        groups.setdefault((s["contender"], s["clip_name"], cams), []).append(p)
    rows = []
    for (contender, clip, cams), pts in groups.items():
        ok = [p for p in pts if not p.get("error")]
        allocs = [p["allocations"] for p in ok if p.get("allocations")]
        row: dict[str, Any] = {
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
            "allocations_grew": any(a["after"] != a["before"] for a in allocs) if allocs else None,
            "min_camera_fps": _median(min(p["per_camera_fps"]) for p in ok if p["per_camera_fps"]),
            "errors": [p["error"] for p in pts if p.get("error")],
        }
        per_thread = [p["info"].get("thread_cpu_percent", {}) for p in ok]
        names = sorted({g for t in per_thread for g in t})
        row["thread_cpu_percent"] = {g: _median(t.get(g, 0.0) for t in per_thread) for g in names}
        rows.append(row)
    return rows


def run(options: BenchOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Run the whole plan and return the result document (``report`` renders it)."""
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t_start = time.monotonic()
    ctx = prepare(options)
    specs, unavailable = _runnable_specs(ctx, options, say)
    machine = machine_info()
    say(
        f"vidpipe bench: {len(specs)} points, precision {ctx.precision}, "
        f"{machine['cpu_model']} x{machine['cores']}"
    )
    for extension in extensions():
        ctx.extra.update(extension.prepare(ctx, say))
    specs = [replace(s, extra=dict(ctx.extra)) for s in specs]
    timeout = options.warmup_s + options.seconds + 240
    with tempfile.TemporaryDirectory(prefix="vidpipe-bench-") as tmp:
        points = _run_points(specs, Path(tmp), timeout, say)
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
        "unavailable": unavailable,
        "summary": summarize(points),
        "points": points,
        "density": density,
        "wall_s": time.monotonic() - t_start,
    }
    for extension in extensions():
        extension.analyse(doc)
    return doc


def _runnable_specs(
    ctx: RunContext, options: BenchOptions, say: Progress
) -> tuple[list[PointSpec], dict[str, str]]:
    """The plan's points (none in density mode) less those of contenders this machine cannot
    run, and those contenders with the reason (each said once)."""
    specs = plan(ctx) if options.mode != "density" else []
    unavailable = unavailable_contenders({s.contender for s in specs})
    for name, reason in unavailable.items():
        say(f"{name} contender not run: {reason}")
    return [s for s in specs if s.contender not in unavailable], unavailable


def _run_points(
    specs: Sequence[PointSpec], tmp: Path, timeout_s: float, say: Progress
) -> list[dict[str, Any]]:
    """Run every point in order, one worker process each, saying one line per point."""
    points: list[dict[str, Any]] = []
    for i, spec in enumerate(specs, 1):
        result = run_point(spec, tmp, timeout_s)
        points.append(result)
        lat = result.get("latency_ms") or {}
        say(
            f"[{i}/{len(specs)}] {spec.contender:9s} {spec.clip_name} N={spec.cameras} "
            f"r{spec.repeat}: {result.get('fps', 0):.1f} fps, "
            f"cpu {result.get('cpu_percent', 0):.0f}% "
            f"(others {result.get('others_cpu_percent', 0):.0f}%), "
            f"p95 {lat.get('p95') or 0:.0f} ms"
            + (f"  ERROR {result['error']}" if result.get("error") else "")
        )
    return points


def selected_contenders(options: BenchOptions) -> tuple[str, ...]:
    """The contenders a run measures: ``options.contenders`` that are registered, or the
    registered defaults."""
    if options.contenders is None:
        return common.default_contenders()
    return tuple(c for c in options.contenders if c in common.all_contenders())


def unavailable_contenders(names: Iterable[str]) -> dict[str, str]:
    """Of ``names``, those that cannot run on this machine, with the reason."""
    out = {}
    for name in sorted(names):
        check = common.contender(name).unavailable
        if check is not None and (reason := check()):
            out[name] = reason
    return out


def with_overrides(base: BenchOptions, **changes: Any) -> BenchOptions:
    """``base`` with every change that is not None."""
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
