"""NanoDet (GFL head) decoding: per-stride class scores and box-side distributions.

A NanoDet export has two outputs per head (strides 8, 16, 32): class scores ``(1, N, C)``,
sigmoid already applied in the graph, and a distance distribution ``(1, N, 4 * (R + 1))``:
for each side of the box (left, top, right, bottom) ``R + 1`` logits over the distances
``0 .. R`` strides (Generalized Focal Loss; ``R`` is ``reg_max``, 7 in NanoDet). A side's
distance is the expectation of the softmax of its logits, times the stride, measured from the
anchor point ``(gx * s + (s - 1) / 2, gy * s + (s - 1) / 2)`` (the centre NanoDet's own
post-processing uses for these exports). ``N = (input_w / s) * (input_h / s)``, row-major.

Outputs are matched to heads by their row count (each head's is distinct), not by position,
so an export that interleaves them (``cls_8, dis_8, cls_16 ...``) decodes the same.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vidpipe.postprocess.params import STRIDES, DecodeParams, batch_ok, fmt_shape
from vidpipe.preprocess.letterbox import ModelInput
from vidpipe.types import Detections

REG_MAX = 7
BINS = 4 * (REG_MAX + 1)

NANODET_INPUT = ModelInput(
    placement="centre",
    pad_value=0,
    mean=(103.53, 116.28, 123.675),
    std=(57.375, 57.12, 58.395),
)
"""NanoDet's input: BGR, centred, pad 0, normalised with ImageNet's mean and std (BGR)."""

Heads = list[tuple[int, int, int]]
"""Per stride, in ``STRIDES`` order: ``(stride, class output index, distance output index)``."""


def nanodet_heads(
    shapes: Sequence[Sequence[int]], input_w: int, input_h: int
) -> tuple[Heads, int, list[str]]:
    """Match a NanoDet export's outputs to its heads.

    Args:
        shapes: every output's shape, batch dimension included (``(1, N, K)`` or ``(N, K)``).
        input_w: model input width, pixels.
        input_h: model input height, pixels.

    Returns:
        ``(heads, num_classes, problems)``; ``heads`` is complete only when ``problems`` is
        empty.
    """
    listed = ", ".join(fmt_shape(s) for s in shapes) or "none"
    what = f"model outputs {listed} do not look like NanoDet for input {input_w}x{input_h}: "
    if len(shapes) != 2 * len(STRIDES) or any(
        len(s) not in (2, 3) or (len(s) == 3 and not batch_ok(s)) for s in shapes
    ):
        return (
            [],
            0,
            [
                what + f"expected {2 * len(STRIDES)} outputs, (1, N, C) and (1, N, {BINS}) "
                "per stride 8, 16, 32"
            ],
        )
    rows = [s[-2] for s in shapes]
    heads: Heads = []
    classes: set[int] = set()
    problems: list[str] = []
    for stride in STRIDES:
        n = (input_w // stride) * (input_h // stride)
        mine = [i for i, r in enumerate(rows) if r == n]
        # the distances are the one with 4 x 8 columns; if the classes happen to number 32
        # too, the export's own order (class scores first) decides
        dist = [i for i in mine if shapes[i][-1] == BINS]
        if len(mine) != 2 or not dist:
            problems.append(f"no class-score and {BINS}-bin distance pair with {n} rows")
            continue
        d = dist[-1]
        c = mine[0] if mine[0] != d else mine[1]
        heads.append((stride, c, d))
        classes.add(int(shapes[c][-1]))
    if len(classes) > 1:
        problems.append(f"the heads disagree on the class count: {sorted(classes)}")
    if problems:
        return [], 0, [what + "; ".join(problems)]
    return heads, classes.pop(), []


def check_nanodet(
    shapes: Sequence[tuple[int, ...]], input_w: int, input_h: int
) -> tuple[int, list[str]]:
    """The load-time check of a NanoDet model's outputs (``ShapeCheck``)."""
    _, num_classes, problems = nanodet_heads(shapes, input_w, input_h)
    return num_classes, problems


@functools.lru_cache(maxsize=16)
def _centres(input_w: int, input_h: int, stride: int) -> npt.NDArray[np.float32]:
    """``(N, 2)`` float32 anchor points ``(x, y)`` of one head, row-major, read-only."""
    gy, gx = np.mgrid[0 : input_h // stride, 0 : input_w // stride]
    offset = 0.5 * (stride - 1)
    xy = np.stack([gx.ravel() * stride + offset, gy.ravel() * stride + offset], axis=1)
    out = xy.astype(np.float32)
    out.setflags(write=False)
    return out


def _distances(logits: np.ndarray, stride: int) -> npt.NDArray[np.float32]:
    """``(n, 4 * (R + 1))`` side logits to ``(n, 4)`` distances in input pixels."""
    z = logits.reshape(-1, 4, REG_MAX + 1).astype(np.float32)
    z = np.exp(z - z.max(axis=2, keepdims=True))  # the max keeps exp() finite
    bins = np.arange(REG_MAX + 1, dtype=np.float32)
    return (z @ bins) / z.sum(axis=2) * np.float32(stride)


def decode_nanodet(outputs: Sequence[np.ndarray], params: DecodeParams) -> Detections:
    """Decode a NanoDet (GFL) export.

    Args:
        outputs: the six head outputs of one image, in any order (see the module docstring),
            each ``(N, K)`` or ``(1, N, K)``.
        params: input size and score threshold.

    Returns:
        Detections with the best class score per anchor point and boxes in input pixels.

    Raises:
        ValueError: the outputs do not have the expected shapes.
    """
    heads, _, problems = nanodet_heads([o.shape for o in outputs], params.input_w, params.input_h)
    if problems:
        raise ValueError(problems[0])
    boxes, scores, ids = [], [], []
    for stride, ci, di in heads:
        cls = outputs[ci][0] if outputs[ci].ndim == 3 else outputs[ci]
        # only the few rows above the threshold have their distributions decoded
        best = cls.max(axis=1)
        cand = np.flatnonzero(best >= params.score_threshold)
        if not cand.size:
            continue
        dist = outputs[di][0] if outputs[di].ndim == 3 else outputs[di]
        d = _distances(dist[cand], stride)
        xy = _centres(params.input_w, params.input_h, stride)[cand]
        boxes.append(np.concatenate([xy - d[:, :2], xy + d[:, 2:]], axis=1))
        scores.append(best[cand])
        ids.append(cls[cand].argmax(axis=1))
    if not boxes:
        return Detections.empty()
    return Detections(
        np.concatenate(boxes).astype(np.float32, copy=False),
        np.concatenate(scores).astype(np.float32, copy=False),
        np.concatenate(ids),
    )
