"""Config of named models (``models:``), secondary stages (``secondary:``) and
re-identification across cameras (``reid:``).

A detector type (``MODEL_TYPES``: yolox, nanodet, ...) finds objects in frames; an embedder
type (``EMBEDDER_TYPES``: reid) describes crops of tracked objects. Both are declared here by
name; the detector decoders register in ``vidpipe.postprocess.decode``, the embedders in
``vidpipe.secondary``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from vidpipe.config.base import ConfigModel
from vidpipe.config.inference import ModelConfig
from vidpipe.config.registry import EMBEDDER_TYPES, MODEL_TYPES

EMBEDDER_TYPES.declare("reid")

if TYPE_CHECKING:
    AnyModelType = str
else:
    AnyModelType = Literal[(*MODEL_TYPES.tags, *EMBEDDER_TYPES.tags)]

MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class NamedModelConfig(ModelConfig):
    """One entry of ``models:``: a detector (yolox, yolov8, ssd, nanodet) that cameras pick
    with ``detector:``, or an embedder (reid) that a ``secondary:`` stage runs on crops."""

    path: Path = Field(description="ONNX or OpenVINO IR file of the model")
    type: AnyModelType = Field(
        "yolox",
        description="detector types: yolox, yolov8, ssd, nanodet (as model.type); embedder "
        "types: reid (person re-identification: a crop in, an embedding out)",
    )

    @property
    def is_detector(self) -> bool:
        return self.type in MODEL_TYPES.tags

    @model_validator(mode="after")
    def _input_size_of_a_detector(self) -> NamedModelConfig:
        if self.input_size is not None and not self.is_detector:
            raise ValueError(
                f"input_size: a {self.type} model takes its crops at its own size; "
                "input_size applies to detectors"
            )
        return self


class SecondaryConfig(ConfigModel):
    """A model run on crops of tracked objects, beside detection and never in its way."""

    model: str = Field(description="the name of an embedder in models: (type reid)")
    on: list[str | int] = Field(
        default_factory=lambda: list[str | int](["person"]),
        min_length=1,
        description="the detector's classes (names or ids) whose tracks are cropped",
    )
    min_box: tuple[int, int] = Field(
        (32, 64), description="smallest box cropped, width and height in frame pixels"
    )
    every_s: float = Field(
        1.0, gt=0, description="at most one crop per track this often (seconds of capture time)"
    )
    max_per_track: int = Field(8, ge=1, description="crops a track gets at most")
    queue_size: int = Field(
        64,
        ge=1,
        le=4096,
        description="crops waiting for the model; one more is dropped and counted "
        '(vidpipe_secondary_dropped_total{reason="secondary_busy"})',
    )
    include_embeddings: bool = Field(
        False,
        description="records carry the track's mean embedding (base64 float16) where they "
        "name what the model said",
    )


class ReidLink(ConfigModel):
    """Who can be who: a track on ``to`` may match one that was on ``from`` between
    ``min_s`` and ``max_s`` earlier."""

    from_: str = Field(alias="from", description="camera a person leaves")
    to: str = Field(description="camera the person reaches")
    min_s: float = Field(0.0, ge=0, description="least time between leaving and arriving")
    max_s: float = Field(600.0, gt=0, description="most time between leaving and arriving")

    @model_validator(mode="after")
    def _ordered(self) -> ReidLink:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s {self.min_s} is above max_s {self.max_s}")
        return self


class ReidConfig(ConfigModel):
    """Re-identification across cameras: tracks whose mean embeddings match share a
    ``global_id``."""

    enabled: bool = Field(
        True, description="match tracks across cameras (needs a secondary stage of type reid)"
    )
    window_s: float = Field(
        600.0, gt=0, description="how far back a track may be matched (seconds of wall time)"
    )
    # measured on a two-camera scene of the walkway clip at f32 and bf16: every run matched
    # all six people with none merged between 0.895 and 0.935 (benchmarks/README.md,
    # "Re-identification across cameras")
    threshold: float = Field(
        0.91,
        gt=-1,
        lt=1,
        description="least cosine similarity of two tracks' mean embeddings (person "
        "re-identification, 8 crops a track) to call them one person; lower it and different "
        "people in similar clothes merge, raise it and one person gets two ids",
    )
    reassociate_s: float = Field(
        5.0,
        ge=0,
        le=60,
        description="a track that starts within this many seconds of another track of the same "
        "camera ending, and looks like it (threshold), is that person after an occlusion: it "
        "takes the ended track's global id (0: across cameras only)",
    )
    links: list[ReidLink] = Field(
        default_factory=list,
        description="the camera graph; empty: any camera may match any other within window_s",
    )


def model_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a model (None: it can)."""
    if not MODEL_NAME.fullmatch(name) or len(name) > 64:
        return (
            f"model name {name!r} may use only letters, digits, '_', '-', '.', must start "
            "with a letter or digit and have at most 64 characters"
        )
    return None


def check_model_names(models: dict[str, NamedModelConfig]) -> dict[str, NamedModelConfig]:
    for name in models:
        problem = model_name_problem(name)
        if problem:
            raise ValueError(problem)
    return models


DEFAULT_DETECTOR = "default"
"""The name ``model:`` goes by among the detectors (records name it by its file)."""


def detectors_of(
    model: ModelConfig | None, models: dict[str, NamedModelConfig]
) -> dict[str, ModelConfig]:
    """Every detector by name: ``model:`` as ``default``, then the detectors of ``models:``."""
    found: dict[str, ModelConfig] = {} if model is None else {DEFAULT_DETECTOR: model}
    found.update({name: m for name, m in models.items() if m.is_detector})
    return found


def check_detector_choice(
    camera: str,
    where: str,
    detector: str | None,
    detectors: dict[str, ModelConfig],
    models: dict[str, NamedModelConfig],
) -> str:
    """The detector a camera runs (its name); ValueError starting with ``where`` if its
    ``detector:`` names none, or if it names none and there is no one default."""
    names = ", ".join(n for n in detectors if n != DEFAULT_DETECTOR) or "none"
    if detector is not None:
        if detector in models and not models[detector].is_detector:
            raise ValueError(
                f"{where}: camera {camera!r}: {detector!r} is a {models[detector].type} model, "
                f"not a detector (detectors in models: {names})"
            )
        if detector not in models:
            raise ValueError(
                f"{where}: camera {camera!r}: no model named {detector!r} in models: "
                f"(detectors: {names})"
            )
        return detector
    if DEFAULT_DETECTOR in detectors:
        return DEFAULT_DETECTOR
    if len(detectors) == 1:
        return next(iter(detectors))
    raise ValueError(
        f"{where}: camera {camera!r} names no detector, and with no model: there is no "
        f"default among the detectors in models: ({names}); set detector: to one of them"
    )


def check_embedder(where: str, name: str, models: dict[str, NamedModelConfig]) -> None:
    """ValueError starting with ``where`` unless ``name`` is an embedder in ``models:``."""
    embedders = ", ".join(n for n, m in models.items() if not m.is_detector) or "none"
    if name not in models:
        raise ValueError(f"{where}: no model named {name!r} in models: (embedders: {embedders})")
    if models[name].is_detector:
        raise ValueError(
            f"{where}: {name!r} is a {models[name].type} detector; a secondary stage runs an "
            f"embedder (type {', '.join(EMBEDDER_TYPES.tags)}; in models: {embedders})"
        )


def check_model_references(cfg: Any) -> None:
    """Every name a ``Config`` gives a model or a camera refers to what it should:
    ``models:`` names, one default detector, each camera's ``detector:``, each secondary
    stage's embedder, each ``reid.links`` camera. ValueError starting with the YAML path."""
    for name in cfg.models:
        problem = model_name_problem(name)
        if problem:
            raise ValueError(f"models: {problem}")
    if cfg.model is not None and DEFAULT_DETECTOR in cfg.models:
        raise ValueError(
            f"models.{DEFAULT_DETECTOR}: the name {DEFAULT_DETECTOR!r} is model:'s; "
            "give this model another name"
        )
    detectors = detectors_of(cfg.model, cfg.models)
    if not detectors:
        raise ValueError("model: missing: give model:, or a detector in models:")
    for i, cam in enumerate(cfg.cameras):
        check_detector_choice(
            cam.name, f"cameras[{i}].detector", cam.detector, detectors, cfg.models
        )
    for j, stage in enumerate(cfg.secondary):
        check_embedder(f"secondary[{j}].model", stage.model, cfg.models)
    for i, cam in enumerate(cfg.cameras):
        for j, stage in enumerate(cam.secondary or ()):
            check_embedder(f"cameras[{i}].secondary[{j}].model", stage.model, cfg.models)
    names = {cam.name for cam in cfg.cameras}
    for k, link in enumerate(cfg.reid.links):
        for end, camera in (("from", link.from_), ("to", link.to)):
            if camera not in names:
                raise ValueError(f"reid.links[{k}].{end}: no camera named {camera!r}")
