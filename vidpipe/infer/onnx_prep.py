"""Rewrite a detector's ONNX graph for the GPU executors.

Both GPU executors (TensorRT and PyTorch) run the same rewritten graph:

* the input becomes ``(N, H, W, 3)`` uint8 BGR, followed in the graph by ``Cast`` and
  ``Transpose`` to the model's float NCHW, so a frame crosses PCIe as 1 byte per channel and
  the conversion runs on the GPU;
* the batch dimension becomes dynamic (``N``): the input's and outputs' first dimension is
  named, and ``Reshape`` targets that hard-code the exported batch of 1 get 0 ("copy this
  dimension") instead.

Only the ``onnx`` package is needed (imported lazily).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vidpipe.infer.base import BackendError
from vidpipe.infer.gpu_base import ModelIO, TensorIO

BATCH_DIM = "batch"


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise BackendError(f"the GPU backends need the onnx package ({exc})") from None
    return onnx


def _dims(value_info: Any) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def load_model(path: Path) -> Any:
    """Read an ONNX model; BackendError naming the file if it cannot be read."""
    onnx = _onnx()
    if not path.is_file():
        raise BackendError(f"model file not found: {path}")
    if path.suffix.lower() != ".onnx":
        raise BackendError(f"the GPU backends need an ONNX model, got {path}")
    try:
        return onnx.load(str(path))
    except Exception as exc:
        raise BackendError(f"cannot read ONNX model {path}: {exc}") from None


def prepare(model: Any, path: Path, compute_dtype: str = "f32") -> tuple[Any, ModelIO]:
    """The rewritten model and its per-frame I/O.

    Args:
        model: an ``onnx.ModelProto`` with one NCHW float image input (modified in place).
        path: the model's file, for error messages.
        compute_dtype: ``f32``, or ``f16`` to cast the input to float16 (PyTorch half).

    Raises:
        BackendError: the graph does not have the expected shape.
    """
    onnx = _onnx()
    graph = model.graph
    init_names = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in init_names]
    if len(inputs) != 1:
        raise BackendError(f"model {path}: expected one input, found {len(inputs)}")
    old = inputs[0]
    dims = _dims(old)
    if len(dims) != 4 or dims[1] != 3 or not all(isinstance(d, int) and d > 0 for d in dims[2:]):
        raise BackendError(f"model {path}: expected an N x 3 x H x W input, got {dims}")
    h, w = int(dims[2]), int(dims[3])
    exported_batch = dims[0]
    u8_name = f"{old.name}_u8_nhwc"
    new_input = onnx.helper.make_tensor_value_info(
        u8_name, onnx.TensorProto.UINT8, [BATCH_DIM, h, w, 3]
    )
    to = onnx.TensorProto.FLOAT16 if compute_dtype == "f16" else onnx.TensorProto.FLOAT
    cast = onnx.helper.make_node("Cast", [u8_name], [f"{u8_name}_float"], to=to)
    transpose = onnx.helper.make_node(
        "Transpose", [f"{u8_name}_float"], [old.name], perm=[0, 3, 1, 2]
    )
    graph.input.remove(old)
    graph.input.insert(0, new_input)
    graph.node.insert(0, transpose)
    graph.node.insert(0, cast)
    if exported_batch == 1:
        _zero_batch_reshapes(graph, onnx)
    outputs = []
    for out in graph.output:
        odims = _dims(out)
        if not odims or not all(isinstance(d, int) and d > 0 for d in odims[1:]):
            raise BackendError(f"model {path}: output {out.name} needs a static shape: {odims}")
        out.type.tensor_type.shape.dim[0].dim_param = BATCH_DIM
        outputs.append(TensorIO(out.name, tuple(int(d) for d in odims[1:])))
    del graph.value_info[:]  # stale shapes with batch 1 would contradict the new batch dim
    return model, ModelIO(TensorIO(u8_name, (h, w, 3)), tuple(outputs))


def _zero_batch_reshapes(graph: Any, onnx: Any) -> None:
    """Reshape targets ``[1, ...]`` (the exported batch) become ``[0, ...]``: copy batch."""
    from onnx import numpy_helper

    shape_inputs = {n.input[1] for n in graph.node if n.op_type == "Reshape" and len(n.input) > 1}
    for i, init in enumerate(graph.initializer):
        if init.name not in shape_inputs:
            continue
        target = numpy_helper.to_array(init).copy()
        if target.ndim == 1 and target.size > 1 and target[0] == 1:
            target[0] = 0
            graph.initializer[i].CopyFrom(numpy_helper.from_array(target, init.name))
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] in shape_inputs:
            attr = next((a for a in node.attribute if a.name == "value"), None)
            if attr is None:
                continue
            target = numpy_helper.to_array(attr.t).copy()
            if target.ndim == 1 and target.size > 1 and target[0] == 1:
                target[0] = 0
                attr.t.CopyFrom(numpy_helper.from_array(target, attr.t.name))


def serialize(model: Any) -> bytes:
    """The model as ONNX bytes (for TensorRT's parser)."""
    return bytes(model.SerializeToString())
