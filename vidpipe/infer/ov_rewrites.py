"""Exact rewrites of slow patterns in a detector's OpenVINO graph, applied when it is loaded.

YOLOX (and YOLOv5 before v6) open with a "Focus" block: four strided slices of the image,
``x[..., ::2, ::2]``, ``x[..., 1::2, ::2]``, ``x[..., ::2, 1::2]``, ``x[..., 1::2, 1::2]``,
concatenated on the channels and fed to the stem convolution. OpenVINO 2026.4's CPU plugin
runs those strided ``Slice`` operations with its reference (not JIT) kernel and the
``Concat`` in plain code too. The same data movement as one reshape and transpose (a
space-to-depth) runs on JIT kernels; the concatenation order is folded into the stem
convolution's weights, so nothing else changes and the outputs agree to float rounding
(``tests/unit/test_ov_rewrites.py``). Per inference of YOLOX-Nano 416 on one thread of a
Xeon with AMX (``python -m benchmarks.layer_times``, two rounds): bf16 10.36 and 10.66 ms
before, 9.37 and 9.33 after; f32 14.77 and 14.99 before, 13.89 and 13.92 after. The slices
alone took 1.6 ms at f32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset13 as ops

_HEIGHT, _WIDTH = 2, 3  # NCHW axes


def _strided_offset(node: Any) -> tuple[int, int] | None:
    """``(axis, start)`` of a ``Slice`` that takes every second element of one axis from
    ``start`` to the end, else None."""
    if node.get_type_name() != "Slice" or node.get_input_size() != 5:
        return None
    args = []
    for i in range(1, 5):
        arg = node.input_value(i).get_node()
        if arg.get_type_name() != "Constant":
            return None
        args.append(arg.get_data().ravel())
    start, stop, step, axes = args
    if len(start) != 1 or int(step[0]) != 2 or int(start[0]) not in (0, 1):
        return None
    shape = node.get_input_partial_shape(0)
    if shape.rank.is_dynamic or shape.rank.get_length() != 4:
        return None
    axis = int(axes[0]) % 4
    length = shape[axis]
    if length.is_dynamic or int(stop[0]) < length.get_length():  # not to the end
        return None
    return axis, int(start[0])


def _focus_parts(concat: Any) -> tuple[Any, list[tuple[int, int]]] | None:
    """The sliced tensor and each concatenated part's ``(row, column)`` offset, if ``concat``
    is a Focus block's concatenation, else None."""
    if concat.get_type_name() != "Concat" or concat.get_input_size() != 4:
        return None
    if concat.get_axis() not in (1, -3):
        return None
    source, offsets = None, []
    for port in concat.inputs():
        outer = port.get_source_output().get_node()
        first = _strided_offset(outer)
        if first is None:
            return None
        inner = outer.input_value(0).get_node()
        second = _strided_offset(inner)
        if second is None or {first[0], second[0]} != {_HEIGHT, _WIDTH}:
            return None
        sliced = inner.input_value(0)
        if source is None:
            source = sliced
        elif sliced != source:
            return None
        start = dict([first, second])
        offsets.append((start[_HEIGHT], start[_WIDTH]))
    if sorted(offsets) != [(0, 0), (0, 1), (1, 0), (1, 1)]:
        return None
    return source, offsets


def _space_to_depth(source: Any) -> Any | None:
    """``source`` (N, C, H, W) as (N, 4C, H/2, W/2), channel ``(2 * row + column) * C + c``."""
    shape = source.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 4 or not shape[1:].is_static:
        return None
    c, h, w = (shape[i].get_length() for i in (1, 2, 3))
    if h % 2 or w % 2:
        return None
    split = ops.reshape(source, np.array([0, c, h // 2, 2, w // 2, 2], np.int64), True)
    moved = ops.transpose(split, np.array([0, 3, 5, 1, 2, 4], np.int64))
    return ops.reshape(moved, np.array([0, 4 * c, h // 2, w // 2], np.int64), True)


def _constant_weights(conv: Any) -> Any | None:
    """The ``Constant`` holding a ``Convolution``'s weights, directly or under a ``Convert``
    (an IR saved with f16 weights), else None."""
    if conv.get_type_name() != "Convolution":
        return None
    node = conv.input_value(1).get_node()
    if node.get_type_name() == "Convert":
        node = node.input_value(0).get_node()
    return node if node.get_type_name() == "Constant" else None


def _reordered(weights: Any, offsets: list[tuple[int, int]]) -> Any:
    """A copy of the stem convolution's weights whose input channels follow the
    space-to-depth order instead of the concatenation's."""
    old = weights.get_data()
    channels = old.shape[1] // 4
    new = np.empty_like(old)
    for part, (row, column) in enumerate(offsets):
        block = 2 * row + column
        new[:, block * channels : (block + 1) * channels] = old[
            :, part * channels : (part + 1) * channels
        ]
    return ops.constant(new)


def fuse_focus(model: ov.Model) -> int:
    """Rewrite every Focus block of ``model`` whose concatenation feeds one convolution with
    constant weights; returns how many were rewritten (0: the model is left as it was)."""
    fused = 0
    for concat in model.get_ordered_ops():
        parts = _focus_parts(concat)
        consumers = list(concat.output(0).get_target_inputs()) if parts else []
        if parts is None or len(consumers) != 1:
            continue
        conv = consumers[0].get_node()
        weights = _constant_weights(conv)
        replacement = _space_to_depth(parts[0])
        if weights is None or replacement is None:
            continue
        conv.input(0).replace_source_output(replacement.output(0))
        weights.output(0).replace(_reordered(weights, parts[1]).output(0))
        fused += 1
    if fused:
        model.validate_nodes_and_infer_types()
    return fused


def drop_output_transposes(model: ov.Model) -> list[tuple[int, ...] | None]:
    """Remove a constant ``Transpose`` that is the last operation before an output, and return
    each output's axis order (None: unchanged) for the caller to apply as a numpy view.

    YOLOX's export ends by transposing its (1, 85, 3549) head output to (1, 3549, 85); OpenVINO
    runs that with a generic kernel (0.22-0.28 ms of a 9.4 ms bf16 inference,
    ``benchmarks.layer_times``), while ``numpy.transpose`` of the copied output is a view that
    costs nothing, and the decoder's column reads become contiguous.
    """
    orders: list[tuple[int, ...] | None] = []
    for result in model.get_results():
        node = result.input_value(0).get_node()
        order = node.input_value(1).get_node() if node.get_type_name() == "Transpose" else None
        sole_use = node.get_output_size() == 1 and len(node.output(0).get_target_inputs()) == 1
        if order is None or order.get_type_name() != "Constant" or not sole_use:
            orders.append(None)
            continue
        result.input(0).replace_source_output(node.input_value(0))
        orders.append(tuple(int(axis) for axis in order.get_data().ravel()))
    if any(orders):
        model.validate_nodes_and_infer_types()
    return orders


@dataclass(frozen=True, slots=True)
class Rewrites:
    """What ``rewrite_graph`` did to a model.

    Attributes:
        focus: Focus blocks rewritten.
        output_orders: per output, the axis order its values must be given (a numpy view of
            the copied output) to have the model's own shape; None: as computed.
    """

    focus: int
    output_orders: list[tuple[int, ...] | None]

    def describe(self) -> str:
        """``focus, output transpose``, one of them, or ``none``."""
        done = (["focus"] if self.focus else []) + (
            ["output transpose"] if any(self.output_orders) else []
        )
        return ", ".join(done) or "none"


def rewrite_graph(model: ov.Model) -> Rewrites:
    """Every rewrite of this module, applied to ``model`` in place. Read the output shapes
    the caller promises before: the outputs keep them only through ``output_orders``."""
    return Rewrites(fuse_focus(model), drop_output_transposes(model))
