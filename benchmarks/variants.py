"""vidpipe with one setting changed, measured against plain vidpipe in the same run.

Each variant is the real daemon (``vidpipe.bench.vidpipe_run.VidpipeRun``) with settings
merged into its config: into a section (``Variant.overrides``, e.g. the inference hint), or
into every camera (``Variant.camera``, e.g. tracking). Run one beside ``vidpipe``::

    python -m benchmarks --contenders vidpipe,vidpipe-track --cameras 4 \\
        --clips bottle-detection.mp4,one-by-one-person-detection.mp4 --repeats 4

Repeats alternate the order of the contenders (ABBA), so each repeat gives one paired ratio
``variant fps / vidpipe fps``; the report shows every pair and their median, and whether the
variant's budget (``BUDGETS``) holds.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.bench.common import PointSpec
from vidpipe.bench.vidpipe_run import VidpipeRun, merged


@dataclass(frozen=True)
class Variant:
    """How a variant differs from plain vidpipe.

    Attributes:
        overrides: merged into the config's sections.
        camera: merged into every camera's settings.
        int8: runs the INT8 IR of ``--int8-model`` (``PointSpec.extra["int8_model"]``)
            instead of the model, so that INT8 and the default are measured in one run.
        odd_camera: merged into every other camera's settings (the second, fourth, ...).
        models: ``models:`` entries, their ``path`` a file name in the model's directory
            (the assets' models folder).
        dual_stream: every camera detects on its sub-stream and records clips from its main
            stream (``inputs:``; density mode with ``--density-sub-clip``).
    """

    overrides: dict[str, Any] = field(default_factory=dict)
    camera: dict[str, Any] = field(default_factory=dict)
    int8: bool = False
    odd_camera: dict[str, Any] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    dual_stream: bool = False


_WHOLE = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]

_CLIPS = {
    "enabled": True,
    "pre_s": 5,
    "post_s": 2,
    "max_s": 10,
    "dir": str(Path(tempfile.gettempdir()) / "vidpipe-bench-clips"),
    "max_total_gb": 1,
    "triggers": {"classes": ["person", "car", "bottle"], "min_score": 0.3},
}
# tracking on, two zones and two lines with every class counted: the per-frame work of a busy
# camera (every detection is tracked, tested against each zone and line)
_TRACK = {
    "tracking": {"enabled": True},
    "zones": [
        {"name": "whole", "coords": "normalized", "points": _WHOLE},
        {
            "name": "middle",
            "coords": "normalized",
            "points": [[0.25, 0.2], [0.75, 0.2], [0.8, 0.5], [0.75, 0.8], [0.25, 0.8]],
        },
    ],
    "lines": [
        {"name": "vertical", "coords": "normalized", "points": [[0.5, 0.0], [0.5, 1.0]]},
        {"name": "horizontal", "coords": "normalized", "points": [[0.0, 0.5], [1.0, 0.5]]},
    ],
}
# the motion gate on at its defaults (density on the walkway clip with an INT8 model)
#: a 16:9 camera's picture fills 416x234 of YOLOX-Nano's 416x416: run the model at 416x256
_WIDE: dict[str, Any] = {"model": {"input_size": [416, 256]}}
_MOTION = {"motion": {"enabled": True}}
# OpenVINO's stream threads free to run on any core (they are pinned one to a core)
_NOPIN = {"inference": {"advanced": {"cpu_pinning": False}}}

#: contender name -> how it differs from ``vidpipe`` (never in the default suite)
VARIANTS: dict[str, Variant] = {
    "vidpipe-2req": Variant({"inference": {"advanced": {"num_requests": 2}}}),
    # the whole pool in flight whatever the number of cameras (the default caps requests in
    # flight by the cameras with frames)
    "vidpipe-4req": Variant({"inference": {"advanced": {"num_requests": 4}}}),
    "vidpipe-latency": Variant({"inference": {"hint": "latency"}}),  # one request in flight
    "vidpipe-throughput": Variant({"inference": {"hint": "throughput"}}),  # whatever the cameras
    "vidpipe-int8": Variant(int8=True),
    "vidpipe-motion-int8": Variant(camera=_MOTION, int8=True),
    "vidpipe-nopin": Variant(_NOPIN),
    "vidpipe-motion-nopin": Variant(_NOPIN, camera=_MOTION),
    "vidpipe-nolive": Variant({"http": {"live": {"enabled": False}}}),  # the live view is on
    # every inferred frame converted whole, then resized by OpenCV
    "vidpipe-wholeframe": Variant({"capture": {"convert_at_model_size": False}}),
    "vidpipe-track": Variant(camera=_TRACK),
    # event clips on every camera, recording all the time: a detection of any of the clips'
    # classes triggers, so the ring holds the open clip and a clip is cut every max_s
    "vidpipe-clips": Variant(camera={"clips": _CLIPS}),
    "vidpipe-motion": Variant(camera=_MOTION),
    # tracking, zones and lines, where crops are made too (against vidpipe-track)
    "vidpipe-track-clips": Variant(camera={**_TRACK, "clips": _CLIPS}),
    # a second detector (NanoDet-m) on half the cameras, beside YOLOX-Nano on the others
    "vidpipe-2det": Variant(
        odd_camera={"detector": "second"},
        models={"second": {"path": "nanodet_m_416.onnx", "type": "nanodet"}},
    ),
    # tracking, and person re-identification on crops of tracked persons once a second
    # (against vidpipe-track)
    "vidpipe-track-reid": Variant(
        {"secondary": [{"model": "reid", "on": ["person"], "every_s": 1.0}]},
        camera={"tracking": {"enabled": True}},
        models={"reid": {"path": "person-reidentification-retail-0288.onnx", "type": "reid"}},
    ),
    "vidpipe-tracking": Variant(camera={"tracking": {"enabled": True}}),
    # a camera recording clips with the motion gate on: given its main stream only (detect
    # and record on it), against detecting on its sub-stream and recording the main stream
    # (density mode: --density-clip NAME-1080p.mp4 --density-sub-clip NAME-432p.mp4)
    "vidpipe-motion-clips": Variant(camera={**_MOTION, "clips": _CLIPS}),
    "vidpipe-motion-dual": Variant(camera={**_MOTION, "clips": _CLIPS}, dual_stream=True),
    # the same two with the model run at a 16:9 input (model.input_size), the cameras' shape
    "vidpipe-motion-clips-wide": Variant(_WIDE, camera={**_MOTION, "clips": _CLIPS}),
    "vidpipe-motion-dual-wide": Variant(
        _WIDE, camera={**_MOTION, "clips": _CLIPS}, dual_stream=True
    ),
    "vidpipe-wide": Variant(_WIDE),
}
#: the variants with a feature on in every camera, whose paired ratios the report shows
CAMERA_VARIANTS = (
    "vidpipe-track",
    "vidpipe-clips",
    "vidpipe-motion",
    "vidpipe-track-clips",
    "vidpipe-motion-int8",
    "vidpipe-motion-nopin",
)
INT8_VARIANTS = frozenset(name for name, v in VARIANTS.items() if v.int8)


def variant_settings(spec: PointSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config overrides and camera settings of the variant ``spec.contender``
    (``vidpipe_run.bench_config``).

    Raises:
        ValueError: an INT8 variant without ``--int8-model``.
    """
    variant = VARIANTS[spec.contender]
    overrides = variant.overrides
    if variant.models:
        folder = Path(spec.model).parent
        models = {
            name: {"labels": spec.labels, **entry, "path": str(folder / entry["path"])}
            for name, entry in variant.models.items()
        }
        overrides = merged(overrides, {"models": models})
    if variant.int8:
        if not spec.extra.get("int8_model"):
            raise ValueError(f"{spec.contender} runs the model of --int8-model: none given")
        overrides = merged(overrides, {"model": {"path": spec.extra["int8_model"]}})
    return overrides, variant.camera


def variant_run(spec: PointSpec) -> VidpipeRun:
    """The daemon of the variant ``spec.contender`` (the factory the harness registers)."""
    variant = VARIANTS[spec.contender]
    return VidpipeRun(spec, *variant_settings(spec), variant.odd_camera, variant.dual_stream)


#: contender name -> the least ``variant fps / vidpipe fps`` it may cost: tracking must not
#: lower throughput by more than 5 %, event clips by 3 %.
BUDGETS: dict[str, float] = {"vidpipe-track": 0.95, "vidpipe-clips": 0.97}

LABELS: dict[str, str] = {
    "vidpipe-2req": "vidpipe, 2 requests (A/B)",
    "vidpipe-4req": "vidpipe, 4 requests, no in-flight cap (A/B)",
    "vidpipe-nolive": "vidpipe, live view off (A/B)",
    "vidpipe-track": "vidpipe, tracking + 2 zones + 2 lines (A/B)",
    "vidpipe-clips": "vidpipe, event clips recording all the time (A/B)",
    "vidpipe-track-clips": "vidpipe-track + event clips and crops (A/B against vidpipe)",
    "vidpipe-motion": "vidpipe, motion gate on",
    "vidpipe-latency": "vidpipe, latency hint (A/B)",
    "vidpipe-throughput": "vidpipe, throughput hint whatever the cameras (A/B)",
    "vidpipe-wholeframe": "vidpipe, whole frames converted, then resized by OpenCV (A/B)",
    "vidpipe-int8": "vidpipe on the INT8 model (--int8-model)",
    "vidpipe-motion-int8": "vidpipe on the INT8 model, motion gate on",
    "vidpipe-nopin": "vidpipe, OpenVINO's threads not pinned to cores (A/B)",
    "vidpipe-motion-nopin": "vidpipe, motion gate on, OpenVINO's threads not pinned (A/B)",
    "vidpipe-2det": "vidpipe, NanoDet-m on every other camera, YOLOX-Nano on the rest",
    "vidpipe-tracking": "vidpipe, tracking on (no zones or lines)",
    "vidpipe-track-reid": "vidpipe, tracking + person re-identification once a second a track",
    "vidpipe-motion-clips": "vidpipe, motion gate and clips, one stream (detect + record)",
    "vidpipe-motion-dual": "vidpipe, motion gate and clips, detect on the sub-stream, record "
    "the main stream",
    "vidpipe-motion-clips-wide": "vidpipe-motion-clips, the model at 416x256",
    "vidpipe-motion-dual-wide": "vidpipe-motion-dual, the model at 416x256",
    "vidpipe-wide": "vidpipe, the model at 416x256 (model.input_size) instead of 416x416",
}


def _by_repeat(
    doc: dict[str, Any], contender: str, clip: str, cameras: int, key: str = "fps"
) -> dict[int, float]:
    """``key`` of every successful point of one contender, clip and camera count, by repeat."""
    out = {}
    for p in doc.get("points", []):
        s = p["spec"]
        same = (s["contender"], s["clip_name"], s["cameras"]) == (contender, clip, cameras)
        if same and not p.get("error") and p.get(key):
            out[s["repeat"]] = float(p[key])
    return out


_POSTPROCESSING_THREADS = ("vidpipe-scheduler", "vidpipe-postprocess")


def _postprocess_ms(doc: dict[str, Any], contender: str, clip: str, cameras: int) -> float | None:
    """Median CPU ms per frame of the threads that postprocess (where the tracking step
    runs): the scheduler's, which postprocesses between submissions on OpenVINO, and the
    postprocessing thread. The scheduler's own work is the same in vidpipe and a camera
    variant, so their difference is the variant's.

    A thread's CPU time counts only its own work, so unlike fps it hardly changes with what
    else the machine runs.
    """
    values = []
    for p in doc.get("points", []):
        s = p["spec"]
        same = (s["contender"], s["clip_name"], s["cameras"]) == (contender, clip, cameras)
        threads = p.get("info", {}).get("thread_cpu_percent", {})
        percent = sum(v for k, v in threads.items() if k in _POSTPROCESSING_THREADS)
        if same and not p.get("error") and p.get("fps") and percent:
            values.append(10.0 * percent / float(p["fps"]))  # % of a core -> ms per second
    return statistics.median(values) if values else None


def _paired(mine: dict[int, float], base: dict[int, float]) -> list[float]:
    return [mine[r] / base[r] for r in sorted(mine.keys() & base.keys())]


def variant_ratios(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per camera variant, clip and camera count: paired fps ratios to plain vidpipe."""
    rows = []
    keys = sorted(
        {(r["contender"], r["clip"], r["cameras"]) for r in doc.get("summary", [])},
        key=lambda k: (
            CAMERA_VARIANTS.index(k[0]) if k[0] in CAMERA_VARIANTS else -1,
            *k[1:],
        ),
    )
    for contender, clip, cameras in keys:
        if contender not in CAMERA_VARIANTS:
            continue
        mine = _by_repeat(doc, contender, clip, cameras)
        base = _by_repeat(doc, "vidpipe", clip, cameras)
        pairs = _paired(mine, base)
        ratio = statistics.median(pairs) if pairs else None
        # CPU time per frame hardly depends on what else the machine runs, unlike fps
        cpu_pairs = _paired(
            _by_repeat(doc, contender, clip, cameras, "cpu_ms_per_frame"),
            _by_repeat(doc, "vidpipe", clip, cameras, "cpu_ms_per_frame"),
        )
        budget = BUDGETS.get(contender)
        pp_base = _postprocess_ms(doc, "vidpipe", clip, cameras)
        pp_mine = _postprocess_ms(doc, contender, clip, cameras)
        base_cpu = _by_repeat(doc, "vidpipe", clip, cameras, "cpu_ms_per_frame")
        share = None
        if pp_base is not None and pp_mine is not None and base_cpu:
            share = (pp_mine - pp_base) / statistics.median(base_cpu.values())
        rows.append(
            {
                "variant": contender,
                "clip": clip,
                "cameras": cameras,
                "fps": statistics.median(mine.values()) if mine else None,
                "vidpipe_fps": statistics.median(base.values()) if base else None,
                "ratio_repeats": [round(p, 3) for p in pairs],
                "ratio": ratio,
                "cpu_per_frame_ratio": statistics.median(cpu_pairs) if cpu_pairs else None,
                "postprocess_ms": pp_base,
                "variant_postprocess_ms": pp_mine,
                # the added work as a share of all the CPU a frame takes: what a machine whose
                # CPU is the limit loses, 1 / (1 + share), however busy the machine was
                "added_cpu_share": share,
                "cpu_bound_ratio": None if share is None else 1.0 / (1.0 + share),
                "needed": budget,
                "holds": None if ratio is None or budget is None else ratio >= budget,
            }
        )
    return rows


def _f3(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _f2(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(doc: dict[str, Any]) -> list[str]:
    """The report section of the camera variants (nothing when the run has none)."""
    rows = doc.get("variants") or variant_ratios(doc)
    if not rows:
        return []
    lines = [
        "## vidpipe variants (same run, repeats alternated)",
        "",
        "| variant | clip | cameras | fps | vidpipe fps | ratio per repeat | ratio (median) "
        "| needed | result | CPU per frame / vidpipe's | postprocessing threads ms/frame "
        "| CPU-bound ratio |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | --- | ---: |",
    ]
    for r in rows:
        result = "-" if r["holds"] is None else ("**holds**" if r["holds"] else "**missed**")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        needed = "-" if r["needed"] is None else f"≥ {r['needed']:.2f}"
        fps = "-" if r["fps"] is None else f"{r['fps']:.1f}"
        base = "-" if r["vidpipe_fps"] is None else f"{r['vidpipe_fps']:.1f}"
        lines.append(
            f"| {r['variant']} | {r['clip']} | {r['cameras']} | {fps} | {base} | "
            f"{', '.join(f'{v:.3f}' for v in r['ratio_repeats'])} | {ratio} | {needed} | "
            f"{result} | {_f3(r.get('cpu_per_frame_ratio'))} | "
            f"{_f2(r.get('postprocess_ms'))} → {_f2(r.get('variant_postprocess_ms'))} | "
            f"{_f3(r.get('cpu_bound_ratio'))} |"
        )
    lines += [
        "",
        "Ratio per repeat: the variant's fps over vidpipe's in the same repeat (the two run "
        "back to back, in alternating order). CPU per frame: the process's CPU time per "
        "inferred frame, the variant's over vidpipe's (median of the pairs): the variant's "
        "extra work, which others' load on the machine hardly changes. Postprocessing "
        "threads: the scheduler's and the postprocessing thread's CPU ms per frame in vidpipe "
        "→ in the variant (the tracking step runs on them). "
        "CPU-bound ratio: 1 / (1 + the added postprocess ms / vidpipe's CPU ms per frame), the "
        "fps ratio a machine whose CPU is the limit would see; it holds even when others' "
        "load on a shared machine makes the measured fps ratios scatter.",
        "",
    ]
    return lines
