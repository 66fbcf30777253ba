"""Plan a config's inference before anything runs: open each detector, resolve every class
name, build the tracking scenes.

Everything that can reject a config happens here (``plan_inference``), so that ``vidpipe
check``, a start and a SIGHUP reload refuse a bad config the same way and a rejected reload
leaves the running pipeline untouched. ``vidpipe.assemble`` starts the stages from a plan.

A camera runs one detector (``Config.detector_of``); each detector that a camera of this
process uses gets its own request pool and scheduler, fed by its own hub of those cameras'
mailboxes, so a busy model cannot take another model's requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

from vidpipe.capture.decoders import check_decoders
from vidpipe.config import Config, ConfigError, ModelConfig, register_secrets
from vidpipe.config.models import DEFAULT_DETECTOR
from vidpipe.infer.base import BackendError
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.model import (
    LoadedModel,
    camera_rules,
    check_sink_classes,
    clip_trigger_classes,
    open_model,
)
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.reload import owned_cameras, running_inference
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.secondary import crop_rules, open_embedders
from vidpipe.shard import Shard
from vidpipe.track.stage import CameraScene, build_scenes
from vidpipe.types import FrameResult, ModelTag

log = logging.getLogger(__name__)


@dataclass
class DetectorPlan:
    """One opened detector and the rules of the cameras that run it."""

    name: str
    config: ModelConfig
    loaded: LoadedModel
    rules: dict[str, CameraRules]

    @property
    def tag(self) -> ModelTag:
        """How records and metrics name it: its ``models:`` key, or ``model:``'s file name."""
        name = PurePath(self.config.path).name if self.name == DEFAULT_DETECTOR else self.name
        return ModelTag(self.config.type, name)


@dataclass
class InferencePlan:
    """Every detector this process runs, each camera's detector, scenes and clip triggers."""

    detectors: dict[str, DetectorPlan]
    camera_detector: dict[str, str]
    scenes: dict[str, CameraScene]
    clip_classes: dict[str, frozenset[int]]

    @property
    def loaded(self) -> LoadedModel:
        """The first detector's model (the only one, in a config with one)."""
        return next(iter(self.detectors.values())).loaded

    def labels_of(self, camera: str) -> Labels:
        """The class names of ``camera``'s detector."""
        return self.detectors[self.camera_detector[camera]].loaded.labels

    def close(self, keep: Mapping[str, LoadedModel] | None = None) -> None:
        """Close the models this plan opened (those not in ``keep``)."""
        kept = {id(m) for m in (keep or {}).values()}
        for d in self.detectors.values():
            if id(d.loaded) not in kept:
                d.loaded.backend.close()


def capture_plan(cfg: Config, shard: Shard | None) -> dict[str, str]:
    """What the cameras need before any model is open: their secrets registered (so that no
    log line shows them), their decoders checked, and camera name -> detector
    (``used_detectors``).

    Raises:
        ConfigError: a camera's capture decoder cannot start here.
    """
    register_secrets(cfg.secrets())  # a Config built in code was never through the loader
    if missing := check_decoders(cfg):
        raise ConfigError(missing)
    return used_detectors(cfg, shard)


def used_detectors(cfg: Config, shard: Shard | None) -> dict[str, str]:
    """Camera name -> the detector it runs, for the enabled cameras this process owns
    (paused ones too: a resume needs no new model)."""
    return {name: cfg.detector_of(cam) for name, cam in owned_cameras(cfg, shard).items()}


def plan_inference(
    cfg: Config,
    metrics: Metrics,
    loaded: Mapping[str, LoadedModel] | None = None,
    shard: Shard | None = None,
    every_model: bool = False,
) -> InferencePlan:
    """Open each detector the cameras use (or reuse those in ``loaded``, by name), resolve
    each camera's class filter and scene.

    ``shard``: the cameras this process runs (None: every enabled one) pick ``hint: auto``.
    ``every_model``: open every detector in the config, used or not (``vidpipe check``).
    With no camera, the default detector alone is opened (``vidpipe detect``).

    Raises:
        BackendError: a model cannot be compiled or does not fit its type (the message
            names the model).
        ConfigError: a class name or id is not the camera's detector's (lists every one),
            or a camera's capture decoder cannot start here (its library or device is missing).
    """
    camera_detector = capture_plan(cfg, shard)
    names = list(dict.fromkeys(camera_detector.values()))
    every = cfg.detectors()
    if every_model:
        names = list(every)
    elif not names:
        names = [next(iter(every))]
    plan = InferencePlan({}, camera_detector, {}, {})
    try:
        for name in names:
            plan.detectors[name] = _open_detector(cfg, name, every[name], loaded, shard)
        # disabled cameras are resolved too (their config must be valid), against their
        # detector where it is open here; another shard checks its own cameras
        detector_of = {c.name: cfg.detector_of(c) for c in cfg.cameras}
        for name, d in plan.detectors.items():
            mine = {cam for cam, det in detector_of.items() if det == name}
            d.rules = camera_rules(cfg, d.loaded, d.config, mine)
        labels = {n: d.loaded.labels for n, d in plan.detectors.items()}
        resolvable = cfg.model_copy(
            update={"cameras": [c for c in cfg.cameras if detector_of[c.name] in labels]}
        )

        def labels_of(camera: str) -> Labels:
            return labels[detector_of[camera]]

        check_sink_classes(cfg, list(labels.values()))
        ids = {n: r.class_ids for d in plan.detectors.values() for n, r in d.rules.items()}
        plan.scenes = build_scenes(resolvable, labels_of, ids, metrics)
        plan.clip_classes = clip_trigger_classes(resolvable, labels_of)
        crop_rules(resolvable, labels_of)  # secondary stages' classes: refused before a start
    except BaseException:
        plan.close(loaded)
        raise
    return plan


def _open_detector(
    cfg: Config,
    name: str,
    model: ModelConfig,
    loaded: Mapping[str, LoadedModel] | None,
    shard: Shard | None,
) -> DetectorPlan:
    if loaded is not None and name in loaded:
        return DetectorPlan(name, model, loaded[name], {})
    where = "model" if name == DEFAULT_DETECTOR else f"models.{name}"
    try:
        opened = open_model(model, running_inference(cfg, shard))
    except BackendError as exc:
        raise BackendError(f"{where}: {exc}") from None
    return DetectorPlan(name, model, opened, {})


def build_scheduler(
    cfg: Config,
    detector: DetectorPlan,
    metrics: Metrics,
    on_result: Callable[[FrameResult], None],
    *,
    keep_images: bool = False,
    on_fatal: Callable[[BaseException], None] | None = None,
    max_frame_age_s: float | None = None,
) -> Scheduler:
    """A scheduler (not started) over one detector, with its cameras' rules."""
    loaded, model = detector.loaded, detector.config
    spec = loaded.backend.input_spec
    scheduler = Scheduler(
        loaded.backend,
        loaded.decoder,
        loaded.labels,
        metrics,
        on_result,
        default_rules=CameraRules(
            DecodeParams(spec.width, spec.height, model.score_threshold), None
        ),
        iou_threshold=model.iou_threshold,
        max_frame_age_s=(
            cfg.scheduler.max_frame_age_ms / 1000.0 if max_frame_age_s is None else max_frame_age_s
        ),
        keep_images=keep_images,
        on_fatal=on_fatal,
        model=detector.tag,
    )
    for name, rules in detector.rules.items():
        scheduler.set_rules(name, rules)
    return scheduler


def check(cfg: Config) -> list[str]:
    """Every problem with a parsed config and its models (``vidpipe check``); starts nothing."""
    problems: list[str] = []
    for i, cam in enumerate(cfg.cameras):
        if not cam.is_stream:
            path = Path(cam.url.removeprefix("file://"))
            if not path.is_file():
                problems.append(f"cameras[{i}].url ({cam.name}): file not found: {path}")
    try:
        plan = plan_inference(cfg, Metrics(), every_model=True)
    except BackendError as exc:
        return [*problems, str(exc)]
    except ConfigError as exc:
        return [*problems, *exc.problems]
    plan.close()
    try:  # every embedder in models:, used or not, against its type
        for embedder in open_embedders(cfg, list(cfg.models)).values():
            embedder.close()
    except BackendError as exc:
        problems.append(str(exc))
    return problems


def detector(cfg: Config, on_result: Callable[[FrameResult], None]) -> Scheduler:
    """A started scheduler of the default detector fed by ``submit`` (``vidpipe detect``): no
    capture, no sinks, no frame too old."""
    plan = plan_inference(cfg.model_copy(update={"cameras": []}), Metrics())
    first = next(iter(plan.detectors.values()))
    scheduler = build_scheduler(cfg, first, Metrics(), on_result, max_frame_age_s=float("inf"))
    scheduler.start()
    return scheduler
