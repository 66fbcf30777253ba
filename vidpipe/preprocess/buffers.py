"""Preallocated, reusable model-input buffers.

The pool holds ``2 x capacity`` buffers: while ``capacity`` requests infer from their buffers,
the preprocessing stage fills the others, so a free request slot is fed at once (double
buffering). After start-up nothing is allocated per frame; ``allocations`` counts every buffer
ever created so tests and the benchmark can check that.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vidpipe.preprocess.letterbox import hwc_to_chw_float, letterbox_geometry, letterbox_into
from vidpipe.types import DeviceImage, Image, Letterbox, TensorSpec


@dataclass(eq=False)
class InputBuffer:
    """One model input, ready to be handed to the backend.

    Attributes:
        index: position in the pool (stable; backends may cache per-buffer objects by it).
        hwc: ``(h, w, 3)`` uint8 letterbox target.
        tensor: what the backend receives: ``hwc`` itself viewed as ``(1, h, w, 3)`` when the
            model takes u8 NHWC, else a separate ``(1, 3, h, w)`` float32 array.
    """

    index: int
    hwc: npt.NDArray[np.uint8]
    tensor: np.ndarray

    def fill(self, image: Image) -> Letterbox:
        """Letterbox ``image`` into this buffer and convert it to the tensor layout.

        A ``DeviceImage`` is not touched here: the GPU backend letterboxes it straight into
        its batch's device input (no pixel crosses to the host); only the mapping is computed.
        """
        if isinstance(image, DeviceImage):
            scale, _, _ = letterbox_geometry(
                image.width, image.height, self.hwc.shape[1], self.hwc.shape[0]
            )
            return Letterbox(scale=scale, src_w=image.width, src_h=image.height)
        lb = letterbox_into(image, self.hwc)
        if self.tensor.dtype == np.float32:  # u8 NHWC tensors are a view of ``hwc`` already
            hwc_to_chw_float(self.hwc, self.tensor[0])
        return lb


class BufferPool:
    """A fixed set of input buffers with blocking acquire / release."""

    def __init__(self, spec: TensorSpec, count: int) -> None:
        if count < 1:
            raise ValueError(f"buffer pool needs at least one buffer, got {count}")
        self.spec = spec
        self.allocations = 0
        self._free: list[InputBuffer] = [self._make(i) for i in range(count)]
        self.buffers = tuple(self._free)
        self._cond = threading.Condition()

    def _make(self, index: int) -> InputBuffer:
        h, w = self.spec.height, self.spec.width
        self.allocations += 1
        hwc = np.full((h, w, 3), 114, np.uint8)
        if self.spec.layout == "NHWC" and self.spec.dtype == "u8":
            tensor: np.ndarray = hwc[np.newaxis]
        elif self.spec.layout == "NCHW" and self.spec.dtype == "f32":
            tensor = np.zeros((1, 3, h, w), np.float32)
        else:
            raise ValueError(f"unsupported input spec {self.spec}")
        return InputBuffer(index=index, hwc=hwc, tensor=tensor)

    def acquire(self, timeout_s: float) -> InputBuffer | None:
        """A free buffer, or None if none freed up within ``timeout_s``."""
        with self._cond:
            if not self._free and not self._cond.wait_for(lambda: bool(self._free), timeout_s):
                return None
            return self._free.pop()

    def release(self, buf: InputBuffer) -> None:
        with self._cond:
            self._free.append(buf)
            self._cond.notify()

    @property
    def free_count(self) -> int:
        with self._cond:
            return len(self._free)
