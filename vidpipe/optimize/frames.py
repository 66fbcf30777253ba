"""Frames for calibration and for measuring agreement, letterboxed as the daemon does it.

Each frame is made the way the model type wants its input (its ``ModelInput``, from the
registry: ``vidpipe.postprocess.decode.model_type(...).input``): placed top-left or centred,
padded with the type's value, and, for a type trained on normalised pixels (NanoDet),
normalised here with its mean and std. ``vidpipe optimize`` calibrates and runs the model file
as it is, without the daemon's load-time preprocessing, so the normalisation the daemon puts
in the graph (``vidpipe.infer.openvino``) must be in the tensor instead; the INT8 IR then takes
the same input as the float model, and the daemon normalises in its graph for both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.preprocess.letterbox import DEFAULT_INPUT, ModelInput, letterbox
from vidpipe.types import Letterbox

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp"})

Progress = Callable[[str], None]
Image = npt.NDArray[Any]  # (H, W, 3) uint8 BGR, as OpenCV decodes it


class FramesError(Exception):
    """A frame source that cannot be read, named."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One letterboxed frame: the model's f32 NCHW input and the mapping back to the frame."""

    source: str
    tensor: npt.NDArray[np.float32]
    letterbox: Letterbox


@dataclass(frozen=True, slots=True)
class Split:
    """Disjoint sets: calibration, validation (only accuracy control tunes on it), test."""

    calibration: list[Sample]
    validation: list[Sample]
    test: list[Sample]


def to_sample(
    image: npt.NDArray[np.uint8],
    width: int,
    height: int,
    source: str,
    model_input: ModelInput = DEFAULT_INPUT,
) -> Sample:
    """The daemon's letterbox of ``model_input`` (BGR; placement and pad value of the model
    type: YOLOX's top-left, pad 114), as ``(1, 3, h, w)`` float32, normalised with the type's
    mean and std where it has them (pad included, as the daemon's graph normalises it)."""
    boxed, lb = letterbox(image, width, height, model_input)
    tensor = np.ascontiguousarray(boxed.transpose(2, 0, 1)[None], dtype=np.float32)
    if model_input.mean is not None:
        tensor -= np.asarray(model_input.mean, np.float32).reshape(1, 3, 1, 1)
    if model_input.std is not None:
        tensor /= np.asarray(model_input.std, np.float32).reshape(1, 3, 1, 1)
    return Sample(source, tensor, lb)


def read_frames(source: str, count: int) -> list[tuple[str, Image]]:
    """Up to ``count`` frames spread evenly over a clip or stream (one image: that image)."""
    path = Path(source.removeprefix("file://"))
    if path.suffix.lower() in IMAGE_SUFFIXES:
        image = cv2.imread(str(path))
        if image is None:
            raise FramesError(f"{source}: cannot read the image")
        return [(path.name, image)]
    cap = cv2.VideoCapture(source if "://" in source else str(path), cv2.CAP_FFMPEG)
    try:
        if not cap.isOpened():
            raise FramesError(f"{source}: cannot open the video")
        total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        step = max(1, total // count) if total > 0 else 1  # a live stream: consecutive frames
        frames: list[tuple[str, Image]] = []
        index = 0
        while len(frames) < count:
            ok, image = cap.read()
            if not ok or image is None:
                break
            if index % step == 0:
                frames.append((f"{Path(source).name}#{index}", image))
            index += 1
    finally:
        cap.release()
    if not frames:
        raise FramesError(f"{source}: no frame could be read")
    return frames


def collect(
    sources: Sequence[str],
    total: int,
    width: int,
    height: int,
    progress: Progress,
    model_input: ModelInput = DEFAULT_INPUT,
) -> list[Sample]:
    """About ``total`` frames made as ``model_input`` says (``to_sample``), shared evenly
    among ``sources``."""
    videos = [s for s in sources if Path(s).suffix.lower() not in IMAGE_SUFFIXES]
    images = len(sources) - len(videos)
    per_video = math.ceil(max(1, total - images) / max(1, len(videos)))
    samples: list[Sample] = []
    for i, source in enumerate(sources, 1):
        for name, image in read_frames(source, per_video):
            samples.append(to_sample(image, width, height, name, model_input))
        if source in videos or i == len(sources):  # not one line per image
            progress(f"frames: {i}/{len(sources)} sources read, {len(samples)} frames")
    return samples


def split(samples: Sequence[Sample], with_validation: bool) -> Split:
    """Interleaved, so every source is in every set: 1 of 2 frames calibrates, the rest is
    the test set (split 1 of 2 again into validation and test when accuracy control tunes)."""
    calibration = list(samples[0::2])
    held_out = list(samples[1::2])
    if not with_validation:
        return Split(calibration, [], held_out)
    return Split(calibration, held_out[0::2], held_out[1::2])
