"""What every decoder is given besides the raw outputs (its own module so that a model type's
decoder module and the registry in ``decode.py`` can both import it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vidpipe.types import Detections

#: Strides of the three detection heads of YOLOX, YOLOv8 and NanoDet, in the order their
#: anchors appear.
STRIDES: tuple[int, ...] = (8, 16, 32)


@dataclass(frozen=True, slots=True)
class DecodeParams:
    """What a decoder needs to know besides the raw outputs.

    Attributes:
        input_w: model input width, pixels.
        input_h: model input height, pixels.
        score_threshold: rows scoring below this are dropped.
    """

    input_w: int
    input_h: int
    score_threshold: float


Decoder = Callable[[Sequence[np.ndarray], DecodeParams], Detections]

ShapeCheck = Callable[[Sequence[tuple[int, ...]], int, int], tuple[int, list[str]]]
"""``check(output_shapes, input_w, input_h) -> (num_classes, problems)``: whether a model's
outputs (every one, batch dimension included, possibly dynamic: ``<= 0``) fit a decoder."""


def fmt_shape(shape: Sequence[int]) -> str:
    """``(1, 3549, 85)``, as the load-time messages print a shape."""
    return "(" + ", ".join(str(d) for d in shape) + ")"


def batch_ok(shape: Sequence[int]) -> bool:
    """A leading batch dimension a one-frame request can use (dynamic, or at least 1)."""
    return shape[0] <= 0 or shape[0] >= 1
