"""What ``python -m benchmarks`` adds to every run of ``vidpipe bench`` and to its report:
the comparison with the other designs (the target ratios), the ceiling's stage costs, the
variants' paired ratios, vidpipe's steady state, OpenVINO's ``benchmark_app`` as a
cross-check, and the plot (``Study``, a ``vidpipe.bench.harness.Extension``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.plot import plot, plot_unavailable
from benchmarks.variants import LABELS as VARIANT_LABELS
from benchmarks.variants import markdown as variants_markdown
from benchmarks.variants import variant_ratios
from vidpipe.bench.common import PointSpec, all_contenders, cache_dir
from vidpipe.bench.harness import Extension, Progress, RunContext, spec_of
from vidpipe.bench.report import measured_clips

#: (name, the denominator, threshold, camera counts, clip heights it applies to or None = all)
TARGETS: tuple[tuple[str, str, float, tuple[int, ...], tuple[int, ...] | None], ...] = (
    ("vidpipe / stage bound", "stage_bound", 0.90, (4, 8), (432, 1080)),
    ("vidpipe / naive", "naive", 1.10, (4, 8), None),
    ("vidpipe / single-detector", "single", 1.10, (4, 8), None),
    ("vidpipe / model_api", "model_api", 1.30, (4,), None),
)


#: contenders measured once per clip, without cameras (the inference ceiling and the stage
#: costs): half their repeats before the clip's block of points, half after
REFERENCES = ("ceiling",)


def _model_api_unavailable() -> str | None:
    from benchmarks.contenders import model_api_unavailable

    return model_api_unavailable()


#: contender -> why it cannot run on this machine (None: it can)
UNAVAILABLE: dict[str, Callable[[], str | None]] = {"model_api": _model_api_unavailable}

LABELS = {
    "ceiling": "ceiling (inference only)",
    "naive": "naive (thread per camera, sync infer)",
    "single": "single-detector (Frigate design)",
    "model_api": "model_api AsyncPipeline",
    "vidpipe": "vidpipe daemon",
    **VARIANT_LABELS,
}


@dataclass
class Study(Extension):
    """The design study's part of a run (``register_extension``).

    Attributes:
        int8_model: the INT8 IR the INT8 variants run (``--int8-model``).
        stage_frames: frames timed per stage by the ceiling (``--stage-frames``).
        benchmark_app: run OpenVINO's ``benchmark_app`` before the points.
        frame_waits: time where each frame waits before its inference
            (``benchmarks.frame_waits``, ``--frame-waits``).
    """

    int8_model: Path | None = None
    stage_frames: int = 300
    benchmark_app: bool = False
    frame_waits: bool = False
    labels = LABELS
    probes: tuple[str, ...] = ("benchmarks.probes:StudyProbe",)
    probe_path = str(Path(__file__).resolve().parent.parent)

    def __post_init__(self) -> None:
        if self.frame_waits:
            self.probes = (*self.probes, "benchmarks.frame_waits:FrameWaitsProbe")
        self._benchmark_app: dict[str, Any] | None = None
        self._unavailable: dict[str, str] = {}

    def plan(self, ctx: RunContext, points: list[PointSpec], say: Progress) -> list[PointSpec]:
        """Repeats alternated (the contenders' order reversed every other repeat: a linear
        drift of the machine cancels), the references around each clip's block, and the
        contenders this machine cannot run left out (each said once)."""
        chosen = {p.contender for p in points}
        for name in sorted(chosen):
            check = UNAVAILABLE.get(name)
            if check is not None and (reason := check()):
                self._unavailable[name] = reason
                say(f"{name} contender not run: {reason}")
        runnable = [c for c in all_contenders() if c in chosen and c not in self._unavailable]
        refs = [c for c in runnable if c in REFERENCES]
        pipelines = [c for c in runnable if c not in REFERENCES]
        o = ctx.options
        half = (o.repeats + 1) // 2
        out: list[PointSpec] = []
        for clip in o.clips:
            out += [spec_of(ctx, c, clip, 0, r) for r in range(half) for c in refs]
            for n in o.cameras:
                for r in range(o.repeats):
                    order = pipelines if r % 2 == 0 else pipelines[::-1]
                    out += [spec_of(ctx, c, clip, n, r) for c in order]
            out += [spec_of(ctx, c, clip, 0, r) for r in range(half, o.repeats) for c in refs]
        return out

    def prepare(self, ctx: RunContext, say: Progress) -> dict[str, Any]:
        from benchmarks.contenders import ensure_ir

        if self.int8_model is not None and not self.int8_model.is_file():
            raise FileNotFoundError(f"model not found: {self.int8_model}")
        if self.benchmark_app and ctx.options.mode != "density":
            from benchmarks.benchmark_app import run_benchmark_app

            seconds = max(5.0, ctx.options.seconds)
            self._benchmark_app = run_benchmark_app(str(ctx.model), ctx.precision, seconds)
            say(
                f"benchmark_app: {self._benchmark_app['fps']} fps "
                f"{self._benchmark_app['error'] or ''}"
            )
        return {
            "model_ir": str(ensure_ir(ctx.model, cache_dir())),
            "int8_model": None if self.int8_model is None else str(self.int8_model),
            "stage_frames": self.stage_frames,
        }

    def analyse(self, doc: dict[str, Any]) -> None:
        doc["machine"].setdefault("openvino_model_api", _model_api_version())
        doc.setdefault("benchmark_app", self._benchmark_app)
        if "unavailable" not in doc:
            status = doc.get("model_api_status")  # the key of results stored before
            legacy = {} if status == "ok" else {"model_api": status}
            doc["unavailable"] = self._unavailable if status is None else legacy
        _steady_state_rows(doc)
        doc["references"] = references(doc)
        doc["targets"] = targets(doc)
        doc["variants"] = variant_ratios(doc)

    def sections(self, doc: dict[str, Any]) -> list[str]:
        return [
            *_notes(doc),
            *_stage_table(doc),
            *_targets_table(doc),
            *variants_markdown(doc),
            *_steady_state(doc),
        ]

    def write(self, doc: dict[str, Any], out_dir: Path, stem: str) -> dict[str, Path]:
        if plot_unavailable() is not None or not measured_clips(doc):
            return {}
        path = out_dir / f"{stem}.png"
        plot(doc, path, LABELS)
        return {"png": path}


def _notes(doc: dict[str, Any]) -> list[str]:
    """The contenders not run, and OpenVINO's benchmark_app as a cross-check."""
    lines = [f"- {name} not run: {why}" for name, why in (doc.get("unavailable") or {}).items()]
    bench_app = doc.get("benchmark_app")
    if bench_app:
        error = f" ({bench_app['error']})" if bench_app.get("error") else ""
        lines.append(
            "- benchmark_app cross-check (THROUGHPUT, random input): "
            f"{_f(bench_app.get('fps'))} fps{error}"
        )
    return [*lines, ""] if lines else []


def references(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per clip: the ceiling fps, the stage costs (medians over the repeats) and the stage
    bound."""
    out: dict[str, dict[str, Any]] = {}
    for r in doc["summary"]:
        if r["contender"] != "ceiling":
            continue
        stages = [
            p["info"]["stages"]
            for p in doc["points"]
            if p["spec"]["contender"] == "ceiling"
            and p["spec"]["clip_name"] == r["clip"]
            and not p.get("error")
            and "stages" in p.get("info", {})
        ]
        if stages:
            median = {k: _median(s[k] for s in stages) for k in stages[0]}
            out[r["clip"]] = {
                "ceiling_fps": r["fps"],
                "stage_bound_fps": median.get("stage_bound_fps"),
                "stages": median,
            }
    return out


def _model_api_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("openvino-model-api")
    except Exception:  # absent or broken metadata: recorded as not installed
        return None


def _steady_state_rows(doc: dict[str, Any]) -> None:
    """Adds to every summary row whether the buffer pool allocated in the window, and the
    CPU by thread group (medians over the repeats), from the probes' records."""
    for row in doc["summary"]:
        key = (row["contender"], row["clip"], row["cameras"])
        ok = [
            p
            for p in doc["points"]
            if (p["spec"]["contender"], p["spec"]["clip_name"], p["spec"]["cameras"]) == key
            and not p.get("error")
        ]
        allocs = [p["allocations"] for p in ok if p.get("allocations")]
        row["allocations_grew"] = any(a["after"] != a["before"] for a in allocs) if allocs else None
        per_thread = [p.get("info", {}).get("thread_cpu_percent", {}) for p in ok]
        groups = sorted({g for t in per_thread for g in t})
        row["thread_cpu_percent"] = {g: _median(t.get(g, 0.0) for t in per_thread) for g in groups}


def _median(values: Any) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _row(doc: dict[str, Any], contender: str, clip: str, cameras: int) -> dict[str, Any] | None:
    key = (contender, clip, cameras)
    return next(
        (r for r in doc["summary"] if (r["contender"], r["clip"], r["cameras"]) == key), None
    )


def ratios(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """vidpipe's fps divided by every other design's, per clip and camera count."""
    out = []
    clips = list(doc["clips"])
    cams = sorted({r["cameras"] for r in doc["summary"] if r["cameras"]})
    for clip in clips:
        ref = doc.get("references", {}).get(clip, {})
        for n in cams:
            mine = _row(doc, "vidpipe", clip, n)
            if not mine or not mine["fps"]:
                continue
            entry: dict[str, Any] = {"clip": clip, "cameras": n, "vidpipe_fps": mine["fps"]}
            if ref.get("stage_bound_fps"):
                entry["stage_bound"] = mine["fps"] / ref["stage_bound_fps"]
            if ref.get("ceiling_fps"):
                entry["ceiling"] = mine["fps"] / ref["ceiling_fps"]
            for other in ("naive", "single", "model_api"):
                row = _row(doc, other, clip, n)
                if row and row["fps"]:
                    entry[other] = mine["fps"] / row["fps"]
            out.append(entry)
    return out


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target that applies, its ratio and whether it holds (none with ``--realtime``)."""
    out: list[dict[str, Any]] = []
    for r in [] if doc["options"].get("realtime") else ratios(doc):
        height = doc["clips"][r["clip"]]["height"]
        for name, key, threshold, cams, heights in TARGETS:
            if r["cameras"] not in cams or (heights is not None and height not in heights):
                continue
            value = r.get(key)
            # what a pipeline running exactly at the stage bound would score on this target
            best = None
            if key != "stage_bound" and value is not None and r.get("stage_bound"):
                best = value / r["stage_bound"]
            out.append(
                {
                    "target": name,
                    "clip": r["clip"],
                    "cameras": r["cameras"],
                    "ratio": value,
                    "threshold": threshold,
                    "holds": None if value is None else value >= threshold,
                    "best_possible": best,
                }
            )
    return out


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _stage_table(doc: dict[str, Any]) -> list[str]:
    refs = doc.get("references", {})
    if not refs:
        return []
    lines = [
        "## Stage costs (CPU ms per frame)",
        "",
        "| clip | decode | preprocess | infer | postprocess | sum | stage bound fps "
        "| ceiling fps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for clip, ref in refs.items():
        s = ref["stages"]
        lines.append(
            f"| {clip} | {_f(s['decode_ms'], 2)} | {_f(s['preprocess_ms'], 2)} | "
            f"{_f(s['infer_ms'], 2)} | {_f(s['postprocess_ms'], 3)} | {_f(s['total_ms'], 2)} | "
            f"{_f(s['stage_bound_fps'])} | {_f(ref['ceiling_fps'])} |"
        )
    lines += [
        "",
        "Decode: OpenCV FFmpeg, 1 decoder thread. Preprocess: vidpipe's letterbox into a "
        "preallocated u8 buffer (the float conversion runs in the inference graph). Infer: "
        "process CPU time per frame in the ceiling window (THROUGHPUT, every request busy). "
        "Postprocess: decode + NMS of the clip's real outputs. Stage bound = cores x 1000 / sum.",
        "",
    ]
    return lines


def _targets_table(doc: dict[str, Any]) -> list[str]:
    lines = ["## Targets", ""]
    rows = doc.get("targets", [])
    if not rows:
        return [*lines, "No target applies to this run.", ""]
    lines += [
        "| target | clip | cameras | ratio | needed | result | at the stage bound |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for t in rows:
        verdict = (
            "-"
            if t["holds"] is None
            else (
                "holds"
                if t["holds"]
                else f"**missed** by {100 * (1 - t['ratio'] / t['threshold']):.1f}%"
            )
        )
        lines.append(
            f"| {t['target']} | {t['clip']} | {t['cameras']} | {_f(t['ratio'], 2)} | "
            f"≥ {t['threshold']:.2f} | {verdict} | {_f(t.get('best_possible'), 2)} |"
        )
    lines += [
        "",
        "*At the stage bound*: the ratio a pipeline running exactly at the stage bound would "
        "reach; below the threshold, the target cannot be met on this machine by any design.",
        "",
        "All ratios (vidpipe fps / other fps):",
        "",
        "| clip | cameras | / stage bound | / ceiling | / naive | / single | / model_api |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in ratios(doc):
        lines.append(
            f"| {r['clip']} | {r['cameras']} | {_f(r.get('stage_bound'), 2)} | "
            f"{_f(r.get('ceiling'), 2)} | {_f(r.get('naive'), 2)} | {_f(r.get('single'), 2)} | "
            f"{_f(r.get('model_api'), 2)} |"
        )
    return [*lines, ""]


def _steady_state(doc: dict[str, Any]) -> list[str]:
    rows = [r for r in doc["summary"] if r["contender"] == "vidpipe"]
    if not rows:
        return []
    lines = [
        "## vidpipe steady state",
        "",
        "| clip | cameras | buffer-pool allocations grew | RSS start MB | RSS end MB |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for r in rows:
        grew = (
            "-" if r["allocations_grew"] is None else ("**yes**" if r["allocations_grew"] else "no")
        )
        lines.append(
            f"| {r['clip']} | {r['cameras']} | {grew} | {_f(r['rss_mb_start'])} | "
            f"{_f(r['rss_mb_end'])} |"
        )
    return [*lines, "", *_thread_table(rows)]


_THREAD_COLUMNS = (
    ("native", "native (OpenVINO, FFmpeg, ...)"),
    ("capture", "capture-"),
    ("scheduler", "vidpipe-scheduler"),
    ("postprocess", "vidpipe-postprocess"),
    ("sinks", "sink-"),
)


def _thread_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Where vidpipe's CPU goes: % of one core per thread group (native = OpenVINO etc.)."""
    rows = [r for r in rows if r.get("thread_cpu_percent")]
    if not rows:
        return []
    head = " | ".join(name for name, _ in _THREAD_COLUMNS)
    lines = [
        "Where vidpipe's CPU goes (% of one core, by thread; *native* is every thread Python "
        "did not start: OpenVINO's inference threads, mostly):",
        "",
        f"| clip | cameras | fps | {head} | other |",
        "| --- | ---: | ---: |" + " ---: |" * (len(_THREAD_COLUMNS) + 1),
    ]
    for r in rows:
        cpu = dict(r["thread_cpu_percent"])
        cells = []
        for _, prefix in _THREAD_COLUMNS:
            keys = [k for k in cpu if k.startswith(prefix)]
            cells.append(_f(sum(cpu.pop(k) or 0.0 for k in keys), 1))
        other = sum(v or 0.0 for v in cpu.values())
        lines.append(
            f"| {r['clip']} | {r['cameras']} | {_f(r['fps'])} | {' | '.join(cells)} | "
            f"{_f(other, 1)} |"
        )
    return [*lines, ""]
