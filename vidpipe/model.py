"""Open the configured model: backend, decoder, labels, checked against each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vidpipe.config import CameraConfig, Config, ConfigError, InferenceConfig, ModelConfig
from vidpipe.infer.backends import build_backend
from vidpipe.infer.base import BackendError, InferenceBackend
from vidpipe.postprocess.decode import DECODERS, DecodeParams, Decoder, check_output_shapes
from vidpipe.scheduler import CameraRules


@dataclass
class LoadedModel:
    backend: InferenceBackend
    decoder: Decoder
    labels: tuple[str, ...]
    num_classes: int


def load_labels(path: Path | None, num_classes: int | None = None) -> tuple[str, ...]:
    """Class names from a file (one a line); numbered names when no file is given."""
    if path is None:
        return tuple(str(i) for i in range(num_classes or 0))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"cannot read labels file {path}: {exc}") from None
    return tuple(line.strip() for line in lines if line.strip())


def open_model(model: ModelConfig, inference: InferenceConfig) -> LoadedModel:
    """Compile the model and check its outputs against the configured decoder and labels.

    Raises:
        BackendError: listing every problem found.
    """
    labels = load_labels(model.labels) if model.labels else None
    backend = build_backend(model.path, inference)
    spec = backend.input_spec
    num_classes, problems = check_output_shapes(
        model.type, backend.output_shapes, spec.width, spec.height, len(labels) if labels else None
    )
    if problems:
        backend.close()
        raise BackendError(
            f"model {model.path} does not fit model.type {model.type!r}: " + "; ".join(problems)
        )
    return LoadedModel(
        backend, DECODERS[model.type], labels or load_labels(None, num_classes), num_classes
    )


def class_ids_for(cam: CameraConfig, index: int, labels: tuple[str, ...]) -> frozenset[int] | None:
    """Resolve a camera's class filter (names or ids) to ids; ConfigError names the path."""
    if cam.classes is None:
        return None
    ids: set[int] = set()
    problems = []
    for j, item in enumerate(cam.classes):
        if isinstance(item, int):
            if 0 <= item < len(labels):
                ids.add(item)
            else:
                problems.append(
                    f"cameras[{index}].classes[{j}] ({cam.name}): class id {item} out of "
                    f"range 0..{len(labels) - 1}"
                )
        elif item in labels:
            ids.add(labels.index(item))
        else:
            problems.append(f"cameras[{index}].classes[{j}] ({cam.name}): unknown class {item!r}")
    if problems:
        raise ConfigError(problems)
    return frozenset(ids)


def camera_rules(cfg: Config, loaded: LoadedModel) -> dict[str, CameraRules]:
    """Per-camera decode parameters and class filters; ConfigError lists every bad camera."""
    spec = loaded.backend.input_spec
    rules: dict[str, CameraRules] = {}
    problems: list[str] = []
    for i, cam in enumerate(cfg.cameras):
        try:
            ids = class_ids_for(cam, i, loaded.labels)
        except ConfigError as exc:
            problems += exc.problems
            continue
        threshold = (
            cam.score_threshold if cam.score_threshold is not None else cfg.model.score_threshold
        )
        rules[cam.name] = CameraRules(DecodeParams(spec.width, spec.height, threshold), ids)
    if problems:
        raise ConfigError(problems)
    return rules
