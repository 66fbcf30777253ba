"""An embedder model (person re-identification) on a CUDA device with PyTorch: crops already
on the device (``vidpipe.preprocess.crops``) in, L2-normalised embeddings out.

The model is the ONNX file converted once with onnx2torch, as the detector is
(``torch_executor``). Intel's person-reidentification-retail-0288 comes from TensorFlow with
its batch fixed at 1 in every Reshape (``[1, -1, 8]``, ``[1, 1, 1, 24]``); ``batchable`` writes
their leading 1 as 0 (ONNX: "copy this dimension from the input"), which is the batch in each
of them, and takes the batch axis out of the one ReduceMean over the whole tensor (the
picture's mean: over axis 0 too, which mixes crops in a batch), so that the crops of many
tracks run as one batch. Converted so, a batch of six crops of the walkway clip embeds as
OpenVINO embeds each alone (cosine above 0.9999 at f32 on the CPU build of PyTorch:
``tests/gpu/test_torch_embedder_gpu.py``, which runs on the GPU too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.infer import onnx_prep
from vidpipe.infer.base import BackendError
from vidpipe.preprocess.crops import CROP_SIZE


def batchable(model: Any) -> Any:
    """``model`` (an ``onnx.ModelProto``, changed in place) with a free batch dimension: the
    leading 1 of every constant Reshape target becomes 0 (copy the input's first dimension),
    no ReduceMean reduces over axis 0, and the graph's input and output name their first
    dimension ``batch``."""
    from onnx import numpy_helper

    constants = {init.name: init for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "ReduceMean":
            # a mean over the whole picture includes axis 0, the batch: with one crop the
            # same mean, with several it would mix them
            for attr in node.attribute:
                if attr.name == "axes" and 0 in attr.ints:
                    kept = [a for a in attr.ints if a != 0]
                    del attr.ints[:]
                    attr.ints.extend(kept)
        if node.op_type != "Reshape" or node.input[1] not in constants:
            continue
        target = numpy_helper.to_array(constants[node.input[1]]).copy()
        if target.size and target[0] == 1:
            target[0] = 0
            name = node.input[1]
            constants[name].CopyFrom(numpy_helper.from_array(target.astype(np.int64), name))
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    return model


class TorchEmbedder:
    """A ``reid`` model on one CUDA device (or the CPU, for tests), run on batches of crops.

    Args:
        path: the ONNX file.
        device: a ``torch.device``.
        half: run in float16 (the detector's ``precision: f16``).

    Raises:
        BackendError: onnx2torch is missing or cannot convert the model, or its input is not
            ``(1, 256, 128, 3)``.
    """

    def __init__(self, path: Path, device: Any, half: bool = False) -> None:
        import torch

        try:
            import onnx2torch
        except ImportError as exc:
            raise BackendError(f"a reid model on the GPU needs onnx2torch ({exc})") from None
        model = onnx_prep.load_model(path)
        dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        if dims[1:] != [CROP_SIZE[1], CROP_SIZE[0], 3]:
            raise BackendError(
                f"model {path} does not fit model type 'reid': input {dims}, expected "
                f"[1, {CROP_SIZE[1]}, {CROP_SIZE[0]}, 3] (NHWC crops)"
            )
        try:
            module = onnx2torch.convert(batchable(model))
        except Exception as exc:
            raise BackendError(f"onnx2torch cannot convert {path}: {exc}") from None
        self.torch = torch
        self.device = device
        self.dtype = torch.float16 if half else torch.float32
        self.module = module.eval().to(device=device, dtype=self.dtype)

    def embed(self, crops: Any) -> npt.NDArray[np.float32]:
        """``(M, 256, 128, 3)`` uint8 crops on the device -> ``(M, D)`` normalised float32
        embeddings on the host (one copy)."""
        torch = self.torch
        if crops.shape[0] == 0:
            return np.zeros((0, 0), np.float32)
        with torch.inference_mode():
            out = self.module(crops.to(self.device, self.dtype)).float().reshape(len(crops), -1)
            out = torch.nn.functional.normalize(out, dim=1)
        return out.cpu().numpy()
