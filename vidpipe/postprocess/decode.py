"""Model types: each one registration of its decoder, output check and input; and the
decoders of YOLOX, YOLOv8 and SSD (NanoDet's is in :mod:`vidpipe.postprocess.nanodet`).

Every decoder takes the outputs of ONE image (batch dimension already stripped) and returns
:class:`~vidpipe.types.Detections` whose boxes are in model-input pixels, i.e. still
letterboxed. Only rows scoring at least ``params.score_threshold`` are returned; a row that
scores several classes keeps its best class only. NMS and un-letterboxing are done later, in
:mod:`vidpipe.postprocess.pipeline`.

:func:`check_output_shapes` validates a model's output shapes once, at load time, so that a
model that does not fit fails with a clear message instead of decoding garbage per frame.

A model type is declared by name in ``vidpipe.config.inference`` and implemented here in one
``register_decoder`` call: its decoder, its output check and its ``ModelInput`` (letterbox
placement, pad value, normalisation), which the backend builds its input from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vidpipe.config import MODEL_TYPES
from vidpipe.postprocess.nanodet import NANODET_INPUT, check_nanodet, decode_nanodet
from vidpipe.postprocess.params import (
    STRIDES,
    DecodeParams,
    Decoder,
    ShapeCheck,
    batch_ok,
    fmt_shape,
)
from vidpipe.preprocess.letterbox import DEFAULT_INPUT, ModelInput
from vidpipe.types import Detections

__all__ = [
    "DECODERS",
    "DECODER_NAMES",
    "STRIDES",
    "DecodeParams",
    "Decoder",
    "ModelType",
    "check_output_shapes",
    "decode_nanodet",
    "decode_ssd",
    "decode_yolov8",
    "decode_yolox",
    "model_type",
    "num_anchors",
    "register_decoder",
]


def num_anchors(input_w: int, input_h: int) -> int:
    """Number of anchor points of a three-head (strides 8, 16, 32) anchor-free model."""
    return sum((input_w // s) * (input_h // s) for s in STRIDES)


@functools.lru_cache(maxsize=8)
def _yolox_grid(input_w: int, input_h: int) -> tuple[npt.NDArray[np.float32], ...]:
    """Grid offsets and strides of every YOLOX anchor point, computed once per input size.

    Returns:
        ``grid (A, 2)`` float32 ``(gx, gy)`` and ``stride (A, 1)`` float32, read-only, with
        ``A = num_anchors(input_w, input_h)``; heads in stride order, row-major, gx fastest.
    """
    grids, strides = [], []
    for s in STRIDES:
        gy, gx = np.mgrid[0 : input_h // s, 0 : input_w // s]
        grids.append(np.stack([gx.ravel(), gy.ravel()], axis=1))
        strides.append(np.full((gx.size, 1), s))
    grid = np.concatenate(grids).astype(np.float32)
    stride = np.concatenate(strides).astype(np.float32)
    grid.setflags(write=False)
    stride.setflags(write=False)
    return grid, stride


def _single_output(outputs: Sequence[np.ndarray], model: str) -> np.ndarray:
    if len(outputs) != 1:
        raise ValueError(f"{model} decoder expects exactly 1 output, got {len(outputs)}")
    return np.asarray(outputs[0])


def _cxcywh_to_xyxy(cxcy: np.ndarray, wh: np.ndarray) -> npt.NDArray[np.float32]:
    """``(N, 2)`` centres and ``(N, 2)`` sizes to ``(N, 4)`` float32 ``x1, y1, x2, y2``."""
    half = wh * 0.5
    return np.concatenate([cxcy - half, cxcy + half], axis=1).astype(np.float32, copy=False)


def decode_yolox(outputs: Sequence[np.ndarray], params: DecodeParams) -> Detections:
    """Decode a YOLOX head output.

    Args:
        outputs: one array ``(A, 5 + C)``: per anchor point ``x, y`` grid offsets, ``w, h``
            log sizes, objectness, then ``C`` class probabilities (sigmoid already applied).
            ``A = num_anchors(input_w, input_h)``.
        params: input size and score threshold.

    Returns:
        Detections with ``score = objectness * best class probability`` and boxes in input
        pixels: ``cx = (x + gx) * s``, ``w = exp(w) * s``.

    Raises:
        ValueError: the output does not have the expected shape.
    """
    out = _single_output(outputs, "YOLOX")
    grid, stride = _yolox_grid(params.input_w, params.input_h)
    if out.ndim != 2 or out.shape[0] != grid.shape[0] or out.shape[1] < 6:
        raise ValueError(
            f"YOLOX output has shape {out.shape}, expected ({grid.shape[0]}, 5+C) for input "
            f"{params.input_w}x{params.input_h}"
        )
    # Class probabilities are sigmoids (<= 1), so score <= objectness: rows whose objectness
    # is below the threshold cannot pass, and most frames leave only a few dozen candidates.
    cand = np.flatnonzero(out[:, 4] >= params.score_threshold)
    rows = out[cand]
    cls_prob = rows[:, 5:]
    # Objectness is one factor per row, so the best class of obj * p is the best class of p.
    class_id = cls_prob.argmax(axis=1)
    score = rows[:, 4] * np.take_along_axis(cls_prob, class_id[:, None], axis=1)[:, 0]
    keep = score >= params.score_threshold
    rows, cand = rows[keep], cand[keep]
    s = stride[cand]
    cxcy = (rows[:, 0:2] + grid[cand]) * s
    wh = np.exp(rows[:, 2:4]) * s
    return Detections(_cxcywh_to_xyxy(cxcy, wh), score[keep], class_id[keep])


def decode_yolov8(outputs: Sequence[np.ndarray], params: DecodeParams) -> Detections:
    """Decode an Ultralytics YOLOv8 / YOLO11 detection export.

    Args:
        outputs: one array ``(4 + C, N)``: rows ``cx, cy, w, h`` in input pixels, then ``C``
            class scores; no objectness.
        params: input size and score threshold.

    Returns:
        Detections with the best class score per anchor and boxes in input pixels.

    Raises:
        ValueError: the output does not have the expected shape.
    """
    out = _single_output(outputs, "YOLOv8")
    if out.ndim != 2 or out.shape[0] < 5:
        raise ValueError(f"YOLOv8 output has shape {out.shape}, expected (4+C, N)")
    cls_score = out[4:]
    class_id = cls_score.argmax(axis=0)
    score = np.take_along_axis(cls_score, class_id[None, :], axis=0)[0]
    keep = np.flatnonzero(score >= params.score_threshold)
    rows = out[:4, keep].T
    return Detections(_cxcywh_to_xyxy(rows[:, 0:2], rows[:, 2:4]), score[keep], class_id[keep])


def decode_ssd(outputs: Sequence[np.ndarray], params: DecodeParams) -> Detections:
    """Decode an SSD ``DetectionOutput`` layer.

    Args:
        outputs: one array ``(1, N, 7)`` (or ``(N, 7)``); each row is ``image_id, label,
            conf, x_min, y_min, x_max, y_max`` with coordinates normalised to 0-1. The first
            row with ``image_id < 0`` ends the list.
        params: input size and score threshold.

    Returns:
        Detections with ``class_id = label`` (as the model numbers it, background
        included if the model has one) and boxes scaled to input pixels.

    Raises:
        ValueError: the output does not have the expected shape.
    """
    out = _single_output(outputs, "SSD")
    if out.shape[-1:] != (7,) or out.ndim not in (2, 3) or (out.ndim == 3 and out.shape[0] != 1):
        raise ValueError(f"SSD output has shape {out.shape}, expected (1, N, 7)")
    rows = out.reshape(-1, 7)
    ended = np.flatnonzero(rows[:, 0] < 0)
    if ended.size:
        rows = rows[: ended[0]]
    rows = rows[rows[:, 2] >= params.score_threshold]
    scale = np.array([params.input_w, params.input_h] * 2, dtype=np.float32)
    xyxy = rows[:, 3:7].astype(np.float32) * scale
    return Detections(xyxy, rows[:, 2], rows[:, 1].astype(np.int32))


def _dynamic(dim: int) -> bool:
    return dim <= 0


def _check_yolox(shape: Sequence[int], input_w: int, input_h: int) -> tuple[int, list[str]]:
    anchors = num_anchors(input_w, input_h)
    if (
        len(shape) == 3
        and batch_ok(shape)
        and (_dynamic(shape[1]) or shape[1] == anchors)
        and shape[2] >= 6
    ):
        return shape[2] - 5, []
    return 0, [
        f"model output {fmt_shape(shape)} does not look like YOLOX for input {input_w}x{input_h}: "
        f"expected (1, {anchors}, 5+C)"
    ]


def _check_yolov8(shape: Sequence[int], input_w: int, input_h: int) -> tuple[int, list[str]]:
    anchors = num_anchors(input_w, input_h)
    if (
        len(shape) == 3
        and batch_ok(shape)
        and (_dynamic(shape[2]) or shape[2] == anchors)
        and shape[1] >= 5
    ):
        return shape[1] - 4, []
    hint = ""
    if len(shape) == 3 and shape[1] == anchors and shape[2] >= 5:
        hint = " (it looks transposed: (1, N, 4+C))"
    return 0, [
        f"model output {fmt_shape(shape)} does not look like YOLOv8 for input {input_w}x{input_h}: "
        f"expected (1, 4+C, {anchors}){hint}"
    ]


def _check_ssd(shape: Sequence[int], input_w: int, input_h: int) -> tuple[int, list[str]]:
    if len(shape) == 4 and batch_ok(shape) and shape[1] == 1 and shape[3] == 7:
        return 0, []
    return 0, [
        f"model output {fmt_shape(shape)} does not look like an SSD DetectionOutput for input "
        f"{input_w}x{input_h}: expected (1, 1, N, 7)"
    ]


def _one_output(
    check: Callable[[Sequence[int], int, int], tuple[int, list[str]]], name: str
) -> ShapeCheck:
    """A ``ShapeCheck`` of a single-output model type from the check of that one shape."""

    def check_all(
        shapes: Sequence[tuple[int, ...]], input_w: int, input_h: int
    ) -> tuple[int, list[str]]:
        if len(shapes) != 1:
            listed = ", ".join(fmt_shape(s) for s in shapes) or "none"
            return 0, [f"a {name} model must have exactly 1 output, this one has: {listed}"]
        return check(shapes[0], input_w, input_h)

    return check_all


@dataclass(frozen=True, slots=True)
class ModelType:
    """The implementation of one ``model.type``: its decoder, its output check and the input
    it was trained on (placement, pad, normalisation)."""

    decode: Decoder
    check: ShapeCheck
    input: ModelInput = DEFAULT_INPUT


def register_decoder(
    name: str, decode: Decoder, check: ShapeCheck, model_input: ModelInput = DEFAULT_INPUT
) -> None:
    """Implement the model type ``name`` (declared in ``vidpipe.config.inference``): the one
    registration that makes it work, from its input to its detections."""
    MODEL_TYPES.register(name)(ModelType(decode, check, model_input))


register_decoder("yolox", decode_yolox, _one_output(_check_yolox, "yolox"))
register_decoder("yolov8", decode_yolov8, _one_output(_check_yolov8, "yolov8"))
register_decoder("ssd", decode_ssd, _one_output(_check_ssd, "ssd"))
register_decoder("nanodet", decode_nanodet, check_nanodet, NANODET_INPUT)

DECODERS: dict[str, Decoder] = {
    name: MODEL_TYPES.factory(name).decode
    for name in MODEL_TYPES.tags
    if name not in MODEL_TYPES.unimplemented()
}
"""Model type -> decoder, of every registered type."""

DECODER_NAMES: dict[Decoder, str] = {decoder: name for name, decoder in DECODERS.items()}
"""Decoder -> its model type (what a backend that postprocesses on the device is told)."""


def model_type(name: str) -> ModelType:
    """The registration of ``model.type`` ``name``.

    Raises:
        LookupError: no such type is registered.
    """
    entry: ModelType = MODEL_TYPES.factory(name)
    return entry


def check_output_shapes(
    model_type: str,
    output_shapes: Sequence[Sequence[int]],
    input_w: int,
    input_h: int,
    num_labels: int | None,
) -> tuple[int, list[str]]:
    """Check that a model's outputs fit the decoder for ``model_type``.

    Args:
        model_type: a key of :data:`DECODERS`.
        output_shapes: the shape of every model output, batch dimension included (it may be
            ``-1`` or ``0`` for a dynamic batch).
        input_w: model input width, pixels.
        input_h: model input height, pixels.
        num_labels: number of names in the label file, or None if there is none.

    Returns:
        ``(num_classes, problems)``: the class count read from the output shape and a list of
        human-readable problems, empty when the model fits. An SSD output does not encode its
        class count, so for SSD ``num_classes`` is ``num_labels`` (0 without a label file).
    """
    if model_type not in DECODERS:
        valid = ", ".join(sorted(DECODERS))
        return 0, [f"unknown model type {model_type!r}; valid types: {valid}"]
    check: ShapeCheck = MODEL_TYPES.factory(model_type).check
    shapes = [tuple(int(d) for d in s) for s in output_shapes]
    num_classes, problems = check(shapes, input_w, input_h)
    if model_type == "ssd":
        num_classes = num_labels or 0
    elif not problems and num_labels is not None and num_labels != num_classes:
        problems.append(
            f"the label file has {num_labels} names but the model outputs {num_classes} classes"
        )
    return num_classes, problems
