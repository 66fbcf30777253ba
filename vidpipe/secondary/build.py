"""``build_secondary``: the secondary stage of a config, its classes resolved and its models
opened (the assembly calls it and puts the stage after tracking)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vidpipe.config import Config, ConfigError, GpuConfig
from vidpipe.config.registry import EMBEDDER_TYPES
from vidpipe.infer.base import BackendError
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.secondary.lane import Embedder
from vidpipe.secondary.metrics import secondary_metrics
from vidpipe.secondary.stage import CropRule, SecondaryStage


def crop_rules(cfg: Config, labels_of: Callable[[str], Labels]) -> dict[str, list[CropRule]]:
    """Each enabled camera's crop rules, its ``on`` classes resolved against its detector.

    A camera that does not track has none from the top-level ``secondary:`` (it never has a
    confirmed track); its own ``secondary:`` is an error.

    Raises:
        ConfigError: every bad class (``secondary[j].on[k]`` or
            ``cameras[i].secondary[j].on[k]``, with the camera), every model listed twice for
            one camera, every camera of its own ``secondary:`` that does not track.
    """
    problems: list[str] = []
    rules: dict[str, list[CropRule]] = {}
    for i, cam in enumerate(cfg.cameras):
        entries = cfg.secondary_of(cam)
        if not cam.enabled or not entries:
            continue
        base = "secondary" if cam.secondary is None else f"cameras[{i}].secondary"
        if not cam.tracks:
            if cam.secondary is not None:
                problems.append(
                    f"{base} ({cam.name}): a secondary stage crops tracked objects; set "
                    "tracking: enabled: true (or a zone or line) on this camera"
                )
            continue
        labels = labels_of(cam.name)
        mine: list[CropRule] = []
        for j, entry in enumerate(entries):
            try:
                ids = labels.ids(entry.on, where=f"{base}[{j}].on", camera=cam.name)
            except ConfigError as exc:
                problems += exc.problems
                continue
            if any(r.model == entry.model for r in mine):
                problems.append(
                    f"{base}[{j}].model ({cam.name}): model {entry.model!r} is listed twice "
                    "for this camera"
                )
                continue
            mine.append(CropRule.of(entry, ids or ()))
        rules[cam.name] = mine
    if problems:
        raise ConfigError(problems)
    return {name: r for name, r in rules.items() if r}


def embedder_precision(cfg: Config) -> str:
    """The precision the embedders run at: the detector's, where it names one."""
    precision = getattr(cfg.inference, "precision", "auto")
    if cfg.inference.type == "openvino" or (precision == "f16" and embedder_gpu(cfg)):
        return str(precision)
    return "auto"


def embedder_gpu(cfg: Config) -> Any | None:
    """The CUDA device the embedders run on: the first of a GPU backend's ``devices`` (None:
    the CPU, with OpenVINO)."""
    if not isinstance(cfg.inference, GpuConfig):
        return None
    import torch

    return torch.device("cuda", cfg.inference.devices[0])


def build_secondary(
    cfg: Config, labels_of: Callable[[str], Labels], metrics: Metrics
) -> SecondaryStage | None:
    """The secondary stage of ``cfg`` (started), or None where no camera has one.

    Args:
        cfg: the whole config.
        labels_of: a camera's detector's class names, by camera name.
        metrics: the pipeline's metrics (the stage's own go on its registry).

    Raises:
        ConfigError: see ``crop_rules``.
        BackendError: a model cannot be opened or is not shaped like its type (the message
            starts with ``models.<name>``).
    """
    rules = crop_rules(cfg, labels_of)
    if not rules:
        return None
    names = list(dict.fromkeys(r.model for cam in rules.values() for r in cam))
    queue_sizes: dict[str, int] = {}
    for entry in [*cfg.secondary, *(e for c in cfg.cameras for e in c.secondary or ())]:
        # one queue per model: the largest any entry of it asks for
        queue_sizes[entry.model] = max(queue_sizes.get(entry.model, 0), entry.queue_size)
    embedders = open_embedders(cfg, names)
    return SecondaryStage(rules, embedders, cfg.reid, secondary_metrics(metrics), queue_sizes)


def open_embedders(cfg: Config, names: list[str]) -> dict[str, Embedder]:
    """The embedders ``names`` (of ``models:``; detectors among them are skipped), opened.

    Raises:
        BackendError: a model cannot be opened or is not shaped like its type (the message
            starts with ``models.<name>``); those opened before it are closed.
    """
    embedders: dict[str, Embedder] = {}
    try:
        for name in names:
            model = cfg.models[name]
            if model.is_detector:
                continue
            try:
                open_embedder = EMBEDDER_TYPES.factory(model.type)
                embedders[name] = open_embedder(
                    name, model, embedder_precision(cfg), embedder_gpu(cfg)
                )
            except BackendError as exc:
                raise BackendError(f"models.{name}: {exc}") from None
    except BaseException:
        for opened in embedders.values():
            opened.close()
        raise
    return embedders
