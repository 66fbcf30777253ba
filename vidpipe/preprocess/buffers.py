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

from vidpipe.preprocess.letterbox import (
    DEFAULT_INPUT,
    ModelInput,
    hwc_to_chw_float,
    letterbox_geometry,
    letterbox_into,
)
from vidpipe.types import DeviceImage, FittedImage, Image, Letterbox, TensorSpec

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
        padded_for: the picture size ``(new_w, new_h)`` whose pad (``model_input``'s
            around it) ``hwc`` holds now; None: not known. Whoever writes ``hwc`` other than
            through ``fill`` must set it: None, or the geometry of the pad it wrote or copied.
        model_input: where the model type wants the picture, and its pad.
    """

    index: int
    hwc: npt.NDArray[np.uint8]
    tensor: np.ndarray
    device: DeviceImage | None = None
    planes: tuple[npt.NDArray[np.uint8], ...] = ()  # f32 tensors: the channel split's scratch
    padded_for: tuple[int, int] | None = None
    model_input: ModelInput = DEFAULT_INPUT

    def fill(self, image: Image) -> Letterbox:
        """Letterbox ``image`` into this buffer and convert it to the tensor layout.

        The pad is written only when the picture's size in the buffer differs from the one
        whose pad the buffer holds (``padded_for``): nothing but ``fill`` writes a lent
        buffer and a camera's frames all have one size, so the previous frame's pad is still
        there. For a 16:9 frame into 416x416 the pad is 44 % of the buffer. Where the rows
        are many and cold in the cache, as the GPU stream set's pinned batches are (4 I/O sets
        of 64 rows), a feeder filling 416x234 pictures spent 47-49 us of CPU per frame against
        70-84 us copying whole padded rows (2-core Xeon, the stream set on a fake GPU); on
        the H200 host ``python -m benchmarks.gpu`` reports the feeder's cores
        (``thread_cpu``). For a 1080p frame on the CPU path the resize (0.24-0.27 ms) hides the
        saving.

        A ``FittedImage`` was converted at its letterbox size already: it is copied into place.
        A ``DeviceImage`` is not touched here: it is kept in ``device`` for the GPU backend,
        which letterboxes it straight into its batch's device input (no pixel crosses to the
        host); only the mapping is computed, and ``hwc`` keeps the pad it had.
        """
        h, w = self.hwc.shape[:2]
        if isinstance(image, DeviceImage):
            self.device = image
            scale, _, _ = letterbox_geometry(image.width, image.height, w, h)
            return Letterbox(scale=scale, src_w=image.width, src_h=image.height)
        self.device = None
        if isinstance(image, FittedImage) and image.fit != (w, h):
            image = image.to_host()  # fitted for a model of another size (a reload changed it)
        if isinstance(image, FittedImage):
            lb = self._place_fitted(image)
        else:
            geometry = letterbox_geometry(image.shape[1], image.shape[0], w, h)
            new_size = geometry[1:]
            lb = letterbox_into(
                image,
                self.hwc,
                pad=self.padded_for != new_size,
                geometry=geometry,
                model_input=self.model_input,
            )
            self.padded_for = new_size
        if self.tensor.dtype == np.float32:  # u8 NHWC tensors are a view of ``hwc`` already
            hwc_to_chw_float(self.hwc, self.tensor[0], self.planes)
        return lb

    def _place_fitted(self, image: FittedImage) -> Letterbox:
        """Copy a picture converted at this input's letterbox size into place; the mapping is
        to the whole frame's pixels."""
        h, w = self.hwc.shape[:2]
        geometry = letterbox_geometry(image.width, image.height, w, h)
        new_size = geometry[1:]
        if image.fitted.shape[:2] != (new_size[1], new_size[0]):
            raise ValueError(f"fitted picture {image.fitted.shape} is not {new_size} for {w}x{h}")
        # the geometry says the picture is at its size already: it is copied, not resized
        placed = letterbox_into(
            image.fitted,
            self.hwc,
            pad=self.padded_for != new_size,
            geometry=geometry,
            model_input=self.model_input,
        )
        self.padded_for = new_size
        return Letterbox(
            scale=geometry[0],
            src_w=image.width,
            src_h=image.height,
            pad_x=placed.pad_x,
            pad_y=placed.pad_y,
        )


def input_buffer(
    spec: TensorSpec,
    index: int,
    tensor: np.ndarray | None = None,
    model_input: ModelInput = DEFAULT_INPUT,
) -> InputBuffer:
    """An ``InputBuffer`` over ``tensor`` (backend memory of ``spec.shape``), or over new
    memory when ``tensor`` is None (backends without memory of their own, tests), that
    letterboxes as ``model_input`` says.

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
    # ``padded_for`` starts unknown even over memory filled with 114 here: one pad write per
    # buffer is not worth a second rule, and a backend's own memory may hold anything.
    return InputBuffer(index=index, hwc=hwc, tensor=tensor, planes=planes, model_input=model_input)
