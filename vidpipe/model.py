"""Open the configured model: backend, decoder, labels, checked against each other; and
resolve the class names the config uses (cameras, clip triggers, sinks) against its labels."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from vidpipe.config import CameraConfig, Config, ConfigError, InferenceConfig, ModelConfig
from vidpipe.infer.backends import build_backend
from vidpipe.infer.base import BackendError, InferenceBackend
from vidpipe.labels import Labels
from vidpipe.postprocess.decode import (
    DECODERS,
    DecodeParams,
    Decoder,
    check_output_shapes,
    model_type,
)
from vidpipe.schedule.scheduler import CameraRules

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    backend: InferenceBackend
    decoder: Decoder
    labels: Labels
    num_classes: int


def load_labels(path: Path | None, num_classes: int | None = None) -> Labels:
    """Class names from a file (one a line); numbered names when no file is given."""
    if path is None:
        return Labels.numbered(num_classes or 0)
    try:
        return Labels.load(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"cannot read labels file {path}: {exc}") from None


def open_model(model: ModelConfig, inference: InferenceConfig) -> LoadedModel:
    """Compile the model, fed as its type wants (``model.type``'s input: placement, pad,
    normalisation), and check its outputs against the type's decoder and the labels.

    Raises:
        BackendError: listing every problem found, naming ``model.type``, and the type the
            outputs do fit where one does.
    """
    labels = load_labels(model.labels) if model.labels else None
    backend = build_backend(model.path, inference, model_type(model.type).input, model.input_size)
    spec = backend.input_spec
    num_classes, problems = check_output_shapes(
        model.type, backend.output_shapes, spec.width, spec.height, len(labels) if labels else None
    )
    if problems:
        backend.close()
        fits = _types_that_fit(backend.output_shapes, spec.width, spec.height)
        hint = f" (its outputs fit model.type {' or '.join(fits)})" if fits else ""
        raise BackendError(
            f"model {model.path} does not fit model.type {model.type!r}: "
            + "; ".join(problems)
            + hint
        )
    return LoadedModel(
        backend, DECODERS[model.type], labels or load_labels(None, num_classes), num_classes
    )


def _types_that_fit(shapes: list[tuple[int, ...]], width: int, height: int) -> list[str]:
    """The model types whose output check a model's outputs pass (SSD's says nothing of the
    classes, so it is named only for a model no other type fits)."""
    fits = [t for t in DECODERS if not check_output_shapes(t, shapes, width, height, None)[1]]
    return [t for t in fits if t != "ssd"] or fits


def class_ids_for(cam: CameraConfig, index: int, labels: Labels) -> frozenset[int] | None:
    """Resolve a camera's class filter (names or ids) to ids; ConfigError names the path."""
    return labels.ids(cam.classes, where=f"cameras[{index}].classes", camera=cam.name)


def camera_rules(
    cfg: Config, loaded: LoadedModel, model: ModelConfig, cameras: Collection[str] | None = None
) -> dict[str, CameraRules]:
    """Decode parameters and class filters of the cameras on one detector (``cameras``;
    None: every camera); ConfigError lists every bad camera."""
    spec = loaded.backend.input_spec
    rules: dict[str, CameraRules] = {}
    problems: list[str] = []
    for i, cam in enumerate(cfg.cameras):
        if cameras is not None and cam.name not in cameras:
            continue
        try:
            ids = class_ids_for(cam, i, loaded.labels)
        except ConfigError as exc:
            problems += exc.problems
            continue
        threshold = (
            cam.score_threshold if cam.score_threshold is not None else model.score_threshold
        )
        rules[cam.name] = CameraRules(DecodeParams(spec.width, spec.height, threshold), ids)
    if problems:
        raise ConfigError(problems)
    return rules


def clip_trigger_classes(
    cfg: Config, labels_of: Callable[[str], Labels]
) -> dict[str, frozenset[int]]:
    """Each clip-recording camera's trigger classes as ids (``labels_of``: a camera's
    detector's labels).

    Raises:
        ConfigError: one problem per unknown name, naming ``cameras[i].clips.triggers.classes``.
    """
    out: dict[str, frozenset[int]] = {}
    problems: list[str] = []
    for i, cam in enumerate(cfg.cameras):
        if not cam.clips.enabled:
            continue
        try:
            ids = labels_of(cam.name).ids(
                cam.clips.triggers.classes,
                where=f"cameras[{i}].clips.triggers.classes",
                camera=cam.name,
            )
        except ConfigError as exc:
            problems += exc.problems
            continue
        out[cam.name] = ids or frozenset()
    if problems:
        raise ConfigError(problems)
    return out


def check_sink_classes(cfg: Config, labels: Collection[Labels]) -> None:
    """Refuse a sink's class filter that names no class of any detector.

    Sinks match classes by name per frame; an unknown name there would filter out every
    detection without a word, so it is resolved against the labels once, here.

    Raises:
        ConfigError: one problem per unknown name, each naming ``sinks[i].classes[k]``.
    """
    problems: list[str] = []
    for i, sink in enumerate(cfg.sinks):
        found: list[str] | None = None
        for names in labels:
            try:
                names.ids(sink.class_filter, where=f"sinks[{i}].classes")
            except ConfigError as exc:
                found = exc.problems if found is None else found
            else:
                found = []
                break
        problems += found or []
    if problems:
        raise ConfigError(problems)


def log_model(name: str, loaded: LoadedModel) -> None:
    """One line on what runs where (the backend's ``BackendInfo``)."""
    info, spec = loaded.backend.info, loaded.backend.input_spec
    log.info(
        "model %s (%s) on %s: precision %s, hint %s, %d requests (optimal %s), input %s, %s",
        name,
        info.model,
        info.device,
        info.precision,
        info.hint,
        info.requests,
        "?" if info.optimal_requests is None else info.optimal_requests,
        f"{spec.dtype} {spec.layout} {list(spec.shape)}",
        info.runtime,
    )
