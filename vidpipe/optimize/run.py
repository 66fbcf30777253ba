"""The steps of ``vidpipe optimize``: frames, reference, INT8, agreement, speed, report."""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import openvino as ov

from vidpipe.config import Config
from vidpipe.infer.ov_rewrites import fuse_focus
from vidpipe.model import load_labels
from vidpipe.optimize import frames, quantize, speed
from vidpipe.optimize.agreement import Agreement
from vidpipe.optimize.quantize import DECODE_THRESHOLD, Detector, OptimizeError
from vidpipe.postprocess.decode import DECODERS, DecodeParams, Decoder, model_type
from vidpipe.preprocess.letterbox import ModelInput

#: INT8 is recommended only when it costs at most this share of the best float's CPU time.
INT8_MARGIN = 0.95


@dataclass(frozen=True, slots=True)
class Options:
    """What ``vidpipe optimize`` was asked for (see ``vidpipe optimize --help``)."""

    output: Path
    sources: tuple[str, ...]  # empty: the configured cameras
    frames: int = 300
    gate: float = 0.95
    method: str = "plain"
    force: bool = False
    speed_s: float = 10.0


def _input_size(model: ov.Model, path: Path) -> tuple[int, int]:
    """``(width, height)`` of a one-input f32 NCHW image model."""
    if len(model.inputs) != 1:
        raise OptimizeError(f"model {path}: expected one input, found {len(model.inputs)}")
    shape = model.input().get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 4 or not shape[1].is_static:
        raise OptimizeError(f"model {path}: expected an NCHW image input, got {shape}")
    if shape[1].get_length() != 3 or not (shape[2].is_static and shape[3].is_static):
        raise OptimizeError(f"model {path}: expected a static 3-channel NCHW input, got {shape}")
    return shape[3].get_length(), shape[2].get_length()


def _describe(model_input: ModelInput) -> str:
    """How calibration frames are made, in words (normalised in the tensor, not the graph)."""
    norm = (
        f", normalised (x - {model_input.mean}) / {model_input.std}"
        if model_input.normalised
        else ", 0-255"
    )
    return f"letterbox {model_input.placement}, pad {model_input.pad_value}{norm}"


def _sources(cfg: Config, options: Options) -> list[str]:
    if options.sources:
        return list(options.sources)
    urls = [cam.url for cam in cfg.cameras if cam.enabled]
    if not urls:
        raise OptimizeError("no frames to calibrate on: pass clips, or configure cameras")
    return urls


def _machine() -> dict[str, str]:
    core = ov.Core()
    return {
        "cpu": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
        "cpu_capabilities": " ".join(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
        "arch": platform.machine(),
    }


def _versions() -> dict[str, str]:
    out = {"openvino": ov.get_version()}
    for package in ("nncf", "vidpipe"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def optimize(cfg: Config, options: Options, progress: frames.Progress) -> dict[str, Any]:
    """Run every step; write the INT8 IR and its report unless the gate refuses it.

    Returns:
        The report (also written as ``<output>.json`` beside the model).

    Raises:
        OptimizeError: the gate refused the model (nothing written), or a step cannot run.
    """
    core = ov.Core()
    model, decode = _open_float_model(core, cfg, options)
    width, height = decode[1].input_w, decode[1].input_h
    detector = cfg.default_detector()
    labels = load_labels(detector.labels, 1000)
    iou = detector.iou_threshold
    model_input = model_type(detector.type).input  # the type's letterbox, pad, mean and std
    progress(f"frames: as model.type {detector.type!r} wants them: {_describe(model_input)}")
    samples = frames.collect(
        _sources(cfg, options), options.frames, width, height, progress, model_input
    )
    sets = frames.split(samples, options.method == "accuracy-control")
    if not sets.calibration or not sets.test:
        raise OptimizeError(f"only {len(samples)} frame(s): need at least 2")

    f32 = Detector(speed.compile_model(core, model, "f32"), *decode, iou)
    progress(f"reference: the f32 model on {len(sets.validation) + len(sets.test)} frames")
    validation = [(s, f32(s)) for s in sets.validation]
    reference = [f32(s) for s in sets.test]
    int8 = quantize.quantize(
        model.clone(),
        sets.calibration,
        options.method,
        validation,
        (*decode, iou),
        labels,
        options.gate,
        progress,
    )
    progress(f"agreement with f32 on {len(sets.test)} frames not used for calibration")
    native = speed.compile_model(core, model, None)
    float_name = speed.device_precision(native)
    candidates = {
        "int8": (
            int8,
            quantize.agreement(reference, _detector(core, int8, decode, iou), sets.test, labels),
        ),
        float_name: (
            model,
            quantize.agreement(reference, Detector(native, *decode, iou), sets.test, labels),
        ),
    }
    report = _report(cfg, options, len(sets.calibration), len(sets.validation), candidates)
    progress(f"speed: each model for {options.speed_s:g} s on this machine")
    report["speed"] = _speeds(core, model, int8, float_name, options.speed_s)
    report["recommendation"] = _recommend(report, options)
    _gate(candidates["int8"][1], report, options)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(int8, str(options.output))
    options.output.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _open_float_model(
    core: ov.Core, cfg: Config, options: Options
) -> tuple[ov.Model, tuple[Decoder, DecodeParams]]:
    """The configured float model and how to decode its outputs; refuses a quantized one."""
    if options.output.suffix != ".xml":
        raise OptimizeError(f"output {options.output}: an OpenVINO IR name ends in .xml")
    detector = cfg.default_detector()
    model = core.read_model(str(detector.path))
    if any(op.get_type_name() == "FakeQuantize" for op in model.get_ops()):
        raise OptimizeError(f"model {detector.path} is quantized already: give the float one")
    # quantized after the daemon's own load-time rewrites, so that the INT8 IR keeps them and
    # the speeds compared are those of the graphs the daemon would run
    fuse_focus(model)
    width, height = _input_size(model, detector.path)
    return model, (DECODERS[detector.type], DecodeParams(width, height, DECODE_THRESHOLD))


def _gate(int8: Agreement, report: dict[str, Any], options: Options) -> None:
    """Raise the refusal unless INT8 passes the gate (or ``--force``)."""
    report["written"] = int8.passes(options.gate) or options.force
    if not report["written"]:
        raise OptimizeError(
            f"INT8 model refused: agreement recall {int8.recall:.3f}, precision "
            f"{int8.precision:.3f} on {int8.frames} frames is below the gate {options.gate:g}; "
            "nothing written (--force writes it anyway)"
        )


def _detector(
    core: ov.Core, model: ov.Model, decode: tuple[Decoder, DecodeParams], iou: float
) -> Detector:
    return Detector(speed.compile_model(core, model, None), decode[0], decode[1], iou)


def _report(
    cfg: Config,
    options: Options,
    n_calibration: int,
    n_validation: int,
    candidates: dict[str, tuple[ov.Model, Agreement]],
) -> dict[str, Any]:
    return {
        "model": str(options.output),
        "source_model": str(cfg.default_detector().path),
        "model_type": cfg.default_detector().type,
        "input": _describe(model_type(cfg.default_detector().type).input),
        "method": options.method,
        "gate": options.gate,
        "frames": {
            "calibration": n_calibration,
            "validation": n_validation,
            "test": candidates["int8"][1].frames,
            "sources": list(options.sources) or "configured cameras",
        },
        "agreement_with_f32": {name: ag.as_dict() for name, (_, ag) in candidates.items()},
        "machine": _machine(),
        "versions": _versions(),
    }


def _speeds(
    core: ov.Core, model: ov.Model, int8: ov.Model, float_name: str, seconds: float
) -> dict[str, dict[str, float]]:
    """fps and CPU ms per inference of f32, the device's float precision and INT8."""
    runs = {"f32": (model, "f32"), float_name: (model, None), "int8": (int8, None)}
    out = {}
    for name, (m, precision) in runs.items():
        measured = speed.throughput(speed.compile_model(core, m, precision), seconds)
        out[name] = {
            "fps": round(measured.fps, 1),
            "cpu_ms_per_frame": round(measured.cpu_ms_per_frame, 2),
        }
    return out


def _recommend(report: dict[str, Any], options: Options) -> dict[str, str]:
    """The precision that costs least CPU per inference on this machine among those whose
    agreement passes the gate (f32 always does). INT8 must beat the best float precision by
    ``INT8_MARGIN``: a tie (INT8 against bf16 on an AVX-512 BF16 EPYC: 7.80 against 7.83 ms
    in ``vidpipe bench``) is no reason to give up agreement."""
    cost = {name: figures["cpu_ms_per_frame"] for name, figures in report["speed"].items()}
    passing = [
        name
        for name in cost
        if name == "f32"
        or (
            report["agreement_with_f32"][name]["recall"] >= options.gate
            and report["agreement_with_f32"][name]["precision"] >= options.gate
        )
    ]
    best = min(passing, key=lambda name: cost[name] / (INT8_MARGIN if name == "int8" else 1.0))
    use = (
        f"model.path: {options.output}"
        if best == "int8"
        else f"keep the original model with inference.precision: {best}"
    )
    return {"precision": best, "use": use}
