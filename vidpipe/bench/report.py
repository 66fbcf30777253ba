"""The Markdown report of a result document, and the files a run writes.

``benchmarks/`` adds its sections through the harness's extensions (``harness.Extension``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vidpipe.bench.harness import extensions


def pipelines(doc: dict[str, Any]) -> list[str]:
    """The contenders of ``doc`` measured with cameras: those the extensions label in their
    order, then the rest by name (a stored result may name contenders registered no more)."""
    names = {r["contender"] for r in doc["summary"] if r["cameras"]}
    order = [n for e in extensions() for n in e.labels]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(doc: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    lines = _header(doc)
    if measured_clips(doc):
        lines += ["", "## Throughput", ""]
        for clip in measured_clips(doc):
            lines += _throughput_table(doc, clip)
        for extension in extensions():
            lines += extension.sections(doc)
    lines += _density(doc)
    return "\n".join(lines) + "\n"


def _header(doc: dict[str, Any]) -> list[str]:
    """Title, machine, precision, how it was measured and the command."""
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
            f"{o['repeats']} repeat(s); cameras "
            f"{'paced at the clip frame rate' if o.get('realtime') else 'unpaced'}; fps = frames "
            f"finished in the window / window; CPU % = process CPU time / window / cores; "
            f"others' CPU % = the rest of the machine in the same window (worst repeat; > 5 "
            f"means the point was disturbed); "
            f"latency = capture to result; values are medians over the repeats",
        ]
    else:
        lines.append(
            f"- Trials: {o['seconds']:g} s measured after {max(3.0, o['warmup_s']):g} s warm-up, "
            f"once every camera delivers"
        )
    lines.append(
        f"- Command: `{' '.join(doc['command'])}`; total wall time {doc['wall_s'] / 60:.1f} min"
    )
    return lines


def _throughput_table(doc: dict[str, Any], clip: str) -> list[str]:
    """One clip's throughput section: a row per contender and camera count."""
    info = doc["clips"][clip]
    lines = [
        f"### {clip} ({info['width']}x{info['height']})",
        "",
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
    mode, suite = doc["options"].get("mode", "throughput"), f"{doc['options']['suite']} suite"
    titles = {"density": "stream density", "throughput": suite}
    return titles.get(mode, f"{suite} and stream density")


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
        + (
            f"Each camera's sub-stream, {dens['sub_clip']}, is served beside it"
            + (f" at {dens['sub_stream_fps']:g} fps" if dens.get("sub_stream_fps") else "")
            + " (read by the dual-stream contenders only, in real time at its own rate). "
            if dens.get("sub_clip")
            else ""
        )
        + "A camera count passes when every camera "
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
    lines += [_largest(res, doc.get("machine", {}).get("cores")) for res in dens["results"]]
    return [*lines, ""]


def _largest(res: dict[str, Any], cores: int | None) -> str:
    """One search's largest passing count, with the daemon's CPU per camera there."""
    line = (
        f"Largest camera count: **{res['max_cameras']}** at detect_fps {res['detect_fps']:g}"
        f" ({res.get('contender', 'vidpipe')}"
    )
    if "repeat" in res:
        line += f", repeat {res['repeat']}"
    best = [t for t in res["trials"] if t["cameras"] == res["max_cameras"] and t["passes"]]
    if best and cores and best[0].get("cpu_percent") is not None:
        per_camera = best[0]["cpu_percent"] * cores / best[0]["cameras"]
        line += f"; {per_camera:.1f} % of a core per camera"
    return line + ")"


def write_outputs(
    doc: dict[str, Any], json_path: Path, out_dir: Path | None = None
) -> dict[str, Path]:
    """Write the JSON, and the Markdown beside it (or in ``out_dir``), and what the extensions
    add; returns the paths by kind."""
    out_dir = out_dir or json_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    md = out_dir / f"{json_path.stem}.md"
    md.write_text(markdown(doc))
    paths = {"json": json_path, "markdown": md}
    for extension in extensions():
        paths.update(extension.write(doc, out_dir, json_path.stem))
    return paths
