"""Turn a result document into the target ratios, a Markdown table and a PNG plot.

``python -m vidpipe.bench.report RESULT.json [OUT_DIR]`` regenerates both from a stored
result's raw points (summary, references and targets are recomputed and written back).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidpipe.bench import variants

#: (name, the denominator, threshold, camera counts, clip heights it applies to or None = all)
TARGETS: tuple[tuple[str, str, float, tuple[int, ...], tuple[int, ...] | None], ...] = (
    ("vidpipe / stage bound", "stage_bound", 0.90, (4, 8), (432, 1080)),
    ("vidpipe / naive", "naive", 1.10, (4, 8), None),
    ("vidpipe / single-detector", "single", 1.10, (4, 8), None),
    ("vidpipe / model_api", "model_api", 1.30, (4,), None),
)

LABELS = {
    "ceiling": "ceiling (inference only)",
    "naive": "naive (thread per camera, sync infer)",
    "single": "single-detector (Frigate design)",
    "model_api": "model_api AsyncPipeline",
    "vidpipe": "vidpipe daemon",
    "vidpipe-2req": "vidpipe, 2 requests (A/B)",
    "vidpipe-4req": "vidpipe, 4 requests, no in-flight cap (A/B)",
    "vidpipe-f32nchw": "vidpipe, numpy f32 NCHW input (A/B)",
    "vidpipe-ingraph": "vidpipe, u8 NHWC input converted in the graph (A/B)",
    "vidpipe-norewrite": "vidpipe, the model's graph as given, no rewrites (A/B)",
    "vidpipe-nolive": "vidpipe, live view off (A/B)",
    **variants.LABELS,
}


def pipelines(doc: dict[str, Any]) -> list[str]:
    """The contenders of ``doc`` measured with cameras: known ones in ``LABELS`` order, then the
    rest (a stored result is rendered without the registry of the run that made it)."""
    names = {r["contender"] for r in doc["summary"] if r["cameras"]}
    order = list(LABELS)
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


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


def markdown(doc: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    lines = _header(doc)
    if measured_clips(doc):
        lines += ["", "## Throughput", ""]
        for clip in measured_clips(doc):
            lines += _throughput_table(doc, clip)
        lines += _stage_table(doc) + _targets_table(doc)
        lines += variants.markdown(doc) + _steady_state(doc)
    lines += _density(doc)
    return "\n".join(lines) + "\n"


def _header(doc: dict[str, Any]) -> list[str]:
    """Title, machine, precision, how it was measured, the command and benchmark_app."""
    m = doc["machine"]
    o = doc["options"]
    lines = [
        f"# vidpipe bench: {_title(doc)}, {doc['created']}",
        "",
        f"- Machine: {m['cpu_model']}, {m['cores']} cores ({', '.join(m['isa']) or 'no AVX'}); "
        f"OpenVINO {m['openvino']}, OpenCV {m['cv2']}, Python {m['python']}",
        f"- Inference precision (every contender, set explicitly): **{doc['precision']}**",
    ]
    if measured_clips(doc):
        lines += [
            f"- Points: {o['seconds']:g} s measured after {o['warmup_s']:g} s warm-up, "
            f"{o['repeats']} repeat(s) alternated; cameras "
            f"{'paced at the clip frame rate' if o.get('realtime') else 'unpaced'}; fps = frames "
            f"finished in the window / window; CPU % = process CPU time / window / cores; "
            f"others' CPU % = the rest of the machine in the same window (worst repeat; > 5 "
            f"means the point was disturbed); "
            f"latency = capture to result; values are medians over the repeats",
        ]
        unavailable = doc.get("unavailable")
        if unavailable is None:  # a result stored before "unavailable" replaced this key
            status = doc.get("model_api_status", "ok")
            unavailable = {} if status == "ok" else {"model_api": status}
        lines += [f"- {name} not run: {why}" for name, why in (unavailable or {}).items()]
    else:
        lines.append(
            f"- Trials: {o['seconds']:g} s measured after {max(3.0, o['warmup_s']):g} s warm-up, "
            f"once every camera delivers"
        )
    lines.append(
        f"- Command: `{' '.join(doc['command'])}`; total wall time {doc['wall_s'] / 60:.1f} min"
    )
    bench_app = doc.get("benchmark_app")
    if bench_app:
        lines.append(
            f"- benchmark_app cross-check (THROUGHPUT, random input): "
            f"{_f(bench_app.get('fps'))} fps"
            + (f" ({bench_app['error']})" if bench_app.get("error") else "")
        )
    return lines


def _throughput_table(doc: dict[str, Any], clip: str) -> list[str]:
    """One clip's throughput section: its references and a row per contender and count."""
    info = doc["clips"][clip]
    ref = doc.get("references", {}).get(clip, {})
    lines = [f"### {clip} ({info['width']}x{info['height']})", ""]
    if ref:  # a reference contender ran (``python -m benchmarks``)
        lines += [
            f"Ceiling {_f(ref.get('ceiling_fps'))} fps, stage bound "
            f"{_f(ref.get('stage_bound_fps'))} fps.",
            "",
        ]
    lines += [
        "| contender | cameras | fps | fps per repeat | min camera fps | CPU % | others' CPU % "
        "| p50 ms | p95 ms | precision |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    order = pipelines(doc)
    rows = [r for r in doc["summary"] if r["clip"] == clip and r["contender"] in order]
    rows.sort(key=lambda r: (r["cameras"], order.index(r["contender"])))
    for r in rows:
        err = " ⚠ " + "; ".join(r["errors"])[:120] if r["errors"] else ""
        lines.append(
            f"| {r['contender']}{err} | {r['cameras']} | **{_f(r['fps'])}** | "
            f"{', '.join(f'{v:.1f}' for v in r['fps_repeats'])} | {_f(r['min_camera_fps'])} | "
            f"{_f(r['cpu_percent'], 0)} | {_f(r.get('others_cpu_percent'), 0)} | "
            f"{_f(r['latency_p50_ms'], 0)} | "
            f"{_f(r['latency_p95_ms'], 0)} | {r['precision'] or '-'} |"
        )
    return [*lines, ""]


def _title(doc: dict[str, Any]) -> str:
    mode = doc["options"].get("mode", "throughput")
    if mode == "density":
        return "stream density"
    suite = f"{doc['options']['suite']} suite"
    return suite if mode == "throughput" else f"{suite} and stream density"


def measured_clips(doc: dict[str, Any]) -> list[str]:
    """Clips with throughput results, in run order."""
    seen = {r["clip"] for r in doc["summary"]}
    return [c for c in doc["clips"] if c in seen]


_STARTS = {
    "same": ", every stream starting at the clip's first frame (in step).",
    "staggered": ", each stream starting at a different point of the clip (staggered).",
}


def _density(doc: dict[str, Any]) -> list[str]:
    dens = doc.get("density")
    if not dens:
        return []
    lines = ["", "## Stream density (RTSP, native rate)", ""]
    if dens.get("error"):
        return [*lines, f"Not run: {dens['error']}", ""]
    c = dens["criteria"]
    lines += [
        f"{dens['clip']} served by a local GStreamer RTSP server at {dens['stream_fps']:g} fps, "
        f"looped, one mount per camera{_STARTS.get(dens.get('start'), '.')} "
        "A camera count passes when every camera "
        f"is read in real time (>= {100 * c['min_capture_share']:g}% of the stream rate), "
        f">= {100 * c['min_inferred_share']:g}% of its frames due for detection are inferred, "
        f"and the p95 capture-to-result latency is <= {c['max_p95_ms']:g} ms.",
        "",
        "| contender | detect_fps | cameras | frames to infer per s | result | fps | p50 ms "
        "| p95 ms | worst camera: inferred % | CPU % | others' CPU % | RTSP server CPU % |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for res in dens["results"]:
        for t in res["trials"]:
            verdict = "pass" if t["passes"] else "fail"
            if t["cameras"] == res["max_cameras"]:
                verdict = "**largest passing**"
            lines.append(
                f"| {res.get('contender', 'vidpipe')} | {res['detect_fps']:g} | {t['cameras']} | "
                f"{t['cameras'] * res['detect_fps']:g} | {verdict} | {_f(t['fps'])} | "
                f"{_f(t['p50_ms'], 0)} | {_f(t['p95_ms'], 0)} | "
                f"{100 * t['worst_inferred_share']:.1f} | {_f(t['cpu_percent'], 0)} | "
                f"{_f(t['others_cpu_percent'], 0)} | {_f(t['server_cpu_percent'], 1)} |"
            )
    lines.append("")
    lines += [
        f"Largest camera count: **{res['max_cameras']}** at detect_fps {res['detect_fps']:g}"
        f" ({res.get('contender', 'vidpipe')})"
        for res in dens["results"]
    ]
    return [*lines, ""]


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


def plot(doc: dict[str, Any], path: Path) -> None:
    """fps vs cameras per clip, every contender, ceiling and stage bound as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clips = measured_clips(doc)
    fig, axes = plt.subplots(1, len(clips), figsize=(5.2 * len(clips), 4.2), squeeze=False)
    for ax, clip in zip(axes[0], clips, strict=True):
        info = doc["clips"][clip]
        for contender in pipelines(doc):
            rows = sorted(
                (
                    r
                    for r in doc["summary"]
                    if r["clip"] == clip and r["contender"] == contender and r["fps"]
                ),
                key=lambda r: r["cameras"],
            )
            if rows:
                ax.plot(
                    [r["cameras"] for r in rows],
                    [r["fps"] for r in rows],
                    marker="o",
                    label=LABELS.get(contender, contender),  # a stored run's own variant
                    linewidth=2.5 if contender == "vidpipe" else 1.5,
                )
        ref = doc.get("references", {}).get(clip, {})
        if ref.get("ceiling_fps"):
            ax.axhline(
                ref["ceiling_fps"],
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"ceiling {ref['ceiling_fps']:.0f}",
            )
        if ref.get("stage_bound_fps"):
            ax.axhline(
                ref["stage_bound_fps"],
                color="grey",
                linestyle=":",
                linewidth=1.5,
                label=f"stage bound {ref['stage_bound_fps']:.0f}",
            )
        ax.set_title(f"{clip} ({info['width']}x{info['height']})")
        ax.set_xlabel("cameras")
        ax.set_ylabel("frames inferred per second (all cameras)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    m = doc["machine"]
    fig.suptitle(f"{m['cpu_model']}, {m['cores']} cores, precision {doc['precision']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(
    doc: dict[str, Any], json_path: Path, out_dir: Path | None = None
) -> dict[str, Path]:
    """Write the JSON, and the Markdown and PNG beside it (or in ``out_dir``)."""
    out_dir = out_dir or json_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    md = out_dir / f"{json_path.stem}.md"
    md.write_text(markdown(doc))
    paths = {"json": json_path, "markdown": md}
    if plot_unavailable() is None and measured_clips(doc):
        paths["png"] = out_dir / f"{json_path.stem}.png"
        plot(doc, paths["png"])
    return paths


def plot_unavailable() -> str | None:
    """Why no PNG can be drawn (matplotlib missing), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no PNG plot"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(args) <= 2:
        print("usage: python -m vidpipe.bench.report RESULT.json [OUT_DIR]", file=sys.stderr)
        return 2
    path = Path(args[0])
    doc = json.loads(path.read_text())
    from vidpipe.bench.harness import references, summarize

    doc["summary"] = summarize(doc["points"])  # recomputed: the report may be newer than the run
    doc["references"] = references(doc["summary"])
    doc["targets"] = targets(doc)
    doc["variants"] = variants.variant_ratios(doc)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    out_dir = Path(args[1]) if len(args) == 2 else path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{path.stem}.md").write_text(markdown(doc))
    if not measured_clips(doc):
        return 0  # density only: nothing to plot
    reason = plot_unavailable()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    plot(doc, out_dir / f"{path.stem}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
