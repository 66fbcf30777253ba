"""Model-input memory that a backend lends to the preprocessing stage, one frame at a time.

The backend owns its input memory (the OpenVINO request's input tensor, a row of the stream
set's pinned batch) and lends it as an ``InputBuffer``: the scheduler letterboxes the frame
straight into it and submits it, so no frame is copied a second time. Every buffer is made
once, when its backend is built; ``allocations()`` counts every buffer ever made in the
process, so tests and the benchmark can check that nothing is allocated per frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vidpipe.preprocess.letterbox import hwc_to_chw_float, letterbox_geometry, letterbox_into
from vidpipe.types import DeviceImage, Image, Letterbox, TensorSpec

_allocations = 0


def allocations() -> int:
    """Input buffers made so far in this process (constant while a pipeline runs)."""
    return _allocations


@dataclass(eq=False)
class InputBuffer:
    """One frame's model input, in memory the backend owns and lends.

    Attributes:
        index: the backend's number for this memory (a request, a batch row).
        hwc: ``(h, w, 3)`` uint8 letterbox target.
        tensor: what the backend reads: ``hwc`` itself viewed as ``(1, h, w, 3)`` when the
            model takes u8 NHWC, else a ``(1, 3, h, w)`` float32 array (``hwc`` is then a
            scratch the letterbox goes through).
        device: the frame, when it is still on the GPU (an NVDEC picture): the GPU backend
            letterboxes it into its device batch and ``hwc`` is not touched.
    """

    index: int
    hwc: npt.NDArray[np.uint8]
    tensor: np.ndarray
    device: DeviceImage | None = None
    planes: tuple[npt.NDArray[np.uint8], ...] = ()  # f32 tensors: the channel split's scratch

    def fill(self, image: Image) -> Letterbox:
        """Letterbox ``image`` into this buffer and convert it to the tensor layout.

        A ``DeviceImage`` is not touched here: it is kept in ``device`` for the GPU backend,
        which letterboxes it straight into its batch's device input (no pixel crosses to the
        host); only the mapping is computed.
        """
        if isinstance(image, DeviceImage):
            self.device = image
            scale, _, _ = letterbox_geometry(
                image.width, image.height, self.hwc.shape[1], self.hwc.shape[0]
            )
            return Letterbox(scale=scale, src_w=image.width, src_h=image.height)
        self.device = None
        lb = letterbox_into(image, self.hwc)
        if self.tensor.dtype == np.float32:  # u8 NHWC tensors are a view of ``hwc`` already
            hwc_to_chw_float(self.hwc, self.tensor[0], self.planes)
        return lb


def input_buffer(spec: TensorSpec, index: int, tensor: np.ndarray | None = None) -> InputBuffer:
    """An ``InputBuffer`` over ``tensor`` (backend memory of ``spec.shape``), or over new
    memory when ``tensor`` is None (backends without memory of their own, tests).

    Raises:
        ValueError: an input spec other than u8 NHWC or f32 NCHW, or a ``tensor`` that does
            not match it.
    """
    global _allocations
    h, w = spec.height, spec.width
    if spec.layout == "NHWC" and spec.dtype == "u8":
        dtype: type = np.uint8
    elif spec.layout == "NCHW" and spec.dtype == "f32":
        dtype = np.float32
    else:
        raise ValueError(f"unsupported input spec {spec}")
    if tensor is None:
        tensor = np.full(spec.shape, 114, dtype)
    if tuple(tensor.shape) != tuple(spec.shape) or tensor.dtype != dtype:
        raise ValueError(
            f"input memory for {spec.name!r} must be {spec.dtype} {list(spec.shape)}, got "
            f"{tensor.dtype} {list(tensor.shape)}"
        )
    hwc = tensor[0] if dtype is np.uint8 else np.full((h, w, 3), 114, np.uint8)
    planes = () if dtype is np.uint8 else tuple(np.empty((h, w), np.uint8) for _ in range(3))
    _allocations += 1
    return InputBuffer(index=index, hwc=hwc, tensor=tensor, planes=planes)
