"""Config of event clips and best-shot crops (``clips:`` at the top and per camera).

The top-level ``clips:`` is the default of every camera; a camera's own ``clips:`` overrides
the keys it names (``triggers`` and ``crop`` key by key). ``merge_clip_defaults`` does that on
the raw YAML before validation, so an error in a camera's merged settings names
``cameras[i].clips...``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vidpipe.config.base import ConfigModel

ZoneTrigger = Literal["enter", "leave"]
LineTrigger = Literal["cross"]


def _enter() -> list[ZoneTrigger]:
    return ["enter"]


def _cross() -> list[LineTrigger]:
    return ["cross"]


class ClipTriggers(ConfigModel):
    """What opens (or extends) a clip; each kind is optional (an empty list: off)."""

    zones: list[ZoneTrigger] = Field(
        default_factory=_enter, description="zone events that trigger a clip"
    )
    lines: list[LineTrigger] = Field(
        default_factory=_cross, description="line events that trigger a clip"
    )
    classes: list[str | int] = Field(
        default_factory=list,
        description="a detection of one of these classes (names or ids) at min_score or more "
        "triggers a clip; empty: detections alone never do",
    )
    min_score: float = Field(0.5, ge=0, le=1, description="least score of a class trigger")


class CropConfig(ConfigModel):
    """The best-shot crop of each confirmed track seen in a clip."""

    enabled: bool = Field(True, description="write the best crop of each track next to the clip")
    padding: float = Field(
        0.1, ge=0, le=2, description="margin around the box, as a fraction of its width/height"
    )
    jpeg_quality: int = Field(90, ge=1, le=100)
    max_per_clip: int = Field(8, ge=1, le=100, description="crops of at most this many tracks")
    source: Literal["detect", "record"] = Field(
        "detect",
        description="detect: cut from the detected frame; record: cut from the record input's "
        "picture that arrived nearest it, at that stream's size (a camera with a record input "
        "only; decoded once per clip, when it is written)",
    )


class ClipsConfig(ConfigModel):
    """Event clips: MP4 by stream copy around triggers, with a ring buffer for the pre-roll."""

    enabled: bool = Field(False, description="record clips (installs the packet ring buffer)")
    pre_s: float = Field(5.0, ge=0, le=60, description="seconds before the first trigger")
    post_s: float = Field(5.0, ge=0, le=300, description="seconds after the last trigger")
    max_s: float = Field(120.0, gt=0, le=3600, description="longest clip; a longer one is cut")
    dir: str = Field("var/clips", min_length=1, description="clips go to <dir>/<camera>/")
    max_total_gb: float = Field(
        10.0, gt=0, description="per camera: the oldest clips go when they take more"
    )
    max_age_days: float = Field(7.0, gt=0, description="clips older than this are deleted")
    buffer_mb: float = Field(
        64.0,
        gt=0,
        le=4096,
        description="ring-buffer limit per camera: the pre-roll, and the open clip (64 MB hold "
        "pre_s + max_s = 125 s at 4 Mbit/s); reaching it drops the oldest packets, counted",
    )
    triggers: ClipTriggers = Field(default_factory=ClipTriggers)
    crop: CropConfig = Field(default_factory=CropConfig)

    def window_problem(self) -> str | None:
        """Why ``pre_s``, ``post_s`` and ``max_s`` do not fit together, or None.

        Checked by ``Config`` (after the defaults are merged), so that the message can name
        the camera.
        """
        if self.pre_s + self.post_s > self.max_s:
            return (
                f"pre_s + post_s ({self.pre_s:g} + {self.post_s:g} s) must not exceed max_s "
                f"({self.max_s:g} s)"
            )
        return None

    def crop_problem(self, has_record_input: bool) -> str | None:
        """Why the crop settings do not fit the camera, or None (checked by ``Config``)."""
        record = self.enabled and self.crop.enabled and self.crop.source == "record"
        if record and not has_record_input:
            return (
                "crop.source: record needs a record input (inputs: with roles: [record]); "
                "set it on the cameras that have one, or use source: detect"
            )
        return None


_NESTED = ("triggers", "crop")


def merge_clip_defaults(data: Any) -> Any:
    """The raw config with the top-level ``clips`` merged under every camera's own ``clips``.

    Only dicts are merged; anything else is left for validation to reject where it stands.
    """
    if not isinstance(data, dict):
        return data
    default = data.get("clips")
    cameras = data.get("cameras")
    if not isinstance(default, dict) or not default or not isinstance(cameras, list):
        return data
    merged_cams = []
    for cam in cameras:
        if isinstance(cam, dict):
            own = cam.get("clips")
            if own is None:
                own = {}
            if isinstance(own, dict):
                cam = {**cam, "clips": _merge(default, own)}
        merged_cams.append(cam)
    return {**data, "cameras": merged_cams}


def _merge(default: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    out = {**default, **own}
    for key in _NESTED:
        if isinstance(default.get(key), dict) and isinstance(own.get(key), dict):
            out[key] = {**default[key], **own[key]}
    return out
